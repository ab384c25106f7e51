"""Read traces instrumented by others into a ``RagRecord``.

An app instrumented with OpenInference, the OpenTelemetry GenAI conventions or
OpenLLMetry has no ``@rag`` span: its question, contexts and answer are spread
over a trace. The processor keeps that trace's retrieval and LLM spans in a
``TraceBuffer`` (``is_buffered`` says which) and, when the local root ends, asks
``record_from_trace`` for the record to evaluate:

- ``question``: the root's input (``input.value``, ``traceloop.entity.input``,
  ``gen_ai.input.messages``), else the latest user message of the first LLM
  span, else the first retrieval query. A user message that contains a
  retrieved passage is a stuffed prompt, not a question: then the retrieval
  query wins.
- ``contexts``: every retrieved document, in span start order, with id and score
  where the convention has them; a passage reported twice (a framework's
  retriever span and the vector-store span under it) is kept once. The record's
  ``sources`` say which span and document position each came from (both spans,
  for a passage reported twice), so per-document scores go back onto them.
- ``answer``: the root's output, else the output message of the LLM span that
  ended last.

A span may mix conventions (ragpulse's own spans write OpenInference and GenAI
attributes side by side; OpenLLMetry's LLM spans use the older GenAI
attributes), so each facet is read with the span's own convention first and the
others after it. Nothing here raises: what cannot be read is skipped and counted
in ``read_trace``'s ``TraceReading``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ragpulse import semconv
from ragpulse.adapters import genai, openinference, openllmetry
from ragpulse.adapters._buffer import TraceBuffer, estimate_bytes
from ragpulse.adapters._common import (
    Attributes,
    Events,
    Issues,
    attributes_of,
    events_of,
    text,
)
from ragpulse.evaluation.types import Context, ContextSource, RagRecord

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "Convention",
    "SpanFacts",
    "TraceBuffer",
    "TraceReading",
    "detect_convention",
    "estimate_bytes",
    "is_buffered",
    "is_local_root",
    "is_retrieval",
    "read_trace",
    "record_from_trace",
    "span_facts",
]

Convention = Literal["openinference", "genai", "openllmetry", "ragpulse"]

# Issues kept verbatim for logs; the count covers all of them.
_MAX_ISSUES_KEPT = 20
# A user message "contains a passage" only for passages long enough to mean it.
_MIN_STUFFED_PASSAGE = 20


class _Reader(Protocol):
    """What each convention module provides (the modules themselves satisfy it)."""

    def matches(self, attributes: Attributes, events: Events) -> bool: ...
    def is_retrieval(self, attributes: Attributes, events: Events) -> bool: ...
    def is_llm(self, attributes: Attributes, events: Events) -> bool: ...
    def documents(
        self, span: ReadableSpan, issues: Issues, positions: list[int] | None = None
    ) -> list[Context]: ...
    def query(self, span: ReadableSpan, issues: Issues) -> str | None: ...
    def input_text(self, span: ReadableSpan, issues: Issues) -> str | None: ...
    def output_text(self, span: ReadableSpan, issues: Issues) -> str | None: ...


class _RagpulseReader:
    """ragpulse's own ``@rag`` unit: question and answer under ``ragpulse.*``."""

    def matches(self, attributes: Attributes, events: Events) -> bool:
        return semconv.RAG_UNIT in attributes

    def is_retrieval(self, attributes: Attributes, events: Events) -> bool:
        return False

    def is_llm(self, attributes: Attributes, events: Events) -> bool:
        return False

    def documents(
        self, span: ReadableSpan, issues: Issues, positions: list[int] | None = None
    ) -> list[Context]:
        return []

    def query(self, span: ReadableSpan, issues: Issues) -> str | None:
        return None

    def input_text(self, span: ReadableSpan, issues: Issues) -> str | None:
        return text(attributes_of(span).get(semconv.RAG_QUESTION))

    def output_text(self, span: ReadableSpan, issues: Issues) -> str | None:
        return text(attributes_of(span).get(semconv.RAG_ANSWER))


