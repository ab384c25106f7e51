"""GenAI content written as log events, read back onto the spans they belong to.

The OpenTelemetry GenAI instrumentation does not always put a call's messages on its span:

- in its default mode (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` without
  ``OTEL_SEMCONV_STABILITY_OPT_IN``) each message is its own log event,
  ``gen_ai.{system,user,assistant,tool}.message`` with the message as its body, and each
  completion choice a ``gen_ai.choice`` event (``index``, ``finish_reason``, ``message``);
- with ``gen_ai_latest_experimental`` and ``EVENT_ONLY`` (or ``SPAN_AND_EVENT``), one
  ``gen_ai.client.inference.operation.details`` event carries ``gen_ai.input.messages``,
  ``gen_ai.output.messages`` (structured, not JSON strings), ``gen_ai.system_instructions``
  and ``gen_ai.tool.definitions``.

Either way the event carries the trace and span id of the chat span it describes. A
``ContentEvent`` is what ragpulse keeps of one such event (``content_event``: from any log
record's parts; ``from_log_record``: from an SDK or API ``LogRecord``; serve reads OTLP's
protobuf with ``serve._log_content``). ``with_content`` gives a reading view of a span with
its events' content as the span-attribute mode would have written it
(``gen_ai.input.messages`` / ``gen_ai.output.messages`` JSON), so every reader reads one
shape. The view is only read: the span that is exported is the one the app made.

An event without content (content capture off) is not kept: it says nothing to judge, and
a trace of such events reads as the same trace with content off on its spans.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan

from ragpulse import semconv
from ragpulse.adapters._common import attributes_of, value_bytes, with_attributes

if TYPE_CHECKING:
    from opentelemetry._logs import LogRecord

__all__ = [
    "CONTENT_EVENT_NAMES",
    "ContentEvent",
    "content_event",
    "from_log_record",
    "join_content",
    "with_content",
]

_DETAILS = semconv.GEN_AI_OPERATION_DETAILS_EVENT
_CHOICE = semconv.GEN_AI_CHOICE_EVENT
_DETAILS_KEYS = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    semconv.GEN_AI_TOOL_DEFINITIONS,
)
CONTENT_EVENT_NAMES = frozenset({_DETAILS, _CHOICE, *semconv.GEN_AI_MESSAGE_EVENTS})
"""The log events whose content ragpulse reads: a cheap test for every record emitted."""

# Fixed cost of one held event beyond its strings (ids, name, the record object).
_EVENT_OVERHEAD_BYTES = 96


@dataclass(frozen=True, slots=True)
class ContentEvent:
    """What ragpulse keeps of one GenAI content log event."""

    trace_id: int
    span_id: int
    """The span the event describes (its chat call)."""
    name: str
    content: Mapping[str, Any]
    """A message event's body, a choice event's body, or the operation details event's
    content attributes; plain values (mappings, sequences, strings, numbers)."""
    size: int
    """Estimated bytes held (the trace buffers' byte bounds count it)."""


def content_event(
    name: str | None,
    trace_id: int | None,
    span_id: int | None,
    body: object,
    attributes: Mapping[str, Any] | None,
) -> ContentEvent | None:
    """The ``ContentEvent`` of a log record with this event name, ids, body and attributes;
    ``None`` when it is no GenAI content event, is tied to no span, or carries no content."""
    if name is None and attributes:
        name = attributes.get(semconv.EVENT_NAME)
    if not isinstance(name, str) or name not in CONTENT_EVENT_NAMES:
        return None
    if not trace_id or not span_id:
        return None
    content: Mapping[str, Any] | None
    if name == _DETAILS:
        content = {
            key: attributes[key] for key in _DETAILS_KEYS if attributes and key in attributes
        }
    elif isinstance(body, Mapping) and _carries_content(name, body):
        content = body
    else:
        content = None
    if not content:
        return None
    size = _EVENT_OVERHEAD_BYTES + len(name) + value_bytes(content)
    return ContentEvent(trace_id, span_id, name, content, size)


def from_log_record(record: LogRecord) -> ContentEvent | None:
    """``content_event`` of an OpenTelemetry ``LogRecord`` (the SDK's or the API's)."""
    return content_event(
        getattr(record, "event_name", None),
        record.trace_id,
        record.span_id,
        record.body,
        record.attributes,
    )


def _carries_content(name: str, body: Mapping[str, Any]) -> bool:
    """Whether a legacy event's body holds text or tool arguments (capture was on)."""
    if name == _CHOICE:
        message = body.get("message")
        # OpenLLMetry's events put a choice's tool calls beside its message.
        return (isinstance(message, Mapping) and _message_has_content(message)) or (
            _message_has_content({"tool_calls": body.get("tool_calls")})
        )
    return _message_has_content(body)


def _message_has_content(message: Mapping[str, Any]) -> bool:
    if message.get("content") is not None:
        return True
    calls = message.get("tool_calls")
    if not isinstance(calls, Sequence) or isinstance(calls, str):
        return False
    return any(
        isinstance(call, Mapping)
        and isinstance(call.get("function"), Mapping)
        and call["function"].get("arguments") is not None
        for call in calls
    )


def with_content(span: ReadableSpan, events: Sequence[ContentEvent]) -> ReadableSpan:
    """``span`` as the span-attribute mode would have written it, with the content of
    ``events`` (its own, in the order they were emitted); ``span`` itself when they add
    nothing it lacks. For reading only: never exported."""
    if not events:
        return span
    attributes = attributes_of(span)
    added: dict[str, str] = {}
    inputs: list[dict[str, Any]] = []
    choices: list[tuple[int, dict[str, Any]]] = []
    for event in events:
        if event.name == _DETAILS:
            for key, value in event.content.items():
                if key not in attributes and key not in added:
                    added[key] = value if isinstance(value, str) else _dumps(value)
        elif event.name == _CHOICE:
            choices.append(_choice(event.content, len(choices)))
        else:
            inputs.append(_message(semconv.GEN_AI_MESSAGE_EVENTS[event.name], event.content))
    if inputs and semconv.GEN_AI_INPUT_MESSAGES not in attributes:
        added.setdefault(semconv.GEN_AI_INPUT_MESSAGES, _dumps(_answer_calls(inputs)))
    if choices and semconv.GEN_AI_OUTPUT_MESSAGES not in attributes:
        ordered = [message for _, message in sorted(choices, key=lambda c: c[0])]
        added.setdefault(semconv.GEN_AI_OUTPUT_MESSAGES, _dumps(ordered))
    if not added:
        return span
    return with_attributes(span, added)


def join_content(
    spans: Sequence[ReadableSpan], events: Iterable[ContentEvent]
) -> list[ReadableSpan]:
    """``spans``, each with the content of the ``events`` tied to it (``with_content``); an
    event whose span is not among them is left out."""
    by_span: dict[int, list[ContentEvent]] = {}
    for event in events:
        by_span.setdefault(event.span_id, []).append(event)
    if not by_span:
        return list(spans)
    joined: list[ReadableSpan] = []
    for span in spans:
        context = span.context
        own = by_span.get(context.span_id) if context is not None else None
        joined.append(with_content(span, own) if own else span)
    return joined


def _message(role: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A legacy message event's body as an OpenAI-shaped message (what ``_messages`` reads)."""
    message: dict[str, Any] = {"role": role}
    if body.get("content") is not None:
        message["content"] = body["content"]
    if body.get("tool_calls") is not None:
        message["tool_calls"] = body["tool_calls"]
    if role == "tool" and body.get("id") is not None:
        message["tool_call_id"] = body["id"]
    return message


def _answer_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool messages without a call id (OpenLLMetry's events carry none) given the id and
    name of the call they answer: the Chat Completions API requires the results to follow
    the assistant's calls, one each, in order."""
    pending: list[Mapping[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls")
            pending = (
                [c for c in calls if isinstance(c, Mapping)]
                if isinstance(calls, list | tuple)
                else []
            )
        elif role == "tool" and pending:
            call = pending.pop(0)
            if message.get("tool_call_id") is None and call.get("id") is not None:
                message["tool_call_id"] = call["id"]
                function = call.get("function")
                if isinstance(function, Mapping) and function.get("name") is not None:
                    message.setdefault("name", function["name"])
        elif role != "tool":
            pending = []
    return messages


def _choice(body: Mapping[str, Any], position: int) -> tuple[int, dict[str, Any]]:
    raw = body.get("message")
    given: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    message = _message(str(given.get("role") or "assistant"), given)
    if "tool_calls" not in message and body.get("tool_calls") is not None:
        message["tool_calls"] = body["tool_calls"]  # OpenLLMetry's place for them
    if body.get("finish_reason") is not None:
        message["finish_reason"] = body["finish_reason"]
    index = body.get("index")
    return (index if isinstance(index, int) and not isinstance(index, bool) else position), message


def _dumps(value: object) -> str:
    # Tuples (how the SDK keeps sequences) become lists; what JSON cannot say, its text.
    return json.dumps(value, default=str, ensure_ascii=False)
