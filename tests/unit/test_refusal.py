"""Refused for good or worth retrying: the two kinds of OTLP failure, and what delivery does.

A request the backend refuses for good (HTTP 405 from a traces-only backend, gRPC
UNIMPLEMENTED) is dropped at once and counted; a failure worth retrying (503, no answer)
stays queued and is sent again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ragpulse.outputs.delivery import DROP_REFUSED, DeliveringSpanExporter
from ragpulse.outputs.refusal import Refusals, grpc_refusal, http_refusal, take_refusal, watch


@pytest.mark.parametrize(
    ("status", "refused"),
    [
        (200, False),
        (None, False),  # no answer at all: a connection error, retried
        (429, False),
        (502, False),
        (503, False),
        (504, False),
        (400, True),
        (401, True),
        (404, True),
        (405, True),
        (413, True),
        (500, True),
    ],
)
def test_http_statuses_are_final_or_retryable_as_otlp_says(
    status: int | None, refused: bool
) -> None:
    assert (http_refusal(status, "Reason") is not None) is refused


@pytest.mark.parametrize(
    ("code", "refused"),
    [
        ("OK", False),
        ("UNAVAILABLE", False),
        ("DEADLINE_EXCEEDED", False),
        ("RESOURCE_EXHAUSTED", False),
        ("CANCELLED", False),
        ("ABORTED", False),
        ("OUT_OF_RANGE", False),
        ("DATA_LOSS", False),
        ("UNIMPLEMENTED", True),
        ("INVALID_ARGUMENT", True),
        ("UNAUTHENTICATED", True),
        ("PERMISSION_DENIED", True),
        ("NOT_FOUND", True),
        ("INTERNAL", True),
    ],
)
def test_grpc_codes_are_final_or_retryable_as_otlp_says(code: str, refused: bool) -> None:
    assert (grpc_refusal(code) is not None) is refused


def test_a_refusal_is_read_once_and_only_on_the_thread_that_sent() -> None:
    refusals = Refusals()
    exporter = object.__new__(SpanExporter)
    watch(exporter, refusals)
    refusals.note("HTTP 405 Method Not Allowed")
    seen: list[str | None] = []
    other = threading.Thread(target=lambda: seen.append(take_refusal(exporter)))
    other.start()
    other.join()
    assert seen == [None]
    assert take_refusal(exporter) == "HTTP 405 Method Not Allowed"
    assert take_refusal(exporter) is None
    assert take_refusal(object.__new__(SpanExporter)) is None  # never watched


class Backend(SpanExporter):
    """Takes spans named ``ok*``; refuses ``no*`` for good and fails ``down*`` for now."""

    def __init__(self) -> None:
        self.refusals = Refusals()
        watch(self, self.refusals)
        self.attempts: list[str] = []
        self.taken: list[str] = []
        self.down = True

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        name = spans[0].name
        self.attempts.append(name)
        self.refusals.note(None)
        if name.startswith("no"):
            self.refusals.note("HTTP 405 Method Not Allowed")
            return SpanExportResult.FAILURE
        if name.startswith("down") and self.down:
            self.down = False  # up again for the retry
            return SpanExportResult.FAILURE
        self.taken.extend(span.name for span in spans)
        return SpanExportResult.SUCCESS


def spans(*names: str) -> list[ReadableSpan]:
    tracer = TracerProvider().get_tracer("test")
    made = []
    for name in names:
        span = tracer.start_span(name)
        span.end()
        made.append(span)
    return made  # type: ignore[return-value]


def test_a_refused_export_is_dropped_once_and_what_follows_is_delivered() -> None:
    backend = Backend()
    drops: list[tuple[str, str, int]] = []
    wrapped = DeliveringSpanExporter(
        backend,
        max_batch_bytes=1 << 20,
        max_buffer_bytes=1 << 24,
        max_buffer_age=600.0,
        shutdown_timeout=30.0,
        on_drop=lambda *drop: drops.append(drop),
    )
    wrapped.export(spans("no-1", "no-2"))
    wrapped.export(spans("down-1"))
    wrapped.export(spans("ok-1"))
    # Everything settles: the refused batch is not waiting for a retry that cannot help.
    assert wrapped.force_flush(60_000) is True
    assert backend.attempts.count("no-1") == 1
    assert backend.attempts.count("down-1") == 2  # a failure worth retrying was retried
    assert backend.taken == ["down-1", "ok-1"]
    assert drops == [("traces", DROP_REFUSED, 2)]
    wrapped.shutdown()