# Detection order: the most specific marker first. A ragpulse unit also carries
# OpenInference attributes, and OpenLLMetry's LLM spans carry GenAI ones.
_READERS: dict[Convention, _Reader] = {
    "ragpulse": _RagpulseReader(),
    "openinference": openinference,
    "openllmetry": openllmetry,
    "genai": genai,
}
_FALLBACKS: tuple[_Reader, ...] = (openinference, genai, openllmetry)


@dataclass(frozen=True, slots=True)
class TraceReading:
    """What ``read_trace`` made of a trace."""

    record: RagRecord | None
    """``None`` when the trace has neither retrieved documents nor an answer."""
    skipped: int = 0
    """Attributes, documents and events that could not be read (bad JSON, no text)."""
    issues: tuple[str, ...] = ()
    """The first few of those, one line each, for logs."""


def detect_convention(span: ReadableSpan) -> Convention | None:
    """Which convention wrote ``span``; ``None`` for a span no adapter reads."""
    attributes, events = attributes_of(span), events_of(span)
    for convention, reader in _READERS.items():
        if reader.matches(attributes, events):
            return convention
    return None


def is_local_root(span: ReadableSpan) -> bool:
    """The span has no parent in this process: where a trace's record is read."""
    return span.parent is None or span.parent.is_remote


def is_buffered(span: ReadableSpan) -> bool:
    """Whether the processor should hold ``span`` until its trace's local root ends.

    True for retrieval and LLM spans in any convention. It runs for every span
    that ends, so it is a handful of dict lookups and one pass over the events.
    """
    try:
        attributes, events = attributes_of(span), events_of(span)
        for reader in _FALLBACKS:
            if reader.is_retrieval(attributes, events) or reader.is_llm(attributes, events):
                return True
        return False
    except Exception:
        # A span object we cannot inspect is not worth holding; never fail on_end.
        return False


def is_retrieval(span: ReadableSpan) -> bool:
    """Whether ``span`` retrieved documents, in any convention (ragpulse's ``@retrieval``
    spans too): where per-document scores are written."""
    try:
        attributes, events = attributes_of(span), events_of(span)
        return any(reader.is_retrieval(attributes, events) for reader in _FALLBACKS)
    except Exception:
        return False


def record_from_trace(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    *,
    max_text_length: int | None = None,
) -> RagRecord | None:
    """The ``RagRecord`` of a finished trace; ``None`` when there is nothing to evaluate.

    ``root`` is the trace's local root (its span context becomes the record's),
    ``spans`` the spans buffered for the trace (``root`` may be among them).
    ``max_text_length`` cuts the question, the answer and each context. Never
    raises; ``read_trace`` also says what it skipped.
    """
    return read_trace(root, spans, max_text_length=max_text_length).record


def read_trace(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    *,
    max_text_length: int | None = None,
) -> TraceReading:
    """``record_from_trace`` with the count of what could not be read."""
    issues = Issues(_MAX_ISSUES_KEPT)
    try:
        record = _read(root, spans, max_text_length, issues)
    except Exception as exc:
        # Malformed input is handled where it is read; this is the last guard so a
        # span shape nobody foresaw costs one evaluation, not the caller's request.
        issues.append(f"unreadable trace: {type(exc).__name__}")
        record = None
    return TraceReading(record, issues.total, tuple(issues))


@dataclass(frozen=True, slots=True)
class SpanFacts:
    """What one span brings to its trace's record, read once (``span_facts``).

    Enough to tell when a trace's record is complete without reading the whole
    trace again each time a span arrives; the record itself is still read by
    ``read_trace`` once.
    """

    contexts: frozenset[tuple[str, str | None]] = frozenset()
    """The documents it retrieved, as (text, id): the key ``read_trace`` deduplicates on."""
    has_answer: bool = False
    """It carries an answer: a unit's own output, or an LLM span's output message."""
    incomplete: bool = False
    """Capture marked its texts cut, left out or unreadable (``read_trace`` reads no record)."""


