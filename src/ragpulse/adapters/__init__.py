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
- ``answer``: the root's output, else the output message of the last LLM call that
  asked for no tool.

An agent's trace may hold several final answers to the user (``_agent.final_calls``):
``read_trace`` then gives one record per answer (``TraceReading.records``), each with its
own question, its own turn's evidence and the span its scores go onto (an earlier answer's
LLM span; the last answer's is the root, ``TraceReading.record``).

A span may mix conventions (ragpulse's own spans write OpenInference and GenAI
attributes side by side; OpenLLMetry's LLM spans use the older GenAI
attributes), so each facet is read with the span's own convention first and the
others after it. Nothing here raises: what cannot be read is skipped and counted
in ``read_trace``'s ``TraceReading``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ragpulse import errors, semconv
from ragpulse.adapters import genai, openinference, openllmetry
from ragpulse.adapters._agent import (
    MAX_HISTORY_CHARS,
    MAX_HISTORY_RESULTS,
    conversation_id,
    final_calls,
    latest_user,
    resolve_question,
)
from ragpulse.adapters._buffer import TraceBuffer, estimate_bytes
from ragpulse.adapters._common import (
    Attributes,
    Events,
    Issues,
    attributes_of,
    events_of,
    generator_models,
    text,
)
from ragpulse.adapters._messages import Turn, asks_for_tools, input_turns, offers_tools
from ragpulse.adapters._tools import (
    ToolPolicy,
    ToolResult,
    is_tool,
    result_passages,
    tool_result,
)
from ragpulse.evaluation.types import Context, ContextSource, RagRecord

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "Convention",
    "SpanFacts",
    "ToolPolicy",
    "TraceBuffer",
    "TraceReading",
    "detect_convention",
    "estimate_bytes",
    "is_agent_record",
    "is_buffered",
    "is_evidence_span",
    "is_local_root",
    "is_retrieval",
    "is_unit_record",
    "may_answer",
    "read_trace",
    "record_from_trace",
    "records_from_trace",
    "span_facts",
    "unjudged_reason",
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
_DEFAULT_TOOLS = ToolPolicy()


@dataclass(frozen=True, slots=True)
class TraceReading:
    """What ``read_trace`` made of a trace."""

    record: RagRecord | None
    """The record of the trace's last answer, on its root; ``None`` when the trace has
    neither retrieved documents nor an answer."""
    records: tuple[RagRecord, ...] = ()
    """One record per final answer to the user, in the order they were given: earlier
    answers' on the span of the LLM call that gave them, the last one (``record``) on the
    root. Empty when ``record`` is ``None`` and no earlier answer was read."""
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

    True for retrieval, LLM and tool spans in any convention. It runs for every span
    that ends, so it is a handful of dict lookups and one pass over the events.
    """
    try:
        attributes, events = attributes_of(span), events_of(span)
        for reader in _FALLBACKS:
            if reader.is_retrieval(attributes, events) or reader.is_llm(attributes, events):
                return True
        return is_tool(attributes)
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


def is_evidence_span(span: ReadableSpan) -> bool:
    """Whether ``span`` retrieved documents or ran a tool: a span a record's contexts may
    come from, where their per-context scores are written."""
    try:
        return is_retrieval(span) or is_tool(attributes_of(span))
    except Exception:
        return False


def may_answer(span: ReadableSpan) -> bool:
    """Whether ``span`` is an LLM call whose output may be a final answer to the user (its
    output calls no tool): a unit's span when the conversation went on after it, known only
    once its trace's root ends."""
    try:
        attributes, events = attributes_of(span), events_of(span)
        if not any(reader.is_llm(attributes, events) for reader in _FALLBACKS):
            return False
        return not asks_for_tools(span, Issues(0))
    except Exception:
        return False


def is_agent_record(record: RagRecord) -> bool:
    """Whether ``record`` was read from an agent's trace (tools offered, called or answered)."""
    return bool(record.attributes.get(semconv.RAG_ADAPTER_AGENT))


