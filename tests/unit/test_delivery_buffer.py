"""``ragpulse.outputs.delivery``: batches are queued, retried, bounded and split, never blocking.

The backend here is the SDK's in-memory exporter behind a switch: while it is down, every
export fails the way an OTLP exporter's does when the collector restarts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragpulse.outputs.delivery import (
    DROP_BUFFER_FULL,
    DROP_EXPIRED,
    DROP_SHUTDOWN,
    DROP_TOO_LARGE,
    DeliveringSpanExporter,
    ExitDeadline,
)


class Backend(SpanExporter):
    """An in-memory backend that can be down, and that records each request's size."""

    def __init__(self) -> None:
        self.memory = InMemorySpanExporter()
        self.up = threading.Event()
        self.up.set()
        self.requests: list[int] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.up.is_set():
            return SpanExportResult.FAILURE
        self.requests.append(len(spans))
        return self.memory.export(spans)

    def names(self) -> list[str]:
        return [span.name for span in self.memory.get_finished_spans()]


def spans(count: int, size: int = 0, prefix: str = "s") -> list[ReadableSpan]:
    tracer = TracerProvider().get_tracer("test")
    made = []
    for i in range(count):
        span = tracer.start_span(f"{prefix}{i}")
        if size:
            span.set_attribute("payload", "x" * size)
        span.end()
        made.append(span)
    return made  # type: ignore[return-value]


Drops = list[tuple[str, str, int]]


def exporter(backend: Backend, drops: Drops, **options: object) -> DeliveringSpanExporter:
    settings: dict[str, object] = {
        "max_batch_bytes": 1 << 20,
        "max_buffer_bytes": 1 << 24,
        "max_buffer_age": 60.0,
        "shutdown_timeout": 2.0,
        "on_drop": lambda *drop: drops.append(drop),
    }
    settings.update(options)
    return DeliveringSpanExporter(backend, **settings)  # type: ignore[arg-type]


def test_export_does_not_wait_for_a_backend_that_is_down() -> None:
    backend, drops = Backend(), []
    backend.up.clear()
    wrapped = exporter(backend, drops)
    started = time.monotonic()
    assert wrapped.export(spans(10)) is SpanExportResult.SUCCESS
    assert time.monotonic() - started < 1.0
    wrapped.shutdown(timeout_millis=0)


def test_spans_queued_while_the_backend_is_down_arrive_in_order_when_it_is_back() -> None:
    backend, drops = Backend(), []
    backend.up.clear()
    wrapped = exporter(backend, drops)
    wrapped.export(spans(3, prefix="a"))
    wrapped.export(spans(3, prefix="b"))
    assert wrapped.force_flush(300) is False  # the truth: not delivered yet
    backend.up.set()
    assert wrapped.force_flush(10_000) is True
    assert backend.names() == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert drops == []
    wrapped.shutdown()


def test_a_batch_over_the_request_limit_is_split_into_requests_under_it() -> None:
    backend, drops = Backend(), []
    wrapped = exporter(backend, drops, max_batch_bytes=64 * 1024)
    wrapped.export(spans(22, size=20 * 1024))
    assert wrapped.force_flush(10_000)
    assert len(backend.names()) == 22
    assert len(backend.requests) > 1 and all(n <= 3 for n in backend.requests)
    wrapped.shutdown()


def test_a_single_span_over_the_request_limit_is_dropped_and_counted_alone() -> None:
    backend, drops = Backend(), []
    wrapped = exporter(backend, drops, max_batch_bytes=64 * 1024)
    batch = spans(4)
    batch.insert(2, spans(1, size=100 * 1024, prefix="huge")[0])
    wrapped.export(batch)
    assert wrapped.force_flush(10_000)
    assert backend.names() == ["s0", "s1", "s2", "s3"]
    assert drops == [("traces", DROP_TOO_LARGE, 1)]
    wrapped.shutdown()


def test_the_buffer_drops_its_oldest_exports_past_its_byte_bound_and_counts_them() -> None:
    backend, drops = Backend(), []
    backend.up.clear()
    wrapped = exporter(backend, drops, max_buffer_bytes=30 * 1024)
    for i in range(5):
        wrapped.export(spans(1, size=10 * 1024, prefix=f"b{i}-"))
    assert wrapped.delivery.queued_bytes <= 30 * 1024
    backend.up.set()
    assert wrapped.force_flush(10_000)
    assert sum(count for _, reason, count in drops if reason == DROP_BUFFER_FULL) == 5 - len(
        backend.names()
    )
    assert backend.names()[-1] == "b4-0"  # the newest survive
    wrapped.shutdown()


