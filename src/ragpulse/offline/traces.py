"""Trace files into evaluation units, through ``ragpulse serve``'s own intake (``ragpulse eval``).

A trace file holds OTLP-JSON lines, one export request per line: what ``configure()``
writes when no endpoint is set (``RAGPULSE_OUTPUT_FILE``) and what an OpenTelemetry
Collector's ``file`` exporter writes. A line of spans (``{"resourceSpans": [...]}``) is
decoded as serve decodes an OTLP/JSON request (the protobuf JSON mapping, ids in hex),
routed by serve's router with every trace in the sample (as ``--sample-rate 1``),
converted, and assembled by serve's ``TraceAssembler`` under serve's bounds
(``serve_assembly_traces``, ``serve_assembly_bytes``, ``serve_assembly_timeout``). Each
unit it releases comes out with the records read from its trace, one per final answer,
targeted at the span serve's processor would score: so a file yields exactly the units
serve judges live, and a unit received twice (a Collector's retry) is judged once.

A trace is held only until it is complete or a bound releases it, so a file larger than
memory is read in the memory the bounds allow. The assembly's clock is the file's own
time (the latest span end read so far): a unit waits ``serve_assembly_timeout`` seconds of
its trace's time for its parts, however fast or slow the judge makes the reading. What is
still held at the end of the file is released as serve releases it when draining.

A line of log records (``{"resourceLogs": [...]}``) goes through serve's logs intake: the
GenAI instrumentation's content events (a chat call's messages sent as log records rather
than on its span) wait with their trace in assembly and are read onto their spans, as in
serve; they must come in the same file, in the order they were received (a Collector whose
traces and logs pipelines share one ``file`` exporter writes them so). A line that is not an
export request is a ``BadLine`` with its number and reason.
"""

from __future__ import annotations

import heapq
import json
import re
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import IO

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from ragpulse import semconv
from ragpulse.adapters import estimate_bytes, is_evidence_span, is_local_root, unjudged_reason
from ragpulse.evaluation.types import RagRecord
from ragpulse.offline.evaluate import (
    DEFAULT_MAX_LINE_BYTES,
    BadLine,
    InputRecord,
    numbered_lines,
)
from ragpulse.outputs.relayed import LOGS
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.serve._assembly import TraceAssembler
from ragpulse.serve._convert import (
    DecodeError,
    count_spans,
    decode_document,
    to_readable_spans,
)
from ragpulse.serve._log_content import take_content_events
from ragpulse.serve._route import route
from ragpulse.serve._trust import SeenUnits
from ragpulse.settings import Settings

__all__ = [
    "TraceFileReader",
    "TraceFileStats",
    "TraceUnit",
    "looks_like_traces",
]

_SPANS = "resourceSpans"
_LOGS = "resourceLogs"
_METRICS = "resourceMetrics"
_OTLP_START = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"resource(?:Spans|Logs|Metrics)"')


def looks_like_traces(head: bytes) -> bool:
    """Whether the first bytes of a file open an OTLP-JSON export request (spans, logs or
    metrics first), as every OTLP-JSON writer orders its fields; records open otherwise."""
    return _OTLP_START.match(head) is not None


@dataclass(frozen=True, slots=True)
class TraceUnit(InputRecord):
    """One evaluation unit read from a trace file: its record, and the spans its result is
    written back onto (``--write-spans``)."""

    span: ReadableSpan | None = None
    """The unit's own span; ``None``: not kept (its result goes on a carrier span)."""
    resource: Resource | None = None
    """The resource of the unit's trace root (a carrier span's)."""
    retrievals: tuple[ReadableSpan, ...] = ()
    """The retrieval and tool spans its contexts came from (per-document scores)."""


