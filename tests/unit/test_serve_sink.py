"""The forwarding sink of ragpulse serve: a failed export is retried, never dropped, and the
bytes a span held go back to the budget once it is delivered."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse.serve._byte_budget import ByteBudget
from ragpulse.serve._encode import RawSpans
from ragpulse.serve._forwarding import ForwardingSink


class FlakyExporter(SpanExporter):
    """Fails the first ``failures`` exports, then takes everything."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts = 0
        self.delivered: list[object] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.attempts += 1
        if self.attempts <= self.failures:
            return SpanExportResult.FAILURE
        self.delivered.extend(spans)
        return SpanExportResult.SUCCESS


def _spans(count: int) -> list[ReadableSpan]:
    return [
        ReadableSpan(name=f"s{i}", context=SpanContext(1, i + 1, False, TraceFlags(1)))
        for i in range(count)
    ]


def test_failed_exports_are_retried_until_delivered_and_the_budget_is_freed() -> None:
    budget = ByteBudget(10_000)
    exporter = FlakyExporter(failures=2)
    sink = ForwardingSink(exporter, budget)
    spans = _spans(5)
    assert budget.reserve(500)
    budget.assign(spans, 500)

    for span in spans:
        sink.on_end(span)

    assert sink.force_flush(10_000)
    assert exporter.delivered == spans
    assert exporter.attempts == 3
    assert budget.used == 0
    sink.shutdown(timeout=1.0)


def test_shutdown_gives_up_on_an_unreachable_destination_and_counts_what_it_lost() -> None:
    budget = ByteBudget(10_000)
    sink = ForwardingSink(FlakyExporter(failures=10**9), budget)
    spans = _spans(3)
    assert budget.reserve(300)
    budget.assign(spans, 300)
    for span in spans:
        sink.on_end(span)

    sink.shutdown(timeout=0.5)

    assert sink.lost == 3 and sink.exported == 0
    assert budget.used == 0


def test_a_request_passed_through_whole_counts_its_spans_and_frees_its_bytes() -> None:
    budget = ByteBudget(10_000)
    exporter = FlakyExporter(failures=0)
    sink = ForwardingSink(exporter, budget)
    assert budget.reserve(700)

    sink.forward_raw(RawSpans(ExportTraceServiceRequest().SerializeToString(), count=7, size=700))

    assert sink.force_flush(10_000)
    assert sink.exported == 7
    assert budget.used == 0
    sink.shutdown(timeout=1.0)


def test_a_batch_refused_past_the_retry_bound_is_dropped_and_counted_not_retried_forever() -> None:
    budget = ByteBudget(10_000)
    lost: list[int] = []
    sink = ForwardingSink(
        FlakyExporter(failures=10**9),
        budget,
        max_retry_seconds=0.3,
        on_lost=lost.append,
    )
    spans = _spans(2)
    assert budget.reserve(200)
    budget.assign(spans, 200)
    for span in spans:
        sink.on_end(span)

    assert sink.force_flush(10_000)
    assert sink.lost == 2 and lost == [2]
    assert budget.used == 0
    sink.shutdown(timeout=0.5)
