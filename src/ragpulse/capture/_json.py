"""JSON text of the attribute values capture builds, with encoders made once.

``json.dumps`` makes a new encoder on every call (the C one included), which
costs more than encoding a handful of passages. Capture encodes only data it
built itself (lists and dicts of text and numbers, never cyclic), so it keeps
one C encoder per form, without the cycle check, and writes exactly what
``json.dumps`` writes. Where the C encoder is missing, ``json.dumps`` is used.

The two shapes every request writes, a list of passages and a list of chat
messages, are written from their texts directly: the same JSON, without
building the dicts that only the encoder would read.
"""

from __future__ import annotations

import functools
import json
import json.encoder
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ragpulse import semconv

Dumps = Callable[[Any], str]

TOOL_ROLE = "tool"
TOOL_CALL = semconv.GEN_AI_PART_TOOL_CALL
TOOL_CALL_RESPONSE = semconv.GEN_AI_PART_TOOL_CALL_RESPONSE

_quote: Callable[[str], str] = json.encoder.encode_basestring
"""A JSON string literal of a text, non-ASCII kept (``ensure_ascii=False``)."""


def _not_serializable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encoder(ensure_ascii: bool) -> Dumps:
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return functools.partial(json.dumps, ensure_ascii=ensure_ascii)
    escape = (
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    )
    # The arguments JSONEncoder.iterencode passes for json.dumps' defaults, less
    # the cycle markers (None: the data is capture's own, acyclic).
    encode = make(None, _not_serializable, escape, None, ": ", ", ", False, False, True)
    join = "".join

    def dumps(data: Any) -> str:
        return join(encode(data, 0))

    return dumps


dumps_ascii: Dumps = _encoder(ensure_ascii=True)
"""``json.dumps(data)``: non-ASCII text escaped."""
dumps_unicode: Dumps = _encoder(ensure_ascii=False)
"""``json.dumps(data, ensure_ascii=False)``."""


def contents_json(texts: Sequence[str]) -> str:
    """``json.dumps([{"content": text} for text in texts], ensure_ascii=False)``."""
    if not texts:
        return "[]"
    return '[{"content": ' + '}, {"content": '.join(map(_quote, texts)) + "}]"


_PARTS = ', "parts": [{"type": "text", "content": '


class ToolCallLike(Protocol):
    """A tool call as ``messages_json`` reads it (``capture._messages.ToolCall``)."""

    @property
    def id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def arguments(self) -> str | None: ...


class MessageLike(Protocol):
    """A message as ``messages_json`` reads it (``capture._messages.ChatMessage``)."""

    @property
    def role(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def calls(self) -> Sequence[ToolCallLike]: ...
    @property
    def call_id(self) -> str | None: ...


def messages_json(messages: Sequence[MessageLike]) -> str:
    """GenAI chat messages, as ``json.dumps(..., ensure_ascii=False)``.

    Each is ``{"role": role, "parts": [...]}``: its text as a ``text`` part, each tool call
    it asks for as a ``tool_call`` part (``id``, ``name``, ``arguments``: an object where the
    arguments are JSON), a tool message's result as a ``tool_call_response`` part (``id``,
    ``response``). A message of text alone, the usual one, is written from its text.
    """
    pieces = []
    for message in messages:
        if not message.calls and message.call_id is None and message.role != TOOL_ROLE:
            text = _quote(message.text)
            pieces.append('{"role": ' + _quote(message.role) + _PARTS + text + "}]}")
        else:
            pieces.append(dumps_unicode({"role": message.role, "parts": _parts(message)}))
    return "[" + ", ".join(pieces) + "]"


def _parts(message: MessageLike) -> list[dict[str, Any]]:
    if message.role == TOOL_ROLE or message.call_id is not None:
        part: dict[str, Any] = {"type": TOOL_CALL_RESPONSE, "response": message.text}
        if message.call_id is not None:
            part = {"type": TOOL_CALL_RESPONSE, "id": message.call_id, "response": message.text}
        return [part]
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"type": "text", "content": message.text})
    for call in message.calls:
        request: dict[str, Any] = {"type": TOOL_CALL, "id": call.id, "name": call.name or ""}
        if call.arguments is not None:
            request["arguments"] = _arguments(call.arguments)
        parts.append(request)
    return parts


def _arguments(text: str) -> Any:
    """A tool call's arguments as the object its JSON is (the conventions' form), else the
    text as it was written."""
    try:
        return json.loads(text)
    except ValueError:
        return text