def unjudged_reason(record: RagRecord) -> tuple[str, str] | None:
    """Why ``record`` is skipped rather than judged, as ``(error type, explanation)``;
    ``None``: judge it.

    - ``too_large``: it was read from part of its trace (the trace buffer refused spans);
      a claim supported by a missing span would read as a hallucination;
    - ``no_evidence``: an agent's answer with no evidence at all, no retrieved passage and
      no evidence tool's result, and no evidence tool that failed (that is judged, and
      diagnosed ``tool_failure``).
    """
    refused = record.attributes.get(semconv.RAG_ADAPTER_SPANS_REFUSED)
    if isinstance(refused, int) and refused > 0:
        return errors.TOO_LARGE, (
            f"{refused} spans of the trace were past the trace buffer's bounds; "
            "the answer is not judged on part of its evidence"
        )
    if is_agent_record(record) and not record.contexts and not record.failed_tools:
        return errors.NO_EVIDENCE, (
            "the agent answered without evidence: no retrieved passage and no evidence "
            "tool's result in its trace"
        )
    return None


def is_unit_record(record: RagRecord | None) -> bool:
    """Whether a record read at a local root is an evaluation unit: an answer, with
    contexts to judge it against, or from an agent (judged, or skipped ``no_evidence``);
    or read from part of its trace with anything at all in it (skipped ``too_large``)."""
    if record is None:
        return False
    if record.attributes.get(semconv.RAG_ADAPTER_SPANS_REFUSED):
        return True
    if record.answer is None:
        return False
    return bool(record.contexts) or is_agent_record(record)


def record_from_trace(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    *,
    max_text_length: int | None = None,
    tools: ToolPolicy | None = None,
    refused: int = 0,
) -> RagRecord | None:
    """The ``RagRecord`` of a finished trace's last answer; ``None`` when there is nothing to
    evaluate.

    ``root`` is the trace's local root (its span context becomes the record's),
    ``spans`` the spans buffered for the trace (``root`` may be among them).
    ``max_text_length`` cuts the question, the answer and each context; ``tools`` says
    which tools' results are evidence (default: every tool); ``refused`` counts the
    trace's spans the buffer refused (the record then says so and is not judged).
    Never raises; ``read_trace`` also says what it skipped, and gives every answer's record.
    """
    return read_trace(
        root, spans, max_text_length=max_text_length, tools=tools, refused=refused
    ).record


def records_from_trace(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    *,
    max_text_length: int | None = None,
    tools: ToolPolicy | None = None,
    refused: int = 0,
) -> tuple[RagRecord, ...]:
    """One record per final answer to the user in a finished trace (``TraceReading.records``):
    the earlier answers' on the LLM spans that gave them, the last one's on ``root``."""
    return read_trace(
        root, spans, max_text_length=max_text_length, tools=tools, refused=refused
    ).records


def read_trace(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    *,
    max_text_length: int | None = None,
    tools: ToolPolicy | None = None,
    refused: int = 0,
) -> TraceReading:
    """``record_from_trace`` with every answer's record and the count of what could not be
    read."""
    issues = Issues(_MAX_ISSUES_KEPT)
    try:
        records = _read(root, spans, max_text_length, issues, tools or _DEFAULT_TOOLS, refused)
    except Exception as exc:
        # Malformed input is handled where it is read; this is the last guard so a
        # span shape nobody foresaw costs one evaluation, not the caller's request.
        issues.append(f"unreadable trace: {type(exc).__name__}")
        records = [None]
    return TraceReading(
        records[-1],
        tuple(record for record in records if record is not None),
        issues.total,
        tuple(issues),
    )


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
    """It carries an answer: a unit's own output, or an LLM span's final output message
    (one that calls no tool)."""
    incomplete: bool = False
    """Capture marked its texts cut, left out or unreadable (``read_trace`` reads no record)."""
    agent: bool = False
    """It is part of an agent's run: a tool span, or an LLM call that offered, called or
    answered tools."""


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
        if is_tool(attributes):
            result = tool_result(span, issues)
            return SpanFacts(
                frozenset((passage, result.call_id) for passage in result.passages),
                incomplete=incomplete,
                agent=True,
            )
        convention = detect_convention(span)
        if convention is None:
            return SpanFacts(incomplete=incomplete)
        readers = _readers_for(convention)
        contexts: frozenset[tuple[str, str | None]] = frozenset()
        if any(reader.is_retrieval(attributes, events) for reader in readers):
            contexts = frozenset((c.text, c.id) for c in _first_list(readers, span, issues))
        llm = any(reader.is_llm(attributes, events) for reader in readers)
        agent = False
        if llm:
            calls = asks_for_tools(span, issues)
            agent = (
                calls
                or offers_tools(attributes)
                or any(turn.is_tool_result for turn in input_turns(span, issues))
            )
        if unit:
            has_answer = _first_text(readers, "output_text", span, issues) is not None
        else:
            has_answer = (
                llm and not calls and _first_text(readers, "output_text", span, issues) is not None
            )
        return SpanFacts(contexts, has_answer, incomplete, agent)
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


