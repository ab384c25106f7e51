"""``TraceBuffer``: a bounded per-trace store of finished spans.

The processor adds the retrieval and LLM spans of an instrumented trace as they
end, and takes the trace's spans out when its local root ends. Everything about
it is bounded, and every bound that bites is counted: a trace can hold at most
``max_spans_per_trace`` spans, all traces together at most ``max_bytes`` (an
estimate from attribute and event sizes), and at most ``max_traces`` traces are
open at once. Past the trace or the byte bound the oldest open traces are evicted,
so traces whose root never ends here cannot hold the buffer (and with it the
evaluation of every later trace) forever. An evicted trace is remembered as lost:
its later spans are refused and its root finds nothing, so it is never judged on
part of its evidence.

It holds the GenAI content log events of the same traces too (``add_event``; the
instrumentation's legacy message events and its operation details event, ``_content_events``),
within the same byte and trace bounds and at most ``max_events_per_trace`` per trace; ``take``
gives the trace's spans with their events' content read onto them. An event refused by a
bound counts as a refused span (the trace is not judged on part of its content); an event
for a trace already taken comes too late to be read, and is dropped (``events_dropped``
counts both).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragpulse.adapters._common import attributes_bytes, attributes_of
from ragpulse.adapters._content_events import ContentEvent, join_content

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

# Fixed cost of a span object beyond its strings (ids, times, status, refs).
_SPAN_OVERHEAD_BYTES = 256


def estimate_bytes(span: ReadableSpan) -> int:
    """A cheap estimate of what holding ``span`` costs: its strings dominate."""
    size = _SPAN_OVERHEAD_BYTES + len(span.name)
    size += attributes_bytes(attributes_of(span))
    for event in span.events:
        size += len(event.name) + attributes_bytes(event.attributes)
    return size


@dataclass(slots=True)
class _Trace:
    spans: list[ReadableSpan] = field(default_factory=list)
    bytes: int = 0
    refused: int = 0
    """Spans of this trace a bound refused: its record would be read from part of it."""
    events: list[ContentEvent] = field(default_factory=list)
    """GenAI content log events of its spans, in the order they were emitted."""


class TraceBuffer:
    """Finished spans grouped by trace id, within count, byte and trace bounds.

    Thread-safe: ``add`` runs on whatever thread ends a span, ``pop_trace`` on the
    thread that ends the local root.
    """

    def __init__(
        self,
        *,
        max_traces: int = 1000,
        max_spans_per_trace: int = 256,
        max_bytes: int = 16 * 1024 * 1024,
        max_events_per_trace: int = 4096,
    ) -> None:
        if min(max_traces, max_spans_per_trace, max_bytes, max_events_per_trace) < 1:
            raise ValueError("TraceBuffer bounds must be at least 1")
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.max_events_per_trace = max_events_per_trace
        self.max_bytes = max_bytes
        # Insertion order is trace age: the first entry is the oldest open trace.
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        # Traces evicted while open, oldest first (at most max_traces remembered).
        self._lost: OrderedDict[int, None] = OrderedDict()
        # Spans refused for traces with nothing held (a lone span past max_bytes).
        self._refused: OrderedDict[int, int] = OrderedDict()
        # Traces already taken (at most max_traces remembered): their events come too late.
        self._taken: OrderedDict[int, None] = OrderedDict()
        self._bytes = 0
        self._spans = 0
        self._events = 0
        self._events_dropped: dict[str, int] = {}
        self._dropped = 0
        self._evicted = 0
        self._lock = threading.Lock()

    def add(self, span: ReadableSpan) -> bool:
        """Hold ``span`` until its trace is popped; ``False`` when a bound refused it."""
        context = span.context
        if context is None:
            return False
        # Sized outside the lock: it reads only the span, which no longer changes.
        size = estimate_bytes(span)
        trace_id = context.trace_id
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace_id in self._lost:
                self._dropped += 1
                return False
            if (trace is not None and len(trace.spans) >= self.max_spans_per_trace) or (
                trace.bytes if trace is not None else 0
            ) + size > self.max_bytes:
                self._dropped += 1
                if trace is not None:
                    trace.refused += 1
                else:
                    # No trace open to count it on: remembered apart (within max_traces),
                    # so its root still knows it lacks a part.
                    self._refused[trace_id] = self._refused.get(trace_id, 0) + 1
                    if len(self._refused) > self.max_traces:
                        self._refused.popitem(last=False)
                return False
            while self._bytes + size > self.max_bytes:
                # Older traces make room: the span's own trace fits alone (checked above).
                self._evict_oldest(but=trace_id)
            if trace is None:
                if len(self._traces) >= self.max_traces:
                    self._evict_oldest()
                trace = self._traces[context.trace_id] = _Trace()
            trace.spans.append(span)
            trace.bytes += size
            self._bytes += size
            self._spans += 1
            return True

    def add_event(self, event: ContentEvent) -> bool:
        """Hold ``event`` with its trace until the trace is taken; ``False`` when it came
        too late (its trace was taken) or a bound refused it."""
        trace_id = event.trace_id
        with self._lock:
            if trace_id in self._taken:
                self._drop_event("late")
                return False
            trace = self._traces.get(trace_id)
            if trace_id in self._lost or event.size > self.max_bytes:
                self._drop_event("bounds")
                return False
            if trace is not None and (
                len(trace.events) >= self.max_events_per_trace
                or trace.bytes + event.size > self.max_bytes
            ):
                trace.refused += 1
                self._drop_event("bounds")
                return False
            while self._bytes + event.size > self.max_bytes:
                self._evict_oldest(but=trace_id)
            if trace is None:
                if len(self._traces) >= self.max_traces:
                    self._evict_oldest()
                trace = self._traces[trace_id] = _Trace()
            trace.events.append(event)
            trace.bytes += event.size
            self._bytes += event.size
            self._events += 1
            return True

    def _drop_event(self, reason: str) -> None:
        # Caller holds the lock.
        self._events_dropped[reason] = self._events_dropped.get(reason, 0) + 1

    def drop_event(self, reason: str) -> None:
        """Count an event its holder could not hand to the buffer (``reason``: a bound)."""
        with self._lock:
            self._drop_event(reason)

    def pop_trace(self, trace_id: int) -> list[ReadableSpan]:
        """Take out every span held for ``trace_id`` (an empty list when none are)."""
        return self.take(trace_id)[0]

    def take(self, trace_id: int) -> tuple[list[ReadableSpan], int]:
        """Take out every span held for ``trace_id``, with its content events read onto it
        (``_content_events.join_content``), and how many of its spans and events the
        per-trace bounds refused (its record is then read from part of the trace)."""
        with self._lock:
            trace = self._traces.pop(trace_id, None)
            refused = self._refused.pop(trace_id, 0) if self._refused else 0
            if trace is None:
                self._lost.pop(trace_id, None)  # its root ended: nothing more will come
                return [], refused
            self._bytes -= trace.bytes
            self._spans -= len(trace.spans)
            if trace.events:
                self._events -= len(trace.events)
                self._taken[trace_id] = None
                if len(self._taken) > self.max_traces:
                    self._taken.popitem(last=False)
        if not trace.events:
            return trace.spans, trace.refused + refused
        # Joined outside the lock: it reads only what this call took out.
        return join_content(trace.spans, trace.events), trace.refused + refused

    def _evict_oldest(self, but: int | None = None) -> None:
        # Caller holds the lock. The evicted spans are lost to evaluation, not to
        # export: they were forwarded downstream when they ended.
        trace_id = next(tid for tid in self._traces if tid != but)
        trace = self._traces.pop(trace_id)
        self._lost[trace_id] = None
        if len(self._lost) > self.max_traces:
            self._lost.popitem(last=False)
        self._bytes -= trace.bytes
        self._spans -= len(trace.spans)
        self._dropped += len(trace.spans)
        if trace.events:
            self._events -= len(trace.events)
            self._events_dropped["bounds"] = self._events_dropped.get("bounds", 0) + len(
                trace.events
            )
        self._evicted += 1

    @property
    def bytes(self) -> int:
        """Estimated bytes held now."""
        return self._bytes

    @property
    def spans(self) -> int:
        """Spans held now."""
        return self._spans

    @property
    def events(self) -> int:
        """Content events held now."""
        return self._events

    @property
    def events_dropped(self) -> dict[str, int]:
        """Content events not read with their trace so far, by reason: ``bounds`` (refused,
        or held by an evicted trace), ``late`` (their trace was already taken)."""
        with self._lock:
            return dict(self._events_dropped)

    @property
    def traces(self) -> int:
        """Traces held now."""
        return len(self._traces)

    @property
    def dropped(self) -> int:
        """Spans lost so far: refused by a bound, or held by an evicted trace."""
        return self._dropped

    @property
    def evicted(self) -> int:
        """Traces evicted so far because ``max_traces`` were open."""
        return self._evicted
