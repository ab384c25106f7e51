"""``TraceAssembler``: spans of a trace arrive in any order; a unit waits for its children.

In a process the evaluation unit's span ends last, after its retrieval and LLM
children, so the processor can read the trace when the unit ends. A relay sees
spans in whatever order senders and Collectors batch them. The assembler holds
back only the units (a ragpulse ``@rag`` span, or a trace's local root) and
lets every other span through at once, keeping a reference to the retrieval and
LLM spans a record is read from. A unit goes on to the ``EvaluatingSpanProcessor``
when its record has what it needs (the answer and, for a ``@rag`` unit, as many
contexts as it reported), when ``timeout`` passes, when the service drains, or
when a bound on traces or bytes makes room for newer ones (counted as evicted).
Either way every span reaches the processor exactly once.

A unit usually arrives after its parts (children end first): its record is read
once, from the parts kept, and when it is complete the unit goes on with it. A
unit that has to wait makes its trace read each part once (``span_facts``): the
trace keeps the set of documents and whether an answer was seen, so telling
whether a waiting unit is complete costs the same however many spans its trace
already has, and a trace of N spans is assembled in time linear in N.

The GenAI instrumentation may send a chat call's messages as log events instead of on its
span (``adapters._content_events``); serve's logs intake hands them here (``add_event``).
They wait with their trace, within the same byte and trace bounds and at most
``MAX_EVENTS_PER_TRACE`` a trace, and each part is read with its events' content. An event
that arrives after its part was read makes that part read again, so a unit waiting for its
answer is released when the event that holds it arrives. Events of a trace whose units were
released already come too late (``late``); an event past the per-trace bound (``bounds``)
makes the trace's record read from part of it, skipped ``too_large`` as a refused span's.

Not thread-safe: the receivers call it from the service's one event loop.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from ragpulse import semconv
from ragpulse.adapters import (
    SpanFacts,
    ToolPolicy,
    estimate_bytes,
    is_buffered,
    is_local_root,
    is_unit_record,
    read_trace,
    span_facts,
)
from ragpulse.adapters._content_events import ContentEvent, join_content, with_content
from ragpulse.capture._record import handoff
from ragpulse.evaluation.types import RagRecord
from ragpulse.settings import Settings

Release = Callable[[ReadableSpan, Sequence[RagRecord]], None]
"""Where a released unit goes with the records read from its trace, one per final answer,
its own last (none: it goes on unevaluated)."""

# Why a unit was released to the processor (the label of the released counter).
COMPLETE = "complete"
TIMEOUT = "timeout"
EVICTED = "evicted"
DRAIN = "drain"

MAX_EVENTS_PER_TRACE = 4096
"""Content log events one trace may hold (a long conversation's legacy events: one per
message of every call)."""
# Why a content event was not read with its trace (the dropped counter's label).
EVENTS_LATE = "late"
EVENTS_BOUNDS = "bounds"


@dataclass(slots=True)
class _Unit:
    span: ReadableSpan
    facts: SpanFacts
    expected: int | None
    """Contexts a ``@rag`` unit reported; ``None``: any one will do."""
    records: tuple[RagRecord, ...] = ()
    read_with: int = -1
    """What its trace had received (``_Trace.received``) when ``records`` were read on
    arrival (-1: not kept). A unit released before another part or event arrived goes with
    those records, not read again; records holding passages are not kept (their parsed texts
    are not in the assembler's byte count)."""


@dataclass(slots=True)
class _Trace:
    deadline: float
    units: list[_Unit] = field(default_factory=list)
    parts: list[ReadableSpan] = field(default_factory=list)
    """Retrieval and LLM spans seen so far (already forwarded; kept to read the record)."""
    bytes: int = 0
    contexts: set[tuple[str, str | None]] = field(default_factory=set)
    """Distinct documents of the parts (as ``read_trace`` counts them)."""
    answered: bool = False
    """A part carries an answer."""
    agent: bool = False
    """A part is an agent's (a tool span, an LLM call with tools): its answer is a unit with
    or without evidence."""
    incomplete: bool = False
    """A part's texts were cut or left out at capture: no record will be read."""
    read: int = 0
    """Parts whose facts are in ``contexts``, ``answered`` and ``incomplete`` (the first ones)."""
    events: dict[int, list[ContentEvent]] = field(default_factory=dict)
    """GenAI content log events by the span they describe, in the order they arrived."""
    event_count: int = 0
    refused: int = 0
    """Events the per-trace bound refused: the record would be read from part of the trace."""
    received: int = 0
    """Parts and events received so far: records read at one count are current until it grows."""

    def add_part(self, span: ReadableSpan) -> None:
        self.parts.append(span)
        self.received += 1
        if self.units:
            # A unit waits: read each part as it arrives, so telling whether the unit is
            # ready never reads the trace again.
            self.read_parts()

    def add_event(self, event: ContentEvent) -> None:
        self.events.setdefault(event.span_id, []).append(event)
        self.event_count += 1
        self.received += 1
        if self.units:
            # Its part, read already, reads differently now: fold in what it says with it.
            for span in self.parts[: self.read]:
                if span.context is not None and span.context.span_id == event.span_id:
                    self._fold(span)

    def read_parts(self) -> None:
        """Fold in the facts of the parts not read yet."""
        for span in self.parts[self.read :]:
            self._fold(span)
        self.read = len(self.parts)

    def _fold(self, span: ReadableSpan) -> None:
        facts = span_facts(self.view(span))
        self.contexts |= facts.contexts
        self.answered = self.answered or facts.has_answer
        self.agent = self.agent or facts.agent
        self.incomplete = self.incomplete or facts.incomplete

    def view(self, span: ReadableSpan) -> ReadableSpan:
        """``span`` with the content of its events read onto it (itself, without any)."""
        if not self.events or span.context is None:
            return span
        return with_content(span, self.events.get(span.context.span_id, ()))

    def joined_parts(self) -> list[ReadableSpan]:
        """The parts, each read with its events' content."""
        return join_content(self.parts, (e for es in self.events.values() for e in es))

    def is_ready(self, unit: _Unit) -> bool:
        """Whether ``unit``'s record has what it needs, from what was read on arrival."""
        facts = unit.facts
        if self.incomplete or facts.incomplete:
            return False
        if not (self.answered or facts.has_answer):
            return False
        contexts = len(self.contexts | facts.contexts) if facts.contexts else len(self.contexts)
        if unit.expected is not None:
            return contexts >= unit.expected
        return contexts > 0 or self.agent or facts.agent


def is_unit(span: ReadableSpan) -> bool:
    """A ragpulse ``@rag`` span, or a local root (no parent, or a remote one)."""
    attributes = span.attributes or {}
    return bool(attributes.get(semconv.RAG_UNIT)) or is_local_root(span)


def _is_rag_unit(span: ReadableSpan) -> bool:
    return bool((span.attributes or {}).get(semconv.RAG_UNIT))


def _expected(unit: ReadableSpan) -> int | None:
    """The contexts a ``@rag`` unit reported retrieving; ``None`` for any other unit."""
    if not _is_rag_unit(unit):
        return None
    expected = (unit.attributes or {}).get(semconv.RAG_CONTEXTS_COUNT)
    if isinstance(expected, int) and not isinstance(expected, bool):
        return expected
    return None


class TraceAssembler:
    """Holds units until their trace can be read; passes every other span straight on.

    Args:
        processor: where every span goes (the ``EvaluatingSpanProcessor``).
        timeout: seconds a unit waits for the spans its record needs.
        max_traces, max_bytes: bounds on what is held; past them the oldest trace goes on.
        on_release: called with the reason and the number of units released.
        wanted: whether a unit will be evaluated (the sampler's decision); units it
            refuses go on at once instead of waiting for their children.
        release: where a unit goes with its record (``ragpulse serve``: the processor's
            ``on_end_with_record``). Given, the assembler only reads the other spans:
            the caller forwards them itself, and no record passes through the handoff.
        tools: which tools' results are an agent's evidence (default: every tool).
    """

    def __init__(
        self,
        processor: SpanProcessor,
        *,
        timeout: float = Settings.serve_assembly_timeout,
        max_traces: int = Settings.serve_assembly_traces,
        max_bytes: int = Settings.serve_assembly_bytes,
        on_release: Callable[[str, int], None] | None = None,
        wanted: Callable[[ReadableSpan], bool] | None = None,
        release: Release | None = None,
        clock: Callable[[], float] = time.monotonic,
        tools: ToolPolicy | None = None,
    ) -> None:
        if max_traces < 1 or max_bytes < 1 or timeout < 0:
            raise ValueError("assembly bounds must be positive")
        self._processor = processor
        self._timeout = timeout
        self._max_traces = max_traces
        self._max_bytes = max_bytes
        self._on_release = on_release
        self._wanted = wanted
        self._release_to = release
        self._clock = clock
        self._tools = tools
        # Insertion order is age, and every trace waits the same timeout, so the
        # first entry is always the next to expire.
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        # Traces whose units were released (at most max_traces remembered): later content
        # events come too late to be read.
        self._released: OrderedDict[int, None] = OrderedDict()
        self._bytes = 0

    @property
    def traces(self) -> int:
        """Traces with a unit or a record part held now."""
        return len(self._traces)

    @property
    def bytes(self) -> int:
        """Estimated bytes of the spans referenced now."""
        return self._bytes

    @property
    def units(self) -> int:
        """Units waiting now."""
        return sum(len(trace.units) for trace in self._traces.values())

    def add(self, span: ReadableSpan) -> None:
        """Take one received span: hold it (a unit) or pass it on now."""
        context = span.context
        if context is None:
            self._processor.on_end(span)
            return
        unit = is_unit(span)
        part = not unit and is_buffered(span)
        if not unit and not part:
            if self._release_to is None:
                self._processor.on_end(span)
            return
        trace = self._traces.get(context.trace_id)
        if unit and self._wanted is not None and not self._wanted(span):
            # The sampler will not evaluate it: waiting for its children gains nothing, and
            # the parts kept for it are no longer needed.
            if trace is not None and not trace.units:
                self._drop(context.trace_id)
            self._pass_on(span)
            return
        if trace is None:
            self._make_room()
            trace = self._traces[context.trace_id] = _Trace(self._clock() + self._timeout)
        size = estimate_bytes(span)
        trace.bytes += size
        self._bytes += size
        if part:
            trace.add_part(span)
            if self._release_to is None:
                # The processor reads foreign conventions from its own buffer, filled as
                # parts end; a part passes now and its unit follows.
                self._processor.on_end(span)
        else:
            if not trace.units:
                # Most units arrive after their parts: read the record once, and release the
                # unit with it when it is complete. Otherwise it waits, its parts read one
                # by one from now on.
                records = _records_of(span, trace, self._tools)
                if _complete(span, records, _expected(span)):
                    self._drop(context.trace_id)
                    self._release_with(span, records, COMPLETE)
                    return
                trace.read_parts()
                facts = span_facts(span, unit=True)
                # Kept only while they hold no passage: the unit's own texts are already
                # counted with it, parsed documents would not be.
                kept = not any(record.contexts for record in records)
                read_with = trace.received if kept else -1
                trace.units.append(
                    _Unit(span, facts, _expected(span), records if kept else (), read_with)
                )
            else:
                trace.units.append(_Unit(span, span_facts(span, unit=True), _expected(span)))
        if trace.units:
            self._release_ready(context.trace_id, trace)

    def add_event(self, event: ContentEvent) -> str | None:
        """Hold one GenAI content log event with its trace until its unit is read; the
        reason it is dropped instead (``late``, ``bounds``), or ``None``."""
        trace_id = event.trace_id
        if trace_id in self._released:
            return EVENTS_LATE
        trace = self._traces.get(trace_id)
        if trace is None:
            self._make_room()
            trace = self._traces[trace_id] = _Trace(self._clock() + self._timeout)
        if trace.event_count >= MAX_EVENTS_PER_TRACE:
            trace.refused += 1
            return EVENTS_BOUNDS
        trace.bytes += event.size
        self._bytes += event.size
        trace.add_event(event)
        if trace.units:
            self._release_ready(trace_id, trace)
        return None

    def expire(self) -> int:
        """Release the units of traces whose timeout passed; returns how many traces."""
        now = self._clock()
        expired = 0
        while self._traces:
            trace_id, trace = next(iter(self._traces.items()))
            if trace.deadline > now:
                break
            self._drop(trace_id)
            self._release(trace, trace.units, TIMEOUT)
            expired += 1
        return expired

    def drain(self) -> None:
        """Release every unit held, record or not (shutdown)."""
        while self._traces:
            trace_id, trace = next(iter(self._traces.items()))
            self._drop(trace_id)
            self._release(trace, trace.units, DRAIN)

    def _make_room(self) -> None:
        while self._traces and (
            len(self._traces) >= self._max_traces or self._bytes >= self._max_bytes
        ):
            trace_id, trace = next(iter(self._traces.items()))
            self._drop(trace_id)
            self._release(trace, trace.units, EVICTED)

    def _drop(self, trace_id: int) -> None:
        trace = self._traces.pop(trace_id)
        self._bytes -= trace.bytes

    def _left(self, unit: ReadableSpan) -> None:
        """``unit`` was released: content events of its trace that arrive later cannot be
        read with it (a trace's parts and events that expired without a unit are not
        remembered: later ones start a new entry, as parts do)."""
        if unit.context is None:
            return
        self._released[unit.context.trace_id] = None
        if len(self._released) > self._max_traces:
            self._released.popitem(last=False)

    def _release_ready(self, trace_id: int, trace: _Trace) -> None:
        ready = [unit for unit in trace.units if trace.is_ready(unit)]
        if not ready:
            return
        trace.units = [unit for unit in trace.units if not trace.is_ready(unit)]
        if not trace.units:
            # Parts arriving after their unit left no longer matter to it; a later
            # unit of the same trace starts a new entry.
            self._drop(trace_id)
        self._release(trace, ready, COMPLETE)

    def _release(self, trace: _Trace, units: list[_Unit], reason: str) -> None:
        for unit in units:
            span = unit.span
            self._left(span)
            if unit.read_with == trace.received:
                records = unit.records  # no part or event came since they were read
            elif self._release_to is not None or _is_rag_unit(span):
                records = _records_of(span, trace, self._tools)
            else:
                records = ()
            if self._release_to is not None:
                self._release_to(span, records)
                continue
            if records and _is_rag_unit(span):
                # The processor takes a @rag unit's record from the handoff, as it
                # does in the app's process; here it is read from the trace.
                handoff.offer(records[-1])
            self._processor.on_end(span)
        if units and self._on_release is not None:
            self._on_release(reason, len(units))

    def _release_with(
        self, unit: ReadableSpan, records: tuple[RagRecord, ...], reason: str
    ) -> None:
        self._left(unit)
        if self._release_to is not None:
            self._release_to(unit, records)
        else:
            if records and _is_rag_unit(unit):
                handoff.offer(records[-1])
            self._processor.on_end(unit)
        if self._on_release is not None:
            self._on_release(reason, 1)

    def _pass_on(self, unit: ReadableSpan) -> None:
        self._left(unit)
        if self._release_to is not None:
            self._release_to(unit, ())
        else:
            self._processor.on_end(unit)


def _complete(unit: ReadableSpan, records: tuple[RagRecord, ...], expected: int | None) -> bool:
    """Whether ``unit``'s own record (the last of ``records``) has what it needs: an answer,
    and its contexts (any one when the unit did not say how many; none for an agent's
    answer)."""
    record = records[-1] if records else None
    if record is None or record.answer is None or record.span_context != unit.context:
        return False
    contexts = len(record.contexts)
    if expected is not None:
        return contexts >= expected
    return is_unit_record(record)


def _records_of(
    unit: ReadableSpan, trace: _Trace, tools: ToolPolicy | None = None
) -> tuple[RagRecord, ...]:
    """The records of ``unit``'s trace read from its parts (with their content events): a
    ``@rag`` unit's one, a local root's one per final answer that is a unit (contexts and an
    answer, or an agent's answer), as the processor reads them in the app's process."""
    reading = read_trace(unit, trace.joined_parts(), tools=tools, refused=trace.refused)
    if _is_rag_unit(unit):
        return () if reading.record is None else (reading.record,)
    return tuple(record for record in reading.records if is_unit_record(record))
