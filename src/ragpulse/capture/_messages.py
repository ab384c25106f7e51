"""The chat messages a ``@generation`` was given, read once with their whole structure.

An agent's conversation is more than who said what: the assistant's turns ask for tools
(each call with its id, its tool's name and its arguments), and the ``tool`` turns hand
their results back, each naming the call it answers. ``read_messages`` keeps all of it, from
OpenAI-style dicts or objects (``role``, ``content``, ``tool_calls``, ``tool_call_id``,
``name``) and LangChain messages (``type``, ``tool_calls`` with ``args``), in bounded size.
The content policy writes them as GenAI parts (``tool_call``, ``tool_call_response``) or
OpenInference's flattened messages; ``as_turns`` gives them to the reading of a conversation
that trace adapters use, so a decorated agent's history is evidence exactly as an
instrumented one's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse.adapters._messages import Turn
from ragpulse.capture._text import UnreadableError, to_json, to_text

__all__ = [
    "MAX_MESSAGES",
    "ChatMessage",
    "ToolCall",
    "as_turns",
    "read_messages",
    "response_facts",
]

MAX_MESSAGES = 256
"""Messages read of one input, the most recent kept."""
_MAX_CALLS = 64
"""Tool calls read of one assistant message."""
_MAX_ARGUMENTS_CHARS = 64 * 1024
_MAX_ID = 256
# LangChain names a message's role by its type.
_TYPE_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call an assistant message asked for."""

    id: str | None
    name: str | None
    arguments: str | None
    """The arguments as JSON text, as the model wrote them."""


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a model's input (or output), its structure kept."""

    role: str
    text: str
    """Its text (a tool message: the tool's result)."""
    calls: tuple[ToolCall, ...] = ()
    call_id: str | None = None
    """A tool message: the call it answers."""
    name: str | None = None
    """A tool message: the tool, where the message names it."""


def read_messages(messages: Any) -> list[ChatMessage] | None:
    """``messages`` (a list of dicts or message objects, or one text: a user turn) as
    ``ChatMessage`` objects, the last ``MAX_MESSAGES``; ``None`` when it is not a list of
    messages. A message that cannot be read is a marker in its place."""
    if isinstance(messages, (str, bytes)):
        return [ChatMessage("user", to_text(messages) or "")]
    if not isinstance(messages, (list, tuple)):
        return None
    read: list[ChatMessage] = []
    for message in messages[-MAX_MESSAGES:]:
        try:
            read.append(_message(message))
        except UnreadableError as exc:
            read.append(ChatMessage("user", f"[unreadable {exc.kind}: {exc.error}]"))
        except Exception as exc:
            read.append(ChatMessage("user", f"[unreadable message: {type(exc).__name__}]"))
    return read


def _field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _message(message: Any) -> ChatMessage:
    role = _field(message, "role")
    if not isinstance(role, str):
        kind = _field(message, "type")
        role = _TYPE_ROLES.get(kind, "user") if isinstance(kind, str) else "user"
    text = to_text(_field(message, "content")) or ""
    calls = _calls(_field(message, "tool_calls"))
    call_id = _identifier(_field(message, "tool_call_id"))
    name = _field(message, "name")
    return ChatMessage(role, text, calls, call_id, name if isinstance(name, str) else None)


def _calls(value: Any) -> tuple[ToolCall, ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    calls: list[ToolCall] = []
    for call in value[:_MAX_CALLS]:
        function = _field(call, "function")
        holder = function if function is not None else call
        name = _field(holder, "name")
        arguments = _field(holder, "arguments")
        if arguments is None:
            arguments = _field(call, "args")  # LangChain's tool calls
        if arguments is not None and not isinstance(arguments, str):
            arguments = to_json(arguments, _MAX_ARGUMENTS_CHARS)
        calls.append(
            ToolCall(
                _identifier(_field(call, "id")),
                name if isinstance(name, str) else None,
                arguments[:_MAX_ARGUMENTS_CHARS] if arguments is not None else None,
            )
        )
    return tuple(calls)


def _identifier(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return value[:_MAX_ID] if isinstance(value, str) and value else None


def as_turns(messages: Sequence[ChatMessage]) -> list[Turn]:
    """The messages as the turns a trace adapter reads from an LLM span's input."""
    return [
        Turn(message.role, call_id=message.call_id, name=message.name, result=message.text)
        if Turn(message.role).is_tool_result
        else Turn(message.role, message.text or None, tuple((c.id, c.name) for c in message.calls))
        for message in messages
    ]


def response_facts(result: Any) -> tuple[str | None, list[str]]:
    """An OpenAI-style response's id and its choices' finish reasons (a ``ChatCompletion``,
    or a dict of one); ``(None, [])`` for anything else, a text answer."""
    choices = _field(result, "choices")
    if not isinstance(choices, (list, tuple)) or not choices:
        return None, []
    reasons = [
        reason
        for choice in choices[:_MAX_CALLS]
        if isinstance(reason := _field(choice, "finish_reason"), str) and reason
    ]
    return _identifier(_field(result, "id")), reasons
