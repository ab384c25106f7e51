"""What a span is to the evaluator: a local root, a retrieval, evidence, an answer.

Cheap predicates the processor and serve ask of every span, and ``span_facts``, the little
they keep of a span they hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragpulse import errors, semconv
from ragpulse.adapters._common import (
    Issues,
    attributes_of,
    events_of,
)
from ragpulse.adapters._conventions import WAITS_FOR_UNIT, is_kind
from ragpulse.adapters._messages import asks_for_tools, input_turns, offers_tools
from ragpulse.adapters._tools import (
    is_tool,
    tool_result,
)
from ragpulse.evaluation.types import RagRecord

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

from ragpulse.adapters._readers import (
    FALLBACKS,
    MAX_ISSUES_KEPT,
    detect_convention,
    first_list,
    first_text,
    readers_for,
)


def is_local_root(span: ReadableSpan) -> bool:
    """The span has no parent in this process: where a trace's record is read."""
    return span.parent is None or span.parent.is_remote


def is_buffered(span: ReadableSpan) -> bool:
    """Whether the processor should hold ``span`` until its trace's local root ends.

    True for retrieval, LLM and tool spans in any convention (the conventions table,
    ``_conventions``, which ``ragpulse serve``'s router reads too). It runs for every span
    that ends, so it is a handful of dict lookups and one pass over the events.
    """
    try:
        attributes, events = attributes_of(span), events_of(span)
        names = tuple(event.name for event in events) if events else ()
        return any(is_kind(kind, attributes, names) for kind in WAITS_FOR_UNIT)
    except Exception:
        # A span object we cannot inspect is not worth holding; never fail on_end.
        return False


def is_retrieval(span: ReadableSpan) -> bool:
    """Whether ``span`` retrieved documents, in any convention (ragpulse's ``@retrieval``
    spans too): where per-document scores are written."""
    try:
        attributes, events = attributes_of(span), events_of(span)
        return is_kind("retrieval", attributes, (event.name for event in events))
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
        if not any(reader.is_llm(attributes, events) for reader in FALLBACKS):
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
    issues = Issues(MAX_ISSUES_KEPT)
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
        readers = readers_for(convention)
        contexts: frozenset[tuple[str, str | None]] = frozenset()
        if any(reader.is_retrieval(attributes, events) for reader in readers):
            contexts = frozenset((c.text, c.id) for c in first_list(readers, span, issues))
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
            has_answer = first_text(readers, "output_text", span, issues) is not None
        else:
            has_answer = (
                llm and not calls and first_text(readers, "output_text", span, issues) is not None
            )
        return SpanFacts(contexts, has_answer, incomplete, agent)
    except Exception:
        # read_trace will say what it could not read; here the span just adds nothing.
        return SpanFacts()