def test_exports_older_than_the_buffer_age_are_dropped_and_counted() -> None:
    backend, drops = Backend(), []
    backend.up.clear()
    wrapped = exporter(backend, drops, max_buffer_age=0.3)
    wrapped.export(spans(4))
    deadline = time.monotonic() + 10
    while not drops and time.monotonic() < deadline:
        time.sleep(0.05)
    assert drops == [("traces", DROP_EXPIRED, 4)]
    wrapped.shutdown(timeout_millis=0)


def test_shutdown_waits_no_longer_than_its_timeout_and_counts_what_it_leaves() -> None:
    backend, drops = Backend(), []
    backend.up.clear()
    wrapped = exporter(backend, drops, shutdown_timeout=0.5)
    wrapped.export(spans(7))
    started = time.monotonic()
    wrapped.shutdown(timeout_millis=30_000)  # the SDK passes 30 s; ours is the bound
    assert time.monotonic() - started < 3.0
    assert drops == [("traces", DROP_SHUTDOWN, 7)]
    assert wrapped.export(spans(1)) is SpanExportResult.FAILURE
    assert drops[-1] == ("traces", DROP_SHUTDOWN, 1)


def test_one_exit_deadline_bounds_every_signal_together() -> None:
    deadline = ExitDeadline()
    backends = [Backend() for _ in range(3)]
    drops: Drops = []
    wrapped = [exporter(b, drops, deadline=deadline, shutdown_timeout=5.0) for b in backends]
    for backend, one in zip(backends, wrapped, strict=True):
        backend.up.clear()
        one.export(spans(2))
    deadline.start(0.6)
    started = time.monotonic()
    for one in wrapped:
        one.shutdown()
    assert time.monotonic() - started < 3.0
    assert sum(count for *_, count in drops) == 6


def test_a_shutdown_given_a_longer_grace_than_the_default_delivers_within_it() -> None:
    # shutdown(120) on a busy machine: the backend comes back after the default grace
    # (0.5 s here) has passed, but well within the grace the handle was given.
    deadline = ExitDeadline()
    backend, drops = Backend(), []
    backend.up.clear()
    wrapped = exporter(backend, drops, deadline=deadline, shutdown_timeout=0.5)
    wrapped.export(spans(3))
    deadline.start(60.0)
    comes_back = threading.Timer(1.5, backend.up.set)
    comes_back.start()
    wrapped.shutdown()  # as the SDK's batch processor calls it: no timeout of its own
    comes_back.join()
    assert drops == []
    assert backend.names() == ["s0", "s1", "s2"]


@pytest.mark.parametrize("up", [True, False])
def test_force_flush_says_whether_everything_was_delivered(up: bool) -> None:
    backend, drops = Backend(), []
    if not up:
        backend.up.clear()
    wrapped = exporter(backend, drops)
    wrapped.export(spans(2))
    assert wrapped.force_flush(2_000) is up
    wrapped.shutdown(timeout_millis=0)


def varied_spans() -> list[ReadableSpan]:
    from opentelemetry.trace import Link, Status, StatusCode

    tracer = TracerProvider().get_tracer("bound", "1.0")
    made: list[ReadableSpan] = []
    for i in range(40):
        with tracer.start_as_current_span(f"span-{i}-" + "é" * i) as span:
            span.set_attribute("text", "x" * (i * 37))
            span.set_attribute("unicode", "数据" * i)
            span.set_attribute("number", i * 1.5)
            span.set_attribute("count", 2**40 + i)
            span.set_attribute("flag", bool(i % 2))
            span.set_attribute("list", [f"item-{j}" for j in range(i % 7)])
            span.set_attribute("ints", list(range(i % 5)))
            span.add_event("event", {"detail": "d" * i, "n": i})
            span.set_status(Status(StatusCode.ERROR, "failed " * (i % 3)))
            other = span.get_span_context()
        made.append(span)  # type: ignore[arg-type]
        with tracer.start_as_current_span("linked", links=[Link(other, {"why": "follows"})]) as s:
            made.append(s)  # type: ignore[arg-type]
    return made


def test_the_size_bound_is_never_below_the_encoded_size() -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from ragpulse.outputs.delivery import span_size_bound

    batch = varied_spans()
    for n in (1, 2, 5, len(batch)):
        for start in range(0, len(batch) - n + 1, max(1, n)):
            part = batch[start : start + n]
            assert span_size_bound(part) >= encode_spans(part).ByteSize()