@dataclass
class TraceFileStats:
    """What reading a trace file found."""

    span_lines: int = 0
    log_lines: int = 0
    log_records: int = 0
    metric_lines: int = 0
    spans: int = 0
    rejected_spans: int = 0
    first_rejection: str | None = None
    events_dropped: Counter[str] = field(default_factory=Counter)
    """GenAI content log events not read with their trace, by reason (``late``: its units were
    released already; ``bounds``: past the per-trace bound)."""
    duplicates: int = 0
    """Units read again (the same trace and span id): judged once."""
    units: int = 0
    textless: int = 0
    """``@rag`` units released without a record: their spans carry no text to judge (content
    capture off, or a text cut at ``max_text_bytes``)."""
    released: Counter[str] = field(default_factory=Counter)
    """Units released by the assembly, by reason (``complete``, ``timeout``, ``evicted``,
    ``drain``), whether or not a record was read from their trace."""
    peak_traces: int = 0
    """Most traces held in assembly at once."""
    peak_bytes: int = 0
    """Most estimated bytes held in assembly at once."""


class _Parts:
    """Retrieval, tool and LLM spans of traces in assembly, kept for ``--write-spans``: a
    unit's result is written onto the LLM call that gave its answer, and its documents'
    scores onto the spans its contexts came from. Bounded in count and bytes like serve's
    held spans (``max_held_spans``, ``max_held_bytes``), oldest first out: a span let go
    costs only its scores in the written file (a carrier span then holds the unit's)."""

    def __init__(self, max_spans: int, max_bytes: int) -> None:
        self._max_spans = max(1, max_spans)
        self._max_bytes = max(1, max_bytes)
        self._spans: OrderedDict[tuple[int, int], tuple[ReadableSpan, int, bool]] = OrderedDict()
        self._traces: dict[int, set[int]] = {}
        self.bytes = 0

    def keep(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        key = (context.trace_id, context.span_id)
        if key in self._spans:
            return
        size = estimate_bytes(span)
        # An LLM call's span is kept as a possible answer, never taken as evidence.
        self._spans[key] = (span, size, not is_evidence_span(span))
        self._traces.setdefault(context.trace_id, set()).add(context.span_id)
        self.bytes += size
        while len(self._spans) > self._max_spans or self.bytes > self._max_bytes:
            self._pop(next(iter(self._spans)))

    def claim(self, trace_id: int, span_ids: Iterable[int]) -> tuple[ReadableSpan, ...]:
        taken = []
        for span_id in dict.fromkeys(span_ids):
            entry = self._spans.get((trace_id, span_id))
            if entry is not None and not entry[2]:
                taken.append(self._pop((trace_id, span_id)))
        return tuple(taken)

    def claim_answer(self, trace_id: int, span_id: int) -> ReadableSpan | None:
        entry = self._spans.get((trace_id, span_id))
        if entry is None or not entry[2]:
            return None
        return self._pop((trace_id, span_id))

    def forget_trace(self, trace_id: int) -> None:
        for span_id in list(self._traces.get(trace_id, ())):
            self._pop((trace_id, span_id))

    def _pop(self, key: tuple[int, int]) -> ReadableSpan:
        span, size, _ = self._spans.pop(key)
        self.bytes -= size
        ids = self._traces.get(key[0])
        if ids is not None:
            ids.discard(key[1])
            if not ids:
                del self._traces[key[0]]
        return span


def _span_key(span: ReadableSpan) -> tuple[bytes, bytes]:
    context = span.context
    if context is None:
        return (b"", b"")
    return (context.trace_id.to_bytes(16, "big"), context.span_id.to_bytes(8, "big"))


_TIME = re.compile(rb'"(?:startTimeUnixNano|timeUnixNano|observedTimeUnixNano)"\s*:\s*"?(\d{1,20})')


def _line_time(raw: bytes | None) -> int:
    """The earliest time a line's spans or records name (0 when it names none)."""
    if raw is None:
        return 0
    return min((int(found) for found in _TIME.findall(raw)), default=0)


def _interleaved(
    sources: list[IO[bytes] | Iterable[str]], max_line_bytes: int
) -> Iterator[tuple[int, int, bytes | None]]:
    """``(file position, line number, line)`` of several files, each read one line at a
    time, merged by their lines' times (one file: its lines as they come)."""
    if len(sources) == 1:
        for number, raw in numbered_lines(sources[0], max_line_bytes):
            yield 1, number, raw
        return

    def timed(
        position: int, source: IO[bytes] | Iterable[str]
    ) -> Iterator[tuple[int, int, int, bytes | None]]:
        for number, raw in numbered_lines(source, max_line_bytes):
            yield _line_time(raw), position, number, raw

    streams = [timed(position, source) for position, source in enumerate(sources, start=1)]
    for _, position, number, raw in heapq.merge(*streams, key=lambda line: line[:3]):
        yield position, number, raw


class TraceFileReader:
    """Reads one trace file into ``TraceUnit``s, in the order the assembly releases them.

    Args:
        settings: serve's assembly and dedupe bounds, and which tools' results are evidence.
        keep_spans: keep the spans a result is written onto (``--write-spans``).
        max_line_bytes: a longer line is a ``BadLine``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        keep_spans: bool = False,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.stats = TraceFileStats()
        self._max_line_bytes = max_line_bytes
        self._now = 0.0
        self._line = 0
        self._ready: deque[TraceUnit] = deque()
        # Every trace is in the sample, as in serve at --sample-rate 1; rules change nothing.
        self._sampler = EvalSampler(1.0)
        self._seen = SeenUnits(
            settings.serve_dedupe_window, settings.serve_dedupe_units, self._clock
        )
        self._parts = (
            _Parts(settings.max_held_spans, settings.max_held_bytes) if keep_spans else None
        )
        self.assembler = TraceAssembler(
            SpanProcessor(),  # never called: the assembler releases through ``release``
            release=self._release,
            timeout=settings.serve_assembly_timeout,
            max_traces=settings.serve_assembly_traces,
            max_bytes=settings.serve_assembly_bytes,
            on_release=self._count_released,
            clock=self._clock,
            tools=settings.tool_policy,
        )

    def _clock(self) -> float:
        return self._now

    def read(
        self, source: IO[bytes] | Iterable[str], *more: IO[bytes] | Iterable[str]
    ) -> Iterator[TraceUnit | BadLine]:
        """Each unit as the assembly releases it, and each line that could not be read.

        ``source`` is read one line at a time; ``OSError`` from it propagates. ``more`` are
        files of the same run written apart (``configure()`` writes the log records beside
        the spans, in ``-logs``): their lines are taken in turn with the source's, in the
        order of their times, so an event meets its span as it would have live, each file
        still read one line at a time. A bad line of one of them is named by its file's
        position (2 for the first of ``more``) before its number."""
        for position, number, raw in _interleaved([source, *more], self._max_line_bytes):
            self._line = number
            bad = (
                BadLine(number, f"line longer than {self._max_line_bytes} bytes (--max-line-bytes)")
                if raw is None
                else self._take_line(number, raw)
            )
            if bad is not None:
                yield (
                    bad if position == 1 else replace(bad, reason=f"file {position}: {bad.reason}")
                )
            self.assembler.expire()
            yield from self._released()
        self.assembler.drain()
        yield from self._released()

    def _released(self) -> Iterator[TraceUnit]:
        ready = self._ready
        while ready:
            yield ready.popleft()

    def _take_line(self, number: int, raw: bytes) -> BadLine | None:
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            return None
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return BadLine(number, f"not JSON: {exc}")
        except RecursionError:
            return BadLine(number, "not readable JSON: nested too deeply")
        try:
            if isinstance(document, dict) and _SPANS in document:
                self._take_spans(number, document)
            elif isinstance(document, dict) and _LOGS in document:
                self._take_logs(document)
            elif isinstance(document, dict) and _METRICS in document:
                self.stats.metric_lines += 1
            else:
                return BadLine(number, f"not an OTLP-JSON export request (no {_SPANS} or {_LOGS})")
        except DecodeError as exc:
            return BadLine(number, str(exc))
        return None

    def _take_spans(self, number: int, document: object) -> None:
        """One export request of spans, through serve's router, converter and assembler."""
        request = decode_document(document, ExportTraceServiceRequest, "trace")
        stats = self.stats
        stats.span_lines += 1
        stats.spans += count_spans(request)
        self._advance(request)
        routed = route(request, None, self._sampler, self._seen)
        stats.duplicates += routed.duplicates
        if routed.rejected:
            stats.rejected_spans += routed.rejected
            if stats.first_rejection is None:
                stats.first_rejection = f"line {number}: {routed.errors[0]}"
        if routed.convert is None:
            return
        spans = to_readable_spans(routed.convert).spans
        held = routed.held
        parts = self._parts
        assembler = self.assembler
        for span in spans:
            if parts is not None and held and _span_key(span) in held:
                parts.keep(span)
            assembler.add(span)
            if assembler.bytes > stats.peak_bytes:
                stats.peak_bytes = assembler.bytes
            if assembler.traces > stats.peak_traces:
                stats.peak_traces = assembler.traces

    def _take_logs(self, document: object) -> None:
        """One export request of log records, through serve's logs intake: the GenAI
        content events (a chat call's messages sent as log records) join their trace in
        assembly and are read onto their spans."""
        request = decode_document(document, LOGS.request, LOGS.name)
        stats = self.stats
        stats.log_lines += 1
        stats.log_records += LOGS.count(request)
        latest = max(
            (
                record.time_unix_nano or record.observed_time_unix_nano
                for resource_logs in request.resource_logs
                for scope_logs in resource_logs.scope_logs
                for record in scope_logs.log_records
            ),
            default=0,
        )
        if latest / 1e9 > self._now:
            self._now = latest / 1e9
        stats.events_dropped.update(take_content_events(self.assembler, request))

    def _advance(self, request: ExportTraceServiceRequest) -> None:
        """Move the clock to the latest span end of ``request``: the file's own time, read
        before routing (the dedupe window counts in it too)."""
        latest = max(
            (
                span.end_time_unix_nano
                for resource_spans in request.resource_spans
                for scope_spans in resource_spans.scope_spans
                for span in scope_spans.spans
            ),
            default=0,
        )
        if latest / 1e9 > self._now:
            self._now = latest / 1e9

    def _count_released(self, reason: str, units: int) -> None:
        self.stats.released[reason] += units

    def _release(self, unit: ReadableSpan, records: Iterable[RagRecord]) -> None:
        """A unit released by the assembly with its records: one ``TraceUnit`` per record,
        on the span serve's processor scores (the unit's own, or an earlier answer's LLM
        call)."""
        context = unit.context
        if context is None:
            return
        parts = self._parts
        records = tuple(records)
        if not records and (unit.attributes or {}).get(semconv.RAG_UNIT):
            self.stats.textless += 1
        for record in records:
            target = record.span_context
            if target is None:
                continue
            span: ReadableSpan | None = unit
            if target.span_id != context.span_id:
                span = (
                    None if parts is None else parts.claim_answer(target.trace_id, target.span_id)
                )
            retrievals: tuple[ReadableSpan, ...] = ()
            if parts is not None and record.sources:
                retrievals = parts.claim(target.trace_id, (source[0] for source in record.sources))
            unjudged = unjudged_reason(record)
            self.stats.units += 1
            self._ready.append(
                TraceUnit(
                    self._line,
                    f"{target.trace_id:032x}/{target.span_id:016x}",
                    record,
                    skip=None if unjudged is None else unjudged[0],
                    why=None if unjudged is None else unjudged[1],
                    span=span,
                    resource=unit.resource,
                    retrievals=retrievals,
                )
            )
        if parts is not None and is_local_root(unit):
            parts.forget_trace(context.trace_id)
