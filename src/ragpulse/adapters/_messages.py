"""An LLM span's conversation as turns: who spoke, the tools asked for, the results given.

Each convention writes the model's input messages its own way, and an agent's tool
results travel in them:

- OpenInference: ``llm.input_messages.N.message.{role,content}``, a tool result as
  ``role = tool`` with ``message.tool_call_id`` (and ``message.name``), an assistant's
  calls as ``message.tool_calls.M.tool_call.{id,function.name}``; the request body in
  ``input.value`` when the flattened messages are missing;
- GenAI: ``gen_ai.input.messages`` (on the span or its
  ``gen_ai.client.inference.operation.details`` event), parts ``{type: tool_call, id,
  name}`` and ``{type: tool_call_response, id, response}``; OpenAI-shaped JSON messages
  (``tool_call_id``, ``tool_calls``) are read the same way;
- OpenLLMetry's older attributes: ``gen_ai.prompt.N.{role,content,tool_call_id}`` and
  ``gen_ai.prompt.N.tool_calls.M.{id,name}``.

``input_turns`` gives them as ``Turn`` objects; ``asks_for_tools`` says whether the span's
output calls tools (then it is an intermediate step, not an answer); ``offers_tools``
whether the request offered any. Bounded by ``MAX_TURNS`` (the most recent kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragpulse import semconv
from ragpulse.adapters._common import (
    Attributes,
    Issues,
    as_id,
    attributes_of,
    events_of,
    indexed,
    list_index,
    load_json,
    message_text,
    parse_json,
    role_of,
    text,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "MAX_TURNS",
    "Turn",
    "asks_for_tools",
    "input_turns",
    "offers_tools",
    "output_call_ids",
]

MAX_TURNS = 4096
"""Turns of one input read, the most recent kept: a history of thousands of turns costs
its parse, not a list as long."""

_TOOL_ROLES = frozenset({"tool", "function", "ipython"})
_OI_INPUT = f"{semconv.OI_LLM_INPUT_MESSAGES}."
_OI_OUTPUT = f"{semconv.OI_LLM_OUTPUT_MESSAGES}."
_OI_TOOLS = f"{semconv.OI_LLM_TOOLS}."
_OI_CALLS = f"{semconv.OI_MESSAGE_TOOL_CALLS}."
_PROMPT = f"{semconv.GEN_AI_PROMPT}."
_COMPLETION = f"{semconv.GEN_AI_COMPLETION}."
_FUNCTIONS = f"{semconv.LLM_REQUEST_FUNCTIONS}."
_OI_CALL_ID = f".{semconv.OI_TOOL_CALL_ID_KEY}"
_TOOL_FINISH = frozenset({"tool_calls", "tool_call", "function_call", "tool_use"})
_MESSAGE_EVENTS = frozenset(
    {semconv.GEN_AI_OPERATION_DETAILS_EVENT, semconv.GEN_AI_CONTENT_PROMPT_EVENT}
)

Call = tuple[str | None, str | None]
"""A tool call an assistant turn asked for: (call id, tool name)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a model's input."""

    role: str | None
    text: str | None = None
    calls: tuple[Call, ...] = ()
    """Tools this (assistant) turn asked for."""
    call_id: str | None = None
    """A tool result: the call it answers."""
    name: str | None = None
    """A tool result: the tool, where the message names it."""
    result: object = None
    """A tool result: the raw result as written."""

    @property
    def is_tool_result(self) -> bool:
        """The turn hands a tool's result back to the model."""
        return self.role in _TOOL_ROLES


def input_turns(span: ReadableSpan, issues: Issues) -> list[Turn]:
    """The span's input messages as turns, in order (empty when it has none)."""
    attributes = attributes_of(span)
    turns = _openinference_turns(attributes)
    if turns:
        return turns
    raw = attributes.get(semconv.GEN_AI_INPUT_MESSAGES)
    if raw is None:
        for event in span.events:
            if event.name in _MESSAGE_EVENTS and event.attributes:
                raw = event.attributes.get(
                    semconv.GEN_AI_INPUT_MESSAGES, event.attributes.get(semconv.GEN_AI_PROMPT)
                )
                if raw is not None:
                    break
    if raw is not None:
        parsed = load_json(raw, semconv.GEN_AI_INPUT_MESSAGES, issues)
        if isinstance(parsed, list):
            return json_turns(parsed)
        return []
    turns = _prompt_turns(attributes)
    if turns:
        return turns
    body = attributes.get(semconv.OI_INPUT_VALUE)
    if isinstance(body, str) and body.lstrip().startswith("{") and '"messages"' in body:
        # The request body of an OpenAI call, when its flattened messages were left out.
        try:
            parsed_body: object = parse_json(body)
        except ValueError:
            return []
        if isinstance(parsed_body, Mapping) and isinstance(parsed_body.get("messages"), list):
            return json_turns(parsed_body["messages"])
    return []