class _Evidence:
    """The record's contexts as they are found, each passage once, with where it came from."""

    def __init__(self) -> None:
        self.contexts: list[Context] = []
        self.sources: list[ContextSource] = []
        self._documents: dict[tuple[str, str | None], int] = {}
        self._results: dict[str, int] = {}
        self.failed: list[str] = []

    def document(self, context: Context, span_id: int, position: int) -> None:
        index = self._documents.setdefault((context.text, context.id), len(self.contexts))
        if index == len(self.contexts):
            self.contexts.append(context)
        if span_id:
            _add_source(self.sources, (span_id, position, index, 1))

    def result(
        self, passage: str, call_id: str | None, name: str | None, span_id: int, position: int
    ) -> None:
        """A tool's result: the same text from its span and from the message handing it to
        the model (or from two calls) is one context, sourced to both."""
        index = self._results.get(passage)
        if index is None:
            index = self._results[passage] = len(self.contexts)
            self.contexts.append(Context(text=passage, id=call_id, tool=name))
        else:
            known = self.contexts[index]
            if (known.id is None and call_id) or (known.tool is None and name):
                self.contexts[index] = Context(
                    text=known.text,
                    id=known.id or call_id,
                    score=known.score,
                    tool=known.tool or name,
                )
        if span_id:
            _add_source(self.sources, (span_id, position, index, 1))

    def failure(self, name: str | None) -> None:
        shown = name or "unnamed tool"
        if shown not in self.failed:
            self.failed.append(shown)


@dataclass(slots=True)
class _Part:
    """A span evidence comes from, read once: a tool call, or a retrieval with its documents."""

    span: ReadableSpan
    span_id: int
    tool: ToolResult | None = None
    documents: tuple[tuple[Context, int], ...] = ()
    """Each retrieved document with its position on the span."""
    query: str | None = None


