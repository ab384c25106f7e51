"""Read spans written by OpenLLMetry (Traceloop).

Workflow and task spans (``traceloop.span.kind``) carry their function's input and
output as JSON in ``traceloop.entity.input`` / ``traceloop.entity.output``: the
``@workflow`` decorator writes ``{"args": [...], "kwargs": {...}}``, the LangChain
instrumentation ``{"inputs": {...}, ...}`` and ``{"outputs": {...}, ...}``.
Vector-store spans add one ``db.query.result`` event per match with
``db.query.result.document`` (the text), ``.id``, ``.score`` and ``.metadata``.
LLM spans (``llm.request.type``) use the older GenAI ``gen_ai.prompt.N`` /
``gen_ai.completion.N`` attributes, which the GenAI adapter reads.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ragpulse import semconv
from ragpulse.adapters._common import (
    Attributes,
    Events,
    Issues,
    as_float,
    as_id,
    attributes_of,
    context_from_mapping,
    parse_json,
    text,
)
from ragpulse.adapters._conventions import is_kind
from ragpulse.adapters.openinference import value_text
from ragpulse.evaluation.types import Context

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.util.types import AttributeValue

# Pinecone's instrumentation writes metadata with str(dict); parsing a Python
# literal is bounded by this size so a huge value cannot stall the reader.
_MAX_METADATA_CHARS = 64 * 1024


def matches(attributes: Attributes, events: Events) -> bool:
    """The span was written by OpenLLMetry."""
    return (
        semconv.TRACELOOP_SPAN_KIND in attributes
        or semconv.TRACELOOP_ENTITY_INPUT in attributes
        or semconv.TRACELOOP_ENTITY_OUTPUT in attributes
        or semconv.LLM_REQUEST_TYPE in attributes
        or is_retrieval(attributes, events)
    )


def is_retrieval(attributes: Attributes, events: Events) -> bool:
    """A vector-store query that reported its matches as ``db.query.result`` events."""
    return is_kind("retrieval", attributes, (e.name for e in events), convention="openllmetry")


def is_llm(attributes: Attributes, events: Events) -> bool:
    """A chat or completion request."""
    return is_kind("llm", attributes, convention="openllmetry")


def documents(
    span: ReadableSpan, issues: Issues, positions: list[int] | None = None
) -> list[Context]:
    """One context per ``db.query.result`` match, in event order; each one's position among
    the span's matches appended to ``positions`` when given (the convention numbers none)."""
    contexts: list[Context] = []
    position = 0
    for event in span.events:
        if event.name != semconv.DB_QUERY_RESULT_EVENT:
            continue
        for context in _event_documents(event.attributes or {}, position, issues):
            contexts.append(context)
        position += 1
    if positions is not None:
        positions.extend(range(len(contexts)))
    return contexts


def _event_documents(
    attributes: Mapping[str, AttributeValue], position: int, issues: Issues
) -> list[Context]:
    where = f"{semconv.DB_QUERY_RESULT_EVENT}[{position}]"
    document = attributes.get(semconv.DB_QUERY_RESULT_DOCUMENT)
    ids = attributes.get(semconv.DB_QUERY_RESULT_ID)
    scores = attributes.get(semconv.DB_QUERY_RESULT_SCORE)
    if isinstance(document, Sequence) and not isinstance(document, str):
        # Some versions put a whole query's matches on one event as parallel lists.
        return [
            Context(text=body, id=as_id(_nth(ids, i)), score=as_float(_nth(scores, i)))
            for i, item in enumerate(document)
            if (body := text(item)) is not None
        ]
    body = text(document)
    if body is None:
        body = _text_from_metadata(attributes.get(semconv.DB_QUERY_RESULT_METADATA))
    if body is None:
        issues.append(f"{where}: no document text")
        return []
    return [Context(text=body, id=as_id(ids), score=as_float(scores))]


def _nth(values: object, index: int) -> object:
    if isinstance(values, Sequence) and not isinstance(values, str):
        return values[index] if index < len(values) else None
    return None


def _text_from_metadata(metadata: object) -> str | None:
    """The passage kept in a match's metadata (LangChain stores ``text`` there)."""
    if not isinstance(metadata, str) or len(metadata) > _MAX_METADATA_CHARS:
        return None
    parsed: object
    try:
        parsed = parse_json(metadata)
    except ValueError:
        try:
            parsed = ast.literal_eval(metadata)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(parsed, Mapping):
        return None
    context = context_from_mapping(parsed)
    return None if context is None else context.text


def query(span: ReadableSpan, issues: Issues) -> str | None:
    """``db.query.text`` where the vector store records it."""
    return text(attributes_of(span).get(semconv.DB_QUERY_TEXT))


def input_text(span: ReadableSpan, issues: Issues) -> str | None:
    """The question inside ``traceloop.entity.input``."""
    raw = attributes_of(span).get(semconv.TRACELOOP_ENTITY_INPUT)
    if raw is None:
        return None
    return value_text(raw, "input", issues, where=semconv.TRACELOOP_ENTITY_INPUT)


def output_text(span: ReadableSpan, issues: Issues) -> str | None:
    """The answer inside ``traceloop.entity.output`` (JSON, or a plain string)."""
    raw = attributes_of(span).get(semconv.TRACELOOP_ENTITY_OUTPUT)
    if raw is None:
        return None
    return value_text(raw, "output", issues, where=semconv.TRACELOOP_ENTITY_OUTPUT)