def json_turns(messages: Sequence[object]) -> list[Turn]:
    """Turns of a JSON message list: GenAI parts or OpenAI/LangChain message objects."""
    turns: list[Turn] = []
    for message in messages[-MAX_TURNS:]:
        if not isinstance(message, Mapping):
            continue
        role = role_of(message)
        parts = message.get("parts")
        if isinstance(parts, list):
            turns.extend(_parts_turns(role, parts))
            continue
        calls = _openai_calls(message.get("tool_calls"))
        if role in _TOOL_ROLES:
            content = message.get("content")
            turns.append(
                Turn(
                    role,
                    call_id=as_id(message.get("tool_call_id")) or as_id(message.get("id")),
                    name=text(message.get("name")),
                    result=content,
                )
            )
            continue
        turns.append(Turn(role, message_text(message), calls))
    return turns


def _parts_turns(role: str | None, parts: list[object]) -> list[Turn]:
    """One GenAI message: its text and calls as one turn, each tool response as its own."""
    texts: list[str] = []
    calls: list[Call] = []
    results: list[Turn] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type", "text")
        if kind == "text":
            value = part.get("content", part.get("text"))
            if isinstance(value, str):
                texts.append(value)
        elif kind == semconv.GEN_AI_PART_TOOL_CALL:
            calls.append((as_id(part.get("id")), text(part.get("name"))))
        elif kind == semconv.GEN_AI_PART_TOOL_CALL_RESPONSE:
            results.append(
                Turn(
                    "tool",
                    call_id=as_id(part.get("id")),
                    name=text(part.get("name")),
                    result=part.get("response", part.get("result")),
                )
            )
    if results:
        return results
    if role in _TOOL_ROLES:
        # A tool's result written as plain text parts.
        return [Turn(role, result="".join(texts))]
    return [Turn(role, text("".join(texts)), tuple(calls))]


def _openai_calls(value: object) -> tuple[Call, ...]:
    if not isinstance(value, list):
        return ()
    calls: list[Call] = []
    for call in value:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        name = function.get("name") if isinstance(function, Mapping) else call.get("name")
        calls.append((as_id(call.get("id")), text(name)))
    return tuple(calls)


def _openinference_turns(attributes: Attributes) -> list[Turn]:
    turns: list[Turn] = []
    groups = indexed(attributes, _OI_INPUT)
    for fields in list(groups.values())[-MAX_TURNS:]:
        role = fields.get(semconv.OI_MESSAGE_ROLE)
        role = role.lower() if isinstance(role, str) else None
        content = fields.get(semconv.OI_MESSAGE_CONTENT)
        if role in _TOOL_ROLES:
            turns.append(
                Turn(
                    role,
                    call_id=as_id(fields.get(semconv.OI_MESSAGE_TOOL_CALL_ID)),
                    name=text(fields.get(semconv.OI_MESSAGE_NAME)),
                    result=content if content is not None else _contents_text(fields),
                )
            )
            continue
        body = text(content) if content is not None else _contents_text(fields)
        turns.append(Turn(role, body, _flattened_calls(fields, _OI_CALLS, oi=True)))
    return turns


def _contents_text(fields: Mapping[str, object]) -> str | None:
    prefix = f"{semconv.OI_MESSAGE_CONTENTS}."
    parts: dict[int, str] = {}
    for key, value in fields.items():
        if key.startswith(prefix) and key.endswith(semconv.OI_MESSAGE_CONTENT_TEXT):
            index = list_index(key[len(prefix) :].partition(".")[0])
            if index is not None and isinstance(value, str):
                parts[index] = value
    return text("".join(parts[i] for i in sorted(parts)))


def _flattened_calls(fields: Mapping[str, object], prefix: str, *, oi: bool) -> tuple[Call, ...]:
    calls: dict[int, dict[str, object]] = {}
    for key, value in fields.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix) :].partition(".")
        position = list_index(index)
        if position is not None and rest:
            calls.setdefault(position, {})[rest] = value
    id_key = semconv.OI_TOOL_CALL_ID_KEY if oi else "id"
    name_key = semconv.OI_TOOL_CALL_FUNCTION_NAME if oi else "name"
    return tuple((as_id(calls[i].get(id_key)), text(calls[i].get(name_key))) for i in sorted(calls))


def _prompt_turns(attributes: Attributes) -> list[Turn]:
    """OpenLLMetry's ``gen_ai.prompt.N.*``."""
    turns: list[Turn] = []
    groups = indexed(attributes, _PROMPT)
    for fields in list(groups.values())[-MAX_TURNS:]:
        role = fields.get("role")
        role = role.lower() if isinstance(role, str) else "user"
        content = fields.get("content")
        if role in _TOOL_ROLES:
            turns.append(
                Turn(
                    role,
                    call_id=as_id(fields.get("tool_call_id")),
                    name=text(fields.get("name")),
                    result=content,
                )
            )
            continue
        if isinstance(content, str) and content.startswith("[{"):
            try:
                parsed: object = parse_json(content)
            except ValueError:
                parsed = content
            body = message_text({"content": parsed})
        else:
            body = text(content)
        turns.append(Turn(role, body, _flattened_calls(fields, "tool_calls.", oi=False)))
    return turns


