"""The one relay of ragpulse serve, for every signal: a failed export is retried, never
dropped, a request over the byte bound is cut below it, and the bytes what it forwards held
go back to the budget once it is delivered or dropped."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse.outputs.relay import Relay
from ragpulse.outputs.relayed import LOGS, TRACES, Item, encode_items
from ragpulse.serve._byte_budget import ByteBudget


class FlakyForwarder:
    """Fails the first ``failures`` requests, then takes everything."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts = 0
        self.delivered: list[Item] = []
        self.requests: list[bytes] = []

    def send(self, items: Sequence[Item]) -> bool:
        self.attempts += 1
        if self.attempts <= self.failures:
            return False
        self.delivered.extend(items)
        self.requests.append(encode_items(items))
        return True

    def shutdown(self) -> None:
        return None


def _spans(count: int) -> list[ReadableSpan]:
    return [
        ReadableSpan(name=f"s{i}", context=SpanContext(1, i + 1, False, TraceFlags(1)))
        for i in range(count)
    ]


def _logs(records: int, body_bytes: int) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    for index in range(records):
        scope.log_records.add().body.string_value = f"{index:06d}" + "x" * body_bytes
    return request


def test_failed_exports_are_retried_until_delivered_and_the_budget_is_freed() -> None:
    budget = ByteBudget(10_000)
    forwarder = FlakyForwarder(failures=2)
    relay = Relay(TRACES, forwarder, budget)
    spans = _spans(5)
    assert budget.reserve(500)
    budget.assign(spans, 500)

    for span in spans:
        relay.on_end(span)

    assert relay.force_flush(10_000)
    assert forwarder.delivered == spans
    assert forwarder.attempts == 3
    assert budget.used == 0
    relay.shutdown(timeout=1.0)


def test_shutdown_gives_up_on_an_unreachable_destination_and_counts_what_it_lost() -> None:
    budget = ByteBudget(10_000)
    relay = Relay(TRACES, FlakyForwarder(failures=10**9), budget)
    spans = _spans(3)
    assert budget.reserve(300)
    budget.assign(spans, 300)
    for span in spans:
        relay.on_end(span)

    relay.shutdown(timeout=0.5)

    assert relay.lost == 3 and relay.exported == 0
    assert budget.used == 0


def test_a_request_passed_through_whole_counts_its_spans_and_frees_its_bytes() -> None:
    budget = ByteBudget(10_000)
    relay = Relay(TRACES, FlakyForwarder(failures=0), budget)
    assert budget.reserve(700)

    relay.forward(ExportTraceServiceRequest().SerializeToString(), count=7, held=700)

    assert relay.force_flush(10_000)
    assert relay.exported == 7
    assert budget.used == 0
    relay.shutdown(timeout=1.0)


def test_a_batch_refused_past_the_retry_bound_is_dropped_and_counted_not_retried_forever() -> None:
    budget = ByteBudget(10_000)
    lost: list[int] = []
    relay = Relay(
        TRACES,
        FlakyForwarder(failures=10**9),
        budget,
        max_retry_seconds=0.3,
        on_lost=lost.append,
    )
    spans = _spans(2)
    assert budget.reserve(200)
    budget.assign(spans, 200)
    for span in spans:
        relay.on_end(span)

    assert relay.force_flush(10_000)
    assert relay.lost == 2 and lost == [2]
    assert budget.used == 0
    relay.shutdown(timeout=0.5)


def test_a_logs_request_over_the_byte_bound_leaves_cut_below_it_in_order_and_whole() -> None:
    budget = ByteBudget(1 << 20)
    forwarder = FlakyForwarder(failures=0)
    relay = Relay(LOGS, forwarder, budget, max_batch_bytes=4096)
    request = _logs(records=40, body_bytes=300)
    data = request.SerializeToString()
    assert len(data) > 3 * 4096
    assert budget.reserve(len(data))

    relay.forward(data, LOGS.count(request), len(data), request)

    assert relay.force_flush(10_000)
    assert all(len(sent) <= 4096 for sent in forwarder.requests)
    assert len(forwarder.requests) > 1
    received = [ExportLogsServiceRequest.FromString(sent) for sent in forwarder.requests]
    bodies = [
        record.body.string_value[:6]
        for part in received
        for resource in part.resource_logs
        for scope in resource.scope_logs
        for record in scope.log_records
    ]
    assert bodies == [f"{index:06d}" for index in range(40)]
    assert relay.exported == 40
    assert budget.used == 0
    relay.shutdown(timeout=1.0)


def test_the_parts_of_a_cut_request_hold_together_what_the_request_held() -> None:
    budget = ByteBudget(1 << 20)
    forwarder = FlakyForwarder(failures=10**9)
    relay = Relay(TRACES, forwarder, budget, max_batch_bytes=2048)
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for index in range(30):
        span = scope.spans.add(name="n" * 200)
        span.trace_id, span.span_id = bytes(15) + b"\x01", index.to_bytes(8, "big")
    data = request.SerializeToString()
    assert budget.reserve(10_007)

    relay.forward(data, 30, 10_007, request)
    relay.shutdown(timeout=0.5)

    # Every part was dropped: had their shares not added up to what the request held, the
    # budget would not be back at zero.
    assert relay.lost == 30
    assert budget.used == 0
    assert forwarder.attempts >= 1
