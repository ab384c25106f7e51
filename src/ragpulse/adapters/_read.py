"""A trace read into records: ``read_trace`` and its parts (see the package's docstring)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragpulse import semconv
from ragpulse.adapters._agent import (
    MAX_HISTORY_CHARS,
    MAX_HISTORY_RESULTS,
    conversation_id,
    final_calls,
    latest_user,
    resolve_question,
)
from ragpulse.adapters._common import (
    Issues,
    attributes_of,
    events_of,
    generator_models,
)
from ragpulse.adapters._conventions import is_kind
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

from ragpulse.adapters._readers import (
    MAX_ISSUES_KEPT,
    Convention,
    detect_convention,
    first_list,
    first_text,
    readers_for,
)

# A user message "contains a passage" only for passages long enough to mean it.
_MIN_STUFFED_PASSAGE = 20
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
    issues = Issues(MAX_ISSUES_KEPT)
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
        readers = readers_for(convention)
        if any(reader.is_retrieval(attributes, events) for reader in readers):
            positions: list[int] = []
            found = first_list(readers, span, issues, positions)
            query = first_text(readers, "query", span, issues)
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
        return first_text(readers_for(conventions[id(span)]), "output_text", span, quiet)

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
        root_readers = readers_for(root_convention) if root_convention else ()
        question = first_text(root_readers, "input_text", root, issues)
        answer = first_text(root_readers, "output_text", root, issues)
    if latest is not None and (
        root is None or question == turns[latest].text or (question is None and agent)
    ):
        # The latest user turn of the call that answered: with the turn it follows up on.
        question = resolve_question(turns, latest)
    if question is None and llm_spans:
        first = llm_spans[0]
        question = first_text(readers_for(conventions[id(first)]), "input_text", first, issues)
        if question is not None and queries and _is_stuffed(question, contexts):
            question = queries[0]
    if question is None and queries:
        question = queries[0]
    if answer is None and final is not None:
        answer = first_text(readers_for(conventions[id(final)]), "output_text", final, issues)
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
    """An agent's run in any convention (GenAI ``invoke_agent``, OpenInference ``AGENT``...,
    ``_conventions``): its answer is an agent's even where the instrumentation does not
    record the tools offered."""
    return is_kind("agent", attributes_of(span))


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


def _is_stuffed(message: str, contexts: Sequence[Context]) -> bool:
    return any(
        len(context.text) >= _MIN_STUFFED_PASSAGE and context.text in message
        for context in contexts
    )


def _cut(value: str | None, limit: int | None) -> str | None:
    if value is None or limit is None or len(value) <= limit:
        return value
    return value[:limit]
