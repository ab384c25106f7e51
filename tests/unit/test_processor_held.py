"""HeldSpans: the table of units under evaluation, on real SDK spans.

Each unit has an entry before it is submitted; its result settles it either to
the held span or, once the span went out, to the resource its carrier takes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanContext

from ragpulse.processor.held import Held, HeldSpans, SpanKey

WAIT = 10.0
RESOURCE = Resource.create({"service.name": "support-service"})


def ended_span(name: str = "support-bot", resource: Resource = RESOURCE) -> ReadableSpan:
    provider = TracerProvider(resource=resource)
    with provider.get_tracer("test").start_as_current_span(name) as span:
        pass
    return span  # type: ignore[return-value]


def span_id(span: ReadableSpan) -> SpanKey:
    assert span.context is not None
    return (span.context.trace_id, span.context.span_id)


class Expired:
    """Collects what the reaper hands on."""

    def __init__(self) -> None:
        self.spans: list[Held] = []
        self.retrievals: list[ReadableSpan] = []
        self.arrived = threading.Event()

    def __call__(self, expired: list[Held], stale: list[ReadableSpan]) -> None:
        self.spans.extend(expired)
        self.retrievals.extend(stale)
        self.arrived.set()


@pytest.fixture
def expired() -> Expired:
    return Expired()


@pytest.fixture
def table(expired: Expired) -> Iterator[HeldSpans]:
    held = HeldSpans(hold_timeout=60.0, max_spans=2, max_bytes=1000, on_expired=expired)
    yield held
    held.close()


def test_held_span_is_settled_to_itself_once(table: HeldSpans) -> None:
    span = ended_span()
    assert table.hold(span_id(span), span, 100)
    assert (table.count, table.bytes) == (1, 100)
    settled = table.settle(span_id(span))
    assert isinstance(settled, Held) and settled.span is span
    assert (table.count, table.bytes) == (0, 0)


def test_span_over_the_count_bound_is_entered_late_with_its_resource(table: HeldSpans) -> None:
    spans = [ended_span(), ended_span(), ended_span(resource=Resource.create({"late": "yes"}))]
    assert [table.hold(span_id(s), s, 10) for s in spans] == [True, True, False]
    assert table.count == 2
    assert table.settle(span_id(spans[2])) is spans[2].resource


def test_span_over_the_byte_bound_is_entered_late(table: HeldSpans) -> None:
    big = ended_span()
    assert not table.hold(span_id(big), big, 1001)
    assert (table.count, table.bytes) == (0, 0)
    assert table.settle(span_id(big)) is big.resource


def test_released_spans_settle_to_their_resource(table: HeldSpans) -> None:
    span = ended_span()
    table.hold(span_id(span), span, 10)
    (released,), waiting = table.release_all()
    assert released.span is span
    assert waiting == []
    assert (table.count, table.bytes) == (0, 0)
    assert table.settle(span_id(span)) is span.resource


def test_forget_says_whether_the_span_was_still_held(table: HeldSpans) -> None:
    held, late = ended_span(), ended_span()
    table.hold(span_id(held), held, 10)
    table.hold(span_id(late), late, 5000)
    assert table.forget(span_id(held))
    assert not table.forget(span_id(late))
    assert (table.count, table.bytes) == (0, 0)


def test_reaper_hands_on_spans_past_their_deadline_turned_late(expired: Expired) -> None:
    table = HeldSpans(hold_timeout=1.0, max_spans=10, max_bytes=10_000, on_expired=expired)
    try:
        span = ended_span()
        table.hold(span_id(span), span, 10)
        assert expired.arrived.wait(WAIT)
        assert [h.span for h in expired.spans] == [span]
        assert table.count == 0
        assert table.settle(span_id(span)) is span.resource
    finally:
        table.close()


def test_closed_table_holds_nothing_more(table: HeldSpans) -> None:
    span = ended_span()
    table.hold(span_id(span), span, 10)
    assert [h.span for h in table.close()[0]] == [span]
    later = ended_span()
    assert not table.hold(span_id(later), later, 10)


def test_late_entries_are_bounded_and_an_evicted_one_gets_the_last_resource_seen(
    expired: Expired,
) -> None:
    table = HeldSpans(hold_timeout=60.0, max_spans=0, max_bytes=0, on_expired=expired, max_late=2)
    try:
        first = ended_span(resource=Resource.create({"n": 1}))
        second = ended_span(resource=Resource.create({"n": 2}))
        third = ended_span(resource=Resource.create({"n": 3}))
        for span in (first, second, third):
            table.hold(span_id(span), span, 1)
        assert table.settle(span_id(first)) is third.resource  # evicted
        assert table.settle(span_id(second)) is second.resource
    finally:
        table.close()


def test_a_result_settles_exactly_once_whoever_races_it(expired: Expired) -> None:
    # The reaper and the results race over many spans; each one is either handed to the
    # reaper (then its result gets the resource) or settled as held, never both or neither.
    # The results come in one by one across the end of the hold (the last tenth of it and
    # as long after): on a busy machine the split moves, and whichever way they interleave
    # the same must hold.
    hold = 1.0
    table = HeldSpans(hold_timeout=hold, max_spans=10_000, max_bytes=10**9, on_expired=expired)
    try:
        spans = [ended_span() for _ in range(300)]
        for span in spans:
            table.hold(span_id(span), span, 1)
        first = time.monotonic() + 0.9 * hold
        step = 0.2 * hold / len(spans)
        settled_held = set()
        for n, span in enumerate(spans):
            while time.monotonic() < first + n * step:
                pass
            if isinstance(table.settle(span_id(span)), Held):
                settled_held.add(span_id(span))
        deadline = time.monotonic() + WAIT
        while len(expired.spans) + len(settled_held) < len(spans):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        reaped = {span_id(h.span) for h in expired.spans}
        assert not reaped & settled_held
        assert reaped | settled_held == {span_id(s) for s in spans}
    finally:
        table.close()


def test_units_of_two_traces_with_the_same_span_id_are_held_and_settled_apart(
    table: HeldSpans,
) -> None:
    # Span ids repeat across traces (many apps behind one ragpulse serve, any id generator):
    # one unit must never take the other's place, or a span is lost.
    first, second = (
        ReadableSpan(
            "support-bot",
            context=SpanContext(trace_id, 0x1234, is_remote=False),
            resource=RESOURCE,
        )
        for trace_id in (0xA1, 0xB2)
    )
    assert table.hold(span_id(first), first, 10)
    assert table.hold(span_id(second), second, 10)
    assert table.count == 2
    settled = [table.settle(span_id(span)) for span in (second, first)]
    assert [s.span for s in settled if isinstance(s, Held)] == [second, first]