def _read(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    max_text_length: int | None,
    issues: Issues,
    tools: ToolPolicy,
    refused: int,
) -> list[RagRecord | None]:
    """One record per final answer to the user, in the order given, the root's last;
    ``None`` for an answer that gives nothing to evaluate (``read_trace`` leaves it out)."""
    ordered = _in_start_order(root, spans)
    incomplete = _incomplete_capture(root, ordered)
    if incomplete is not None:
        issues.append(incomplete)
        return [None]
    conventions = {id(span): detect_convention(span) for span in ordered}
    parts: list[_Part] = []
    llm_spans: list[ReadableSpan] = []
    tool_spans: list[ReadableSpan] = []
    names: dict[str, str] = {}
    """Tool names by call id, from the tool spans (messages often give only the id)."""
    for span in ordered:
        attributes, events = attributes_of(span), events_of(span)
        span_id = span.context.span_id if span.context is not None else 0
        if is_tool(attributes):
            tool_spans.append(span)
            result = tool_result(span, issues)
            if result.call_id is not None and result.name is not None:
                names[result.call_id] = result.name
            parts.append(_Part(span, span_id, tool=result))
            continue
        convention = conventions[id(span)]
        if convention is None:
            continue
        readers = _readers_for(convention)
        if any(reader.is_retrieval(attributes, events) for reader in readers):
            positions: list[int] = []
            found = _first_list(readers, span, issues, positions)
            query = _first_text(readers, "query", span, issues)
            parts.append(
                _Part(
                    span, span_id, documents=tuple(zip(found, positions, strict=True)), query=query
                )
            )
        if any(reader.is_llm(attributes, events) for reader in readers):
            llm_spans.append(span)

    # The messages are the ones the conventions' readers parse (and note) too: read
    # quietly here, so a bad one counts once.
    quiet = Issues(0)
    steps = {id(span): asks_for_tools(span, quiet) for span in llm_spans}
    turns_read: dict[int, list[Turn]] = {}

    def turns_of(span: ReadableSpan) -> list[Turn]:
        found = turns_read.get(id(span))
        if found is None:
            found = turns_read[id(span)] = input_turns(span, quiet)
        return found

    def output_of(span: ReadableSpan) -> str | None:
        return _first_text(_readers_for(conventions[id(span)]), "output_text", span, quiet)

    finals: list[ReadableSpan | None] = list(
        _one_per_question(
            final_calls(llm_spans, lambda span: steps[id(span)], tool_spans, output_of, turns_of),
            turns_of,
        )
    )
    if refused or not finals:
        # A trace read in part is one unit, skipped; without a final call, the root's own.
        finals = finals[-1:] or [None]
    # An earlier answer is scored on its call's span: one without a span context has none.
    finals = [*(final for final in finals[:-1] if final and final.context), *finals[-1:]]
    agent = bool(tool_spans) or any(steps.values())
    agent = agent or any(
        turn.is_tool_result for final in finals if final is not None for turn in turns_of(final)
    )
    agent = agent or any(offers_tools(attributes_of(span)) for span in llm_spans)
    agent = agent or _is_agent_span(root)

    root_convention = conventions[id(root)]
    convention_seen = root_convention or next(
        (conventions[id(span)] for span in ordered if conventions[id(span)]), None
    )
    facts = _record_attributes(root, convention_seen)
    if agent:
        facts[semconv.RAG_ADAPTER_AGENT] = True
    if refused:
        facts[semconv.RAG_ADAPTER_SPANS_REFUSED] = refused
    conversation = conversation_id([root, *ordered])
    # A unit's own spans are those that started after the previous answer was given.
    bounds = [final.end_time or final.start_time or 0 for final in finals[:-1] if final]
    records: list[RagRecord | None] = []
    for index, final in enumerate(finals):
        last = index == len(finals) - 1

        def mine(span: ReadableSpan, index: int = index) -> bool:
            return len(finals) == 1 or bisect.bisect_right(bounds, span.start_time or 0) == index

        evidence = _Evidence()
        queries: list[str] = []
        for part in parts:
            if not mine(part.span):
                continue
            if part.tool is not None:
                _read_tool_result(part.tool, part.span_id, evidence, tools)
                continue
            for context, position in part.documents:
                evidence.document(context, part.span_id, position)
            if part.query is not None:
                queries.append(part.query)
        window = [span for span in llm_spans if mine(span)]
        turns = turns_of(final) if final is not None else []
        latest = latest_user(turns)
        if final is not None and turns:
            _read_results(final, turns, latest, evidence, names, tools, issues)
        question, answer = _question_and_answer(
            root if len(finals) == 1 else None,
            final,
            turns,
            latest,
            agent,
            window,
            queries,
            evidence.contexts,
            conventions,
            issues,
        )
        if answer is None and not evidence.contexts and not refused:
            records.append(None)
            continue
        records.append(
            RagRecord(
                question=_cut(question, max_text_length),
                contexts=tuple(
                    Context(
                        text=_cut(c.text, max_text_length) or "",
                        id=c.id,
                        score=c.score,
                        tool=c.tool,
                    )
                    for c in evidence.contexts
                ),
                answer=_cut(answer, max_text_length),
                name=root.name,
                span_context=root.context if last or final is None else final.context,
                attributes={**facts, **generator_models(window)},
                sources=tuple(evidence.sources),
                conversation_id=conversation,
                failed_tools=tuple(evidence.failed),
            )
        )
    return records


def _question_and_answer(
    root: ReadableSpan | None,
    final: ReadableSpan | None,
    turns: list[Turn],
    latest: int | None,
    agent: bool,
    llm_spans: Sequence[ReadableSpan],
    queries: Sequence[str],
    contexts: Sequence[Context],
    conventions: dict[int, Convention | None],
    issues: Issues,
) -> tuple[str | None, str | None]:
    """The question and answer of one unit. ``root``: the trace's only unit, whose root's own
    input and output come first; a trace with several answers has them from each final call
    (the root's describe the whole run)."""
    question = answer = None
    if root is not None:
        root_convention = conventions[id(root)]
        root_readers = _readers_for(root_convention) if root_convention else ()
        question = _first_text(root_readers, "input_text", root, issues)
        answer = _first_text(root_readers, "output_text", root, issues)
    if latest is not None and (
        root is None or question == turns[latest].text or (question is None and agent)
    ):
        # The latest user turn of the call that answered: with the turn it follows up on.
        question = resolve_question(turns, latest)
    if question is None and llm_spans:
        first = llm_spans[0]
        question = _first_text(_readers_for(conventions[id(first)]), "input_text", first, issues)
        if question is not None and queries and _is_stuffed(question, contexts):
            question = queries[0]
    if question is None and queries:
        question = queries[0]
    if answer is None and final is not None:
        answer = _first_text(_readers_for(conventions[id(final)]), "output_text", final, issues)
    return question, answer


