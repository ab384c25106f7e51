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
from typing import Any

Dumps = Callable[[Any], str]

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


def messages_json(messages: Sequence[tuple[str, str]], finish_reason: str | None) -> str:
    """GenAI chat messages from ``(role, text)``, as ``json.dumps(..., ensure_ascii=False)``.

    Each is ``{"role": role, "parts": [{"type": "text", "content": text}]}``,
    with ``"finish_reason"`` last when one is given.
    """
    tail = "}]}" if finish_reason is None else '}], "finish_reason": ' + _quote(finish_reason) + "}"
    if len(messages) == 1:  # a generation's answer
        role, text = messages[0]
        return '[{"role": ' + _quote(role) + _PARTS + _quote(text) + tail + "]"
    return (
        "["
        + ", ".join(
            ['{"role": ' + _quote(role) + _PARTS + _quote(text) + tail for role, text in messages]
        )
        + "]"
    )
