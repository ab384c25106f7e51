"""Read spans written in the OpenInference conventions (Phoenix, Arize).

``openinference.span.kind`` says what a span is: ``RETRIEVER`` spans flatten their
documents into ``retrieval.documents.N.document.{content,id,score}``, ``LLM`` spans
their messages into ``llm.input_messages.N.message.{role,content}`` (or
``message.contents.M.message_content.{type,text}`` for multi-part content) and
``llm.output_messages.N.message.content``, and every kind may carry
``input.value`` / ``output.value``, which is JSON when ``input.mime_type`` says
``application/json`` (the OpenAI instrumentor's request and response bodies,
LangChain's chain inputs and outputs).

``value_text`` turns such a value into the question or the answer; the
OpenLLMetry adapter uses it for ``traceloop.entity.input`` / ``output`` too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from ragpulse import semconv
from ragpulse.adapters._common import (
    Attributes,
    Events,
    Issues,
    as_float,
    as_id,
    attributes_of,
    first_output_text,
    indexed,
    last_user_text,
    list_index,
    message_text,
    parse_json,
    role_of,
    text,
)
from ragpulse.adapters._conventions import is_kind
from ragpulse.evaluation.types import Context

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

Side = Literal["input", "output"]

# Where frameworks put the question and the answer inside a JSON value, most
# specific first. "args"/"kwargs" are OpenLLMetry's decorator form.
_INPUT_KEYS = (
    "question",
    "query",
    "input",
    "user_input",
    "prompt",
    "text",
    "content",
    "message",
    "inputs",
    "args",
    "kwargs",
)
_OUTPUT_KEYS = (
    "answer",
    "output",
    "result",
    "response",
    "text",
    "content",
    "output_text",
    "generation",
    "message",
    "outputs",
)
# Deep enough for {"outputs": {"answer": ...}} and {"inputs": {"input": {"question": ...}}}.
_MAX_DEPTH = 5
_DOCUMENTS_PREFIX = f"{semconv.OI_RETRIEVAL_DOCUMENTS}."
_INPUT_MESSAGES_PREFIX = f"{semconv.OI_LLM_INPUT_MESSAGES}."
_OUTPUT_MESSAGES_PREFIX = f"{semconv.OI_LLM_OUTPUT_MESSAGES}."
_CONTENTS_PREFIX = f"{semconv.OI_MESSAGE_CONTENTS}."


def matches(attributes: Attributes, events: Events) -> bool:
    """The span is written in the OpenInference conventions."""
    return semconv.OPENINFERENCE_SPAN_KIND in attributes


def is_retrieval(attributes: Attributes, events: Events) -> bool:
    """A ``RETRIEVER`` span."""
    return is_kind("retrieval", attributes, convention="openinference")


def is_llm(attributes: Attributes, events: Events) -> bool:
    """An ``LLM`` span."""
    return is_kind("llm", attributes, convention="openinference")


def documents(
    span: ReadableSpan, issues: Issues, positions: list[int] | None = None
) -> list[Context]:
    """``retrieval.documents.N.document.{content,id,score}`` in index order; each one's
    ``N`` appended to ``positions`` when given."""
    contexts: list[Context] = []
    for index, fields in indexed(attributes_of(span), _DOCUMENTS_PREFIX).items():
        body = text(fields.get(semconv.OI_DOCUMENT_CONTENT))
        if body is None:
            issues.append(f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}: no document content")
            continue
        if positions is not None:
            positions.append(index)
        contexts.append(
            Context(
                text=body,
                id=as_id(fields.get(semconv.OI_DOCUMENT_ID)),
                score=as_float(fields.get(semconv.OI_DOCUMENT_SCORE)),
            )
        )
    return contexts


def query(span: ReadableSpan, issues: Issues) -> str | None:
    """A retriever's ``input.value`` (the query, sometimes wrapped in JSON)."""
    return _value(span, semconv.OI_INPUT_VALUE, semconv.OI_INPUT_MIME_TYPE, "input", issues)


def input_text(span: ReadableSpan, issues: Issues) -> str | None:
    """The question: the last user message of an LLM span, else ``input.value``."""
    if is_llm(attributes_of(span), ()):
        found = last_user_text(_messages(span, _INPUT_MESSAGES_PREFIX))
        if found is not None:
            return found
    return _value(span, semconv.OI_INPUT_VALUE, semconv.OI_INPUT_MIME_TYPE, "input", issues)