def _one_per_question(
    finals: Sequence[ReadableSpan], turns_of: Callable[[ReadableSpan], Sequence[Turn]]
) -> list[ReadableSpan]:
    """``finals`` with an answer dropped when the next one answers the same user turn (a
    call retried): the later stands."""
    if len(finals) <= 1:
        return list(finals)
    kept: list[ReadableSpan] = []
    asked: list[tuple[int, str | None] | None] = []
    for final in finals:
        turns = turns_of(final)
        latest = latest_user(turns)
        key = None if latest is None else (latest, turns[latest].text)
        if kept and key is not None and asked[-1] == key:
            kept.pop()
            asked.pop()
        kept.append(final)
        asked.append(key)
    return kept


def _is_agent_span(span: ReadableSpan) -> bool:
    """A GenAI ``invoke_agent`` span or an OpenInference ``AGENT`` span: its answer is an
    agent's even where the instrumentation does not record the tools offered."""
    attributes = attributes_of(span)
    return (
        attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_INVOKE_AGENT
        or attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.OI_KIND_AGENT
    )


def _read_tool_result(
    result: ToolResult, span_id: int, evidence: _Evidence, tools: ToolPolicy
) -> None:
    if result.declared is False or (result.declared is None and not tools.is_evidence(result.name)):
        return
    if result.failed:
        evidence.failure(result.name)
        return
    for position, passage in enumerate(result.passages):
        evidence.result(passage, result.call_id, result.name, span_id, position)


def _read_results(
    final: ReadableSpan,
    turns: list[Turn],
    latest: int | None,
    evidence: _Evidence,
    names: dict[str, str],
    tools: ToolPolicy,
    issues: Issues,
) -> None:
    """Tool results handed to the model that gave the answer: this turn's all, in order;
    earlier turns' (the history) most recent first, within the history bounds."""
    span_id = final.context.span_id if final.context is not None else 0
    called: dict[str, str | None] = {}
    for turn in turns:
        for call_id, name in turn.calls:
            if call_id is not None:
                called[call_id] = name
    start = 0 if latest is None else latest + 1
    current = [(i, turns[i]) for i in range(start, len(turns)) if turns[i].is_tool_result]
    history = [(i, turns[i]) for i in range(start - 1, -1, -1) if turns[i].is_tool_result]
    for position, turn in current:
        _read_result_turn(turn, position, span_id, evidence, called, names, tools, issues)
    chars = 0
    for taken, (position, turn) in enumerate(history):
        if taken >= MAX_HISTORY_RESULTS or chars >= MAX_HISTORY_CHARS:
            issues.append(
                f"history: {len(history) - taken} earlier tool results past the history bounds"
            )
            break
        before = len(evidence.contexts)
        _read_result_turn(
            turn, position, span_id, evidence, called, names, tools, issues, history=True
        )
        chars += sum(len(context.text) for context in evidence.contexts[before:])


def _read_result_turn(
    turn: Turn,
    position: int,
    span_id: int,
    evidence: _Evidence,
    called: dict[str, str | None],
    names: dict[str, str],
    tools: ToolPolicy,
    issues: Issues,
    *,
    history: bool = False,
) -> None:
    call_id = turn.call_id
    name = turn.name
    if name is None and call_id is not None:
        name = called.get(call_id) or names.get(call_id)
    if call_id is not None and call_id not in called and call_id not in names:
        # Still what the model was given: evidence, but worth a note.
        issues.append(f"tool result for call {call_id[:40]!r} that no call in the trace made")
    if not tools.is_evidence(name):
        return
    passages, failed = result_passages(turn.result, f"tool message {position}", issues)
    if failed:
        if not history:
            evidence.failure(name)
        return
    if history:
        # An earlier turn's result may have been cut to bound the history.
        room = MAX_HISTORY_CHARS
        passages = tuple(passage[:room] for passage in passages)
    for passage in passages:
        evidence.result(passage, call_id, name, span_id, position)


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