def span_facts(span: ReadableSpan, *, unit: bool = False) -> SpanFacts:
    """The ``SpanFacts`` of ``span`` (``unit``: the span the record is read for); never raises."""
    issues = Issues(_MAX_ISSUES_KEPT)
    try:
        attributes, events = attributes_of(span), events_of(span)
        incomplete = bool(
            (unit and semconv.EVAL_STATUS in attributes)
            or attributes.get(semconv.RAG_CONTEXTS_UNREADABLE)
            or attributes.get(semconv.RAG_CAPTURE_DOCUMENTS_OMITTED)
            or attributes.get(semconv.RAG_CAPTURE_TRUNCATED)
        )
        convention = detect_convention(span)
        if convention is None:
            return SpanFacts(incomplete=incomplete)
        readers = _readers_for(convention)
        contexts: frozenset[tuple[str, str | None]] = frozenset()
        if any(reader.is_retrieval(attributes, events) for reader in readers):
            contexts = frozenset((c.text, c.id) for c in _first_list(readers, span, issues))
        if unit:
            has_answer = _first_text(readers, "output_text", span, issues) is not None
        else:
            has_answer = any(reader.is_llm(attributes, events) for reader in readers) and (
                _first_text(readers, "output_text", span, issues) is not None
            )
        return SpanFacts(contexts, has_answer, incomplete)
    except Exception:
        # read_trace will say what it could not read; here the span just adds nothing.
        return SpanFacts()


def _incomplete_capture(root: ReadableSpan, spans: Sequence[ReadableSpan]) -> str | None:
    """Why the trace's exported texts cannot be judged, when ragpulse's capture says so.

    Out of process (``ragpulse serve``) the judge sees only what was exported. A unit
    that capture already decided on (``ragpulse.eval.status``, e.g. skipped for an
    unreadable answer), or whose contexts were unreadable, cut or left out by the
    capture caps, would be judged on part of its evidence: a claim supported by the
    missing part would read as a hallucination. Such a unit is not judged.
    """
    if semconv.EVAL_STATUS in attributes_of(root):
        return "unit already decided at capture"
    for span in spans:
        attributes = attributes_of(span)
        if attributes.get(semconv.RAG_CONTEXTS_UNREADABLE):
            return "contexts unreadable at capture"
        if attributes.get(semconv.RAG_CAPTURE_DOCUMENTS_OMITTED):
            return "documents left out by the capture caps"
        if attributes.get(semconv.RAG_CAPTURE_TRUNCATED):
            return "texts cut by the capture caps"
    return None


def _read(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    max_text_length: int | None,
    issues: Issues,
) -> RagRecord | None:
    ordered = _in_start_order(root, spans)
    incomplete = _incomplete_capture(root, ordered)
    if incomplete is not None:
        issues.append(incomplete)
        return None
    conventions = {id(span): detect_convention(span) for span in ordered}
    contexts: list[Context] = []
    sources: list[ContextSource] = []
    seen: dict[tuple[str, str | None], int] = {}
    queries: list[str] = []
    llm_spans: list[ReadableSpan] = []
    for span in ordered:
        convention = conventions[id(span)]
        if convention is None:
            continue
        readers = _readers_for(convention)
        attributes, events = attributes_of(span), events_of(span)
        if any(reader.is_retrieval(attributes, events) for reader in readers):
            positions: list[int] = []
            found = _first_list(readers, span, issues, positions)
            span_id = span.context.span_id if span.context is not None else 0
            for context, position in zip(found, positions, strict=True):
                index = seen.setdefault((context.text, context.id), len(contexts))
                if index == len(contexts):
                    contexts.append(context)
                if span_id:
                    _add_source(sources, (span_id, position, index, 1))
            found_query = _first_text(readers, "query", span, issues)
            if found_query is not None:
                queries.append(found_query)
        if any(reader.is_llm(attributes, events) for reader in readers):
            llm_spans.append(span)

    root_convention = conventions[id(root)]
    root_readers = _readers_for(root_convention) if root_convention else ()
    question = _first_text(root_readers, "input_text", root, issues)
    answer = _first_text(root_readers, "output_text", root, issues)
    if question is None and llm_spans:
        first = llm_spans[0]
        question = _first_text(_readers_for(conventions[id(first)]), "input_text", first, issues)
        if question is not None and queries and _is_stuffed(question, contexts):
            question = queries[0]
    if question is None and queries:
        question = queries[0]
    if answer is None and llm_spans:
        last = max(llm_spans, key=lambda span: span.end_time or span.start_time or 0)
        answer = _first_text(_readers_for(conventions[id(last)]), "output_text", last, issues)

    if not contexts and answer is None:
        return None
    convention_seen = root_convention or next(
        (conventions[id(span)] for span in ordered if conventions[id(span)]), None
    )
    return RagRecord(
        question=_cut(question, max_text_length),
        contexts=tuple(
            Context(text=_cut(c.text, max_text_length) or "", id=c.id, score=c.score)
            for c in contexts
        ),
        answer=_cut(answer, max_text_length),
        name=root.name,
        span_context=root.context,
        attributes=_record_attributes(root, convention_seen),
        sources=tuple(sources),
    )