def output_text(span: ReadableSpan, issues: Issues) -> str | None:
    """The answer: the first output message of an LLM span, else ``output.value``."""
    if is_llm(attributes_of(span), ()):
        found = first_output_text(_messages(span, _OUTPUT_MESSAGES_PREFIX))
        if found is not None:
            return found
    return _value(span, semconv.OI_OUTPUT_VALUE, semconv.OI_OUTPUT_MIME_TYPE, "output", issues)


def _value(span: ReadableSpan, key: str, mime_key: str, side: Side, issues: Issues) -> str | None:
    attributes = attributes_of(span)
    raw = attributes.get(key)
    if raw is None:
        return None
    mime = attributes.get(mime_key)
    return value_text(raw, side, issues, where=key, is_json=mime == semconv.OI_MIME_JSON)


def value_text(
    raw: object, side: Side, issues: Issues, *, where: str, is_json: bool | None = None
) -> str | None:
    """The question (``side="input"``) or answer (``"output"``) inside a span value.

    ``is_json=True`` means the writer declared JSON: a value that does not parse
    is noted in ``issues`` and read as plain text. ``None`` means undeclared:
    a value that looks like a JSON object or list is tried quietly.
    """
    if not isinstance(raw, str):
        issues.append(f"{where}: expected a string, got {type(raw).__name__}")
        return None
    declared = bool(is_json)
    if declared or (is_json is None and raw.lstrip()[:1] in ("{", "[", '"')):
        try:
            parsed: object = parse_json(raw)
        except ValueError:
            if declared:
                issues.append(f"{where}: declared JSON but does not parse")
        else:
            found = dig_text(parsed, side)
            if found is not None or isinstance(parsed, Mapping | list) or parsed is None:
                # Valid JSON with no recognisable text in it: nothing to evaluate.
                return found
    return text(raw)


def dig_text(value: object, side: Side, depth: int = 0) -> str | None:
    """The question or answer inside a parsed JSON value, by the keys frameworks use."""
    if isinstance(value, str):
        return text(value)
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(value, Mapping):
        return _dig_mapping(value, side, depth)
    if isinstance(value, list):
        if value and all(isinstance(item, Mapping) and role_of(item) for item in value):
            return last_user_text(value) if side == "input" else first_output_text(value)
        for item in value:
            found = dig_text(item, side, depth + 1)
            if found is not None:
                return found
    return None


def _dig_mapping(value: Mapping[str, object], side: Side, depth: int) -> str | None:
    messages = value.get("messages")
    if side == "input" and isinstance(messages, list):
        # A chat request body (OpenAI instrumentor) or a LangChain chat input.
        found = last_user_text(messages) or dig_text(messages, side, depth + 1)
        if found is not None:
            return found
    choices = value.get("choices")
    if side == "output" and isinstance(choices, list) and choices:
        # A Chat Completions (message) or Completions (text) response body.
        first = choices[0]
        if isinstance(first, Mapping):
            message = first.get("message")
            if isinstance(message, Mapping):
                return message_text(message)
            return text(first.get("text"))
    for key in _INPUT_KEYS if side == "input" else _OUTPUT_KEYS:
        if key in value:
            found = dig_text(value[key], side, depth + 1)
            if found is not None:
                return found
    if role_of(value) is not None:
        return message_text(value)
    if len(value) == 1:
        return dig_text(next(iter(value.values())), side, depth + 1)
    return None


def _messages(span: ReadableSpan, prefix: str) -> list[dict[str, object]]:
    """Flattened OpenInference messages as ``{role, content}`` objects."""
    messages: list[dict[str, object]] = []
    for fields in indexed(attributes_of(span), prefix).values():
        content: object = fields.get(semconv.OI_MESSAGE_CONTENT)
        if content is None:
            content = [
                {
                    "type": part.get(semconv.OI_MESSAGE_CONTENT_TYPE),
                    "text": part.get(semconv.OI_MESSAGE_CONTENT_TEXT),
                }
                for part in _contents(fields)
            ]
        messages.append({"role": fields.get(semconv.OI_MESSAGE_ROLE), "content": content})
    return messages


def _contents(fields: Mapping[str, object]) -> Sequence[Mapping[str, object]]:
    """``message.contents.M.message_content.*`` of one message, in index order."""
    parts: dict[int, dict[str, object]] = {}
    for key, value in fields.items():
        if not key.startswith(_CONTENTS_PREFIX):
            continue
        index, _, rest = key[len(_CONTENTS_PREFIX) :].partition(".")
        position = list_index(index)
        if position is not None and rest:
            parts.setdefault(position, {})[rest] = value
    return [parts[i] for i in sorted(parts)]
