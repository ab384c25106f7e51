"""Read spans written in the OpenTelemetry GenAI semantic conventions.

Retrieval spans (``gen_ai.operation.name = "retrieval"``) carry
``gen_ai.retrieval.query.text`` and ``gen_ai.retrieval.documents`` (a JSON list of
``{id, score, content}``). Inference spans (``chat``, ``text_completion``,
``generate_content``) carry ``gen_ai.input.messages`` / ``gen_ai.output.messages``
(JSON lists of ``{role, parts: [{type: "text", content}]}``), on the span or on a
``gen_ai.client.inference.operation.details`` event, or the older flattened
``gen_ai.prompt.N.content`` / ``gen_ai.completion.N.content`` attributes that
OpenLLMetry still writes.

What the span does not say is skipped, noted in ``issues``; nothing here raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ragpulse import semconv
from ragpulse.adapters._common import (
    Attributes,
    Events,
    Issues,
    attributes_of,
    context_from_mapping,
    first_output_text,
    indexed,
    last_user_text,
    load_json,
    parse_json,
    text,
)
from ragpulse.adapters._conventions import is_kind
from ragpulse.evaluation.types import Context

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.util.types import AttributeValue

_MESSAGE_EVENTS = frozenset(
    {
        semconv.GEN_AI_OPERATION_DETAILS_EVENT,
        semconv.GEN_AI_CONTENT_PROMPT_EVENT,
        semconv.GEN_AI_CONTENT_COMPLETION_EVENT,
    }
)
_PROMPT_PREFIX = f"{semconv.GEN_AI_PROMPT}."
_COMPLETION_PREFIX = f"{semconv.GEN_AI_COMPLETION}."
_FIRST_PROMPT = f"{semconv.GEN_AI_PROMPT}.0.content"
_FIRST_COMPLETION = f"{semconv.GEN_AI_COMPLETION}.0.content"


# --- the GenAI adapter ---------------------------------------------------------


def matches(attributes: Attributes, events: Events) -> bool:
    """The span is written in the GenAI conventions."""
    return (
        semconv.GEN_AI_OPERATION_NAME in attributes
        or semconv.GEN_AI_INPUT_MESSAGES in attributes
        or semconv.GEN_AI_OUTPUT_MESSAGES in attributes
        or semconv.GEN_AI_RETRIEVAL_DOCUMENTS in attributes
        or _FIRST_PROMPT in attributes
        or _FIRST_COMPLETION in attributes
    )


def is_retrieval(attributes: Attributes, events: Events) -> bool:
    """A ``retrieval`` operation, or a span that reports retrieved documents."""
    return is_kind("retrieval", attributes, convention="genai")


def is_llm(attributes: Attributes, events: Events) -> bool:
    """An inference operation, or a span with the older prompt/completion attributes."""
    return is_kind("llm", attributes, convention="genai")


def documents(
    span: ReadableSpan, issues: Issues, positions: list[int] | None = None
) -> list[Context]:
    """``gen_ai.retrieval.documents``: a JSON list, or a list of JSON objects; each one's
    position in the list appended to ``positions`` when given."""
    raw = attributes_of(span).get(semconv.GEN_AI_RETRIEVAL_DOCUMENTS)
    if raw is None:
        return []
    where = semconv.GEN_AI_RETRIEVAL_DOCUMENTS
    items: list[object]
    if isinstance(raw, str):
        parsed = load_json(raw, where, issues)
        if parsed is None:
            return []
        if not isinstance(parsed, list):
            issues.append(f"{where}: expected a JSON list, got {type(parsed).__name__}")
            return []
        items = parsed
    elif isinstance(raw, Sequence) and not isinstance(raw, bytes):
        # One JSON object per element: how the structured form survives a span attribute.
        # (Bytes are a sequence too, of ints: not a list, nor one issue per byte.)
        items = [load_json(element, f"{where}[{i}]", issues) for i, element in enumerate(raw)]
    else:
        issues.append(f"{where}: unexpected {type(raw).__name__}")
        return []
    contexts: list[Context] = []
    for i, item in enumerate(items):
        context = context_from_mapping(item) if isinstance(item, Mapping) else None
        if context is None:
            if item is not None:
                issues.append(f"{where}[{i}]: no document text")
            continue
        contexts.append(context)
        if positions is not None:
            positions.append(i)
    return contexts


def query(span: ReadableSpan, issues: Issues) -> str | None:
    """``gen_ai.retrieval.query.text``."""
    return text(attributes_of(span).get(semconv.GEN_AI_RETRIEVAL_QUERY_TEXT))


def input_text(span: ReadableSpan, issues: Issues) -> str | None:
    """The last user message of ``gen_ai.input.messages`` or of ``gen_ai.prompt.N``."""
    messages = _messages(span, semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_PROMPT, issues)
    if messages is not None:
        return last_user_text(messages)
    return last_user_text(_flattened(attributes_of(span), _PROMPT_PREFIX, "user"))


def output_text(span: ReadableSpan, issues: Issues) -> str | None:
    """The first output message of ``gen_ai.output.messages`` or ``gen_ai.completion.N``."""
    messages = _messages(span, semconv.GEN_AI_OUTPUT_MESSAGES, semconv.GEN_AI_COMPLETION, issues)
    if messages is not None:
        return first_output_text(messages)
    return first_output_text(_flattened(attributes_of(span), _COMPLETION_PREFIX, "assistant"))


def _messages(span: ReadableSpan, key: str, event_key: str, issues: Issues) -> object | None:
    """A message list from the span attribute, else from a message-carrying event."""
    raw = attributes_of(span).get(key)
    if raw is None:
        for event in span.events:
            if event.name in _MESSAGE_EVENTS and event.attributes:
                raw = event.attributes.get(key, event.attributes.get(event_key))
                if raw is not None:
                    break
    if raw is None:
        return None
    parsed = load_json(raw, key, issues)
    if parsed is not None and not isinstance(parsed, list):
        issues.append(f"{key}: expected a JSON list, got {type(parsed).__name__}")
        return None
    return parsed


def _flattened(
    attributes: Mapping[str, AttributeValue], prefix: str, default_role: str
) -> list[dict[str, object]]:
    """``gen_ai.prompt.N.role`` / ``.content`` as a list of message objects."""
    messages: list[dict[str, object]] = []
    for fields in indexed(attributes, prefix).values():
        content = fields.get("content")
        # OpenLLMetry writes list-valued content (text parts) as a JSON string.
        if isinstance(content, str) and content.startswith("[{"):
            with contextlib.suppress(ValueError):
                content = parse_json(content)
        messages.append({"role": fields.get("role", default_role), "content": content})
    return messages