def asks_for_tools(span: ReadableSpan, issues: Issues) -> bool:
    """Whether the span's output calls tools: an agent's step, not its answer."""
    attributes = attributes_of(span)
    reasons = attributes.get(semconv.GEN_AI_RESPONSE_FINISH_REASONS)
    if (
        isinstance(reasons, Sequence)
        and not isinstance(reasons, str)
        and any(isinstance(r, str) and r in _TOOL_FINISH for r in reasons)
    ):
        return True
    for key in attributes:
        if key.startswith(_OI_OUTPUT) and f".{semconv.OI_MESSAGE_TOOL_CALLS}." in key:
            return True
        if key.startswith(_COMPLETION):
            if ".tool_calls." in key:
                return True
            reason = attributes[key] if key.endswith(".finish_reason") else None
            if isinstance(reason, str) and reason in _TOOL_FINISH:
                return True
    raw = _output_messages(span, attributes)
    if isinstance(raw, str):
        parsed = load_json(raw, semconv.GEN_AI_OUTPUT_MESSAGES, issues)
        if isinstance(parsed, list) and parsed:
            first = parsed[0]
            if isinstance(first, Mapping) and _message_calls(first):
                return True
    body = attributes.get(semconv.OI_OUTPUT_VALUE)
    if isinstance(body, str) and '"tool_calls"' in body and body.lstrip().startswith("{"):
        try:
            parsed_body: object = parse_json(body)
        except ValueError:
            return False
        choices = parsed_body.get("choices") if isinstance(parsed_body, Mapping) else None
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            message = choices[0].get("message")
            return isinstance(message, Mapping) and bool(_message_calls(message))
    return False


def _output_messages(span: ReadableSpan, attributes: Mapping[str, object]) -> object:
    """``gen_ai.output.messages`` as the span has it, else as its operation details event
    carries it (the GenAI instrumentation's ``span_and_event`` mode)."""
    raw = attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES)
    if raw is None:
        for event in events_of(span):
            if event.name == semconv.GEN_AI_OPERATION_DETAILS_EVENT and event.attributes:
                raw = event.attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES)
                if raw is not None:
                    break
    return raw


def output_call_ids(span: ReadableSpan, issues: Issues) -> frozenset[str]:
    """The ids of the tool calls the span's output makes: calls the model itself asked for,
    which a client's own history cannot add."""
    attributes = attributes_of(span)
    found: set[str] = set()
    for key, value in attributes.items():
        oi_call = key.startswith(_OI_OUTPUT) and key.endswith(_OI_CALL_ID)
        if oi_call or (
            key.startswith(_COMPLETION) and ".tool_calls." in key and key.endswith(".id")
        ):
            found.add(as_id(value) or "")
    raw = _output_messages(span, attributes)
    messages: object = load_json(raw, semconv.GEN_AI_OUTPUT_MESSAGES, issues) if raw else None
    body = attributes.get(semconv.OI_OUTPUT_VALUE)
    if messages is None and isinstance(body, str) and '"tool_calls"' in body:
        try:
            parsed: object = parse_json(body)
        except ValueError:
            parsed = None
        choices = parsed.get("choices") if isinstance(parsed, Mapping) else None
        if isinstance(choices, list):
            messages = [c.get("message") for c in choices if isinstance(c, Mapping)]
    if isinstance(messages, list):
        for message in messages:
            if not isinstance(message, Mapping):
                continue
            parts = message.get("parts")
            if isinstance(parts, list):
                found.update(
                    as_id(part.get("id")) or ""
                    for part in parts
                    if isinstance(part, Mapping)
                    and part.get("type") == semconv.GEN_AI_PART_TOOL_CALL
                )
            found.update(call_id or "" for call_id, _ in _openai_calls(message.get("tool_calls")))
    found.discard("")
    return frozenset(found)


def _message_calls(message: Mapping[str, object]) -> bool:
    parts = message.get("parts")
    if isinstance(parts, list):
        return any(
            isinstance(part, Mapping) and part.get("type") == semconv.GEN_AI_PART_TOOL_CALL
            for part in parts
        )
    return bool(_openai_calls(message.get("tool_calls")))


def offers_tools(attributes: Attributes) -> bool:
    """Whether the request offered the model tools (an agent's call, tools or not used)."""
    if semconv.GEN_AI_TOOL_DEFINITIONS in attributes:
        return True
    return any(key.startswith((_OI_TOOLS, _FUNCTIONS)) for key in attributes)