def _add_source(sources: list[ContextSource], source: ContextSource) -> None:
    """Append ``source``, or extend the last run when it continues it (same span, next
    document, next context)."""
    span_id, document, context, length = source
    if sources:
        last_span, last_document, last_context, last_length = sources[-1]
        if (
            last_span == span_id
            and last_document + last_length == document
            and last_context + last_length == context
        ):
            sources[-1] = (span_id, last_document, last_context, last_length + length)
            return
    sources.append(source)


def _record_attributes(root: ReadableSpan, convention: Convention | None) -> dict[str, object]:
    """The convention read, and the root's ``service.name``: metric attributes of the scores
    where one evaluator serves many services (``ragpulse serve``)."""
    attributes: dict[str, object] = {}
    if convention:
        attributes[semconv.RAG_ADAPTER_CONVENTION] = convention
    resource = getattr(root, "resource", None)
    service = resource.attributes.get(semconv.ATTR_SERVICE_NAME) if resource is not None else None
    if isinstance(service, str) and service:
        attributes[semconv.ATTR_SERVICE_NAME] = service
    return attributes


def _in_start_order(root: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The root and the buffered spans, each once, by start time (stable on ties)."""
    seen: set[int] = set()
    unique: list[ReadableSpan] = []
    for span in (root, *spans):
        span_id = span.context.span_id if span.context is not None else id(span)
        if span_id not in seen:
            seen.add(span_id)
            unique.append(span)
    return sorted(unique, key=lambda span: span.start_time or 0)


def _readers_for(convention: Convention | None) -> tuple[_Reader, ...]:
    if convention is None:
        return _FALLBACKS
    primary = _READERS[convention]
    return (primary, *(reader for reader in _FALLBACKS if reader is not primary))


def _first_list(
    readers: Sequence[_Reader],
    span: ReadableSpan,
    issues: Issues,
    positions: list[int] | None = None,
) -> list[Context]:
    for reader in readers:
        found = reader.documents(span, issues, positions)
        if found:
            return found
        if positions is not None:
            positions.clear()
    return []


def _first_text(
    readers: Sequence[_Reader],
    facet: Literal["query", "input_text", "output_text"],
    span: ReadableSpan,
    issues: Issues,
) -> str | None:
    for reader in readers:
        found: str | None = getattr(reader, facet)(span, issues)
        if found is not None:
            return found
    return None


def _is_stuffed(message: str, contexts: Sequence[Context]) -> bool:
    return any(
        len(context.text) >= _MIN_STUFFED_PASSAGE and context.text in message
        for context in contexts
    )


def _cut(value: str | None, limit: int | None) -> str | None:
    if value is None or limit is None or len(value) <= limit:
        return value
    return value[:limit]