def test_serve_measures_a_rebuilt_span_without_encoding_it_and_never_below_its_size() -> None:
    """``ragpulse serve`` sizes its batches of scored spans from their fields: what it counts
    for a batch is never less than the request they encode to, so no batch it sends passes
    the downstream limit; a batch counted near the limit is measured exactly."""
    from ragpulse.outputs.relayed import encode_items, items_bytes

    batch = varied_spans()
    for n in (1, 2, 5, len(batch)):
        for start in range(0, len(batch) - n + 1, max(1, n)):
            part = batch[start : start + n]
            encoded = len(encode_items(part))
            assert items_bytes(part, 4 * 1024 * 1024) >= encoded
            assert items_bytes(part, 1) == encoded  # over the limit: exact


def test_the_log_size_bound_is_never_below_the_encoded_size() -> None:
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    from ragpulse.outputs.delivery import log_size_bound

    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("bound")
    from opentelemetry._logs import LogRecord

    for i in range(30):
        logger.emit(
            LogRecord(
                body={"text": "b" * i * 11, "list": ["é" * i]} if i % 2 else "plain " * i,
                attributes={
                    "gen_ai.evaluation.name": "faithfulness",
                    "score": i / 30,
                    "explanation": "é" * i,
                    "tags": ["a"] * (i % 4),
                    "naïve": i,
                    "flag": bool(i % 2),
                },
                event_name="gen_ai.evaluation.result",
            )
        )
    records = list(memory.get_finished_logs())
    for i in range(len(records)):
        assert log_size_bound(records[i : i + 1]) >= encode_logs(records[i : i + 1]).ByteSize()
    assert log_size_bound(records) >= encode_logs(records).ByteSize()


def test_backoff_doubles_from_the_first_failure_and_stays_bounded_after_any_number() -> None:
    # A close past its deadline retries without waiting; thousands of failures in a row
    # once overflowed the doubling and ended the sending thread.
    from ragpulse.outputs.delivery import BACKOFF_INITIAL, BACKOFF_MAX, backoff_after

    assert backoff_after(1) == BACKOFF_INITIAL
    assert backoff_after(2) == 2 * BACKOFF_INITIAL
    assert backoff_after(10_000) == BACKOFF_MAX


def test_exports_put_one_by_one_within_the_linger_go_out_as_one_request() -> None:
    backend: Backend = Backend()
    drops: Drops = []
    # A linger far longer than putting ten exports takes: they all join the first.
    wrapped = exporter(backend, drops, coalesce=512, linger=30.0)
    for span in spans(10):
        wrapped.export([span])

    assert wrapped.force_flush(10_000)  # a flush sends what lingers at once

    assert backend.requests == [10]
    wrapped.shutdown()


def _until(done: object, timeout: float = 60.0) -> bool:
    """Poll ``done()`` until it is true or ``timeout`` passes (a bound for a hang)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if done():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize(
    ("count", "size", "options"),
    [(5, 0, {"coalesce": 5}), (4, 10_000, {"coalesce": 512, "max_batch_bytes": 64 * 1024})],
    ids=["coalesce-exports", "half-a-request"],
)
def test_a_lingering_export_leaves_once_enough_joins_it_not_at_the_linger(
    count: int, size: int, options: dict[str, object]
) -> None:
    backend: Backend = Backend()
    drops: Drops = []
    # A linger no test waits for: only enough company may send these.
    wrapped = exporter(backend, drops, linger=600.0, **options)
    first, *rest = spans(count, size=size)
    wrapped.export([first])
    assert _until(lambda: wrapped.delivery.lingering)  # the sender waits for company now
    for span in rest:
        wrapped.export([span])

    assert _until(lambda: sum(backend.requests) == count)
    assert backend.requests[0] > 1  # it did wait for company, and left when it had enough
    wrapped.shutdown()


def test_exports_queued_behind_a_failing_one_are_merged_up_to_the_byte_bound() -> None:
    backend: Backend = Backend()
    drops: Drops = []
    backend.up.clear()
    wrapped = exporter(backend, drops, coalesce=512, max_batch_bytes=64 * 1024)
    for span in spans(12, size=10_000):
        wrapped.export([span])
    backend.up.set()

    assert wrapped.force_flush(30_000)

    assert sum(backend.requests) == 12 and len(backend.requests) < 12
    assert drops == []
    wrapped.shutdown()
