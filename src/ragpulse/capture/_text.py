"""Turning whatever an application returns into text and ``Context`` objects.

Everything here is defensive: capture must never change what the user's
function does, so odd input becomes text (or ``None``) plus a warning, never an
exception.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ragpulse.evaluation.types import Context

_logger = logging.getLogger("ragpulse.capture")

ToText = Callable[[Any], str]

_TEXT_KEYS = ("content", "text", "page_content", "document", "answer", "output")
_ID_KEYS = ("id", "doc_id", "document_id", "node_id", "id_")
_SCORE_KEYS = ("score", "similarity", "relevance_score", "distance")
_MAX_JSON_DEPTH = 32

_warned_types: set[type] = set()
_warned_lock = threading.Lock()


def _warn_once(kind: type, what: str) -> None:
    # One warning per type for the process lifetime: a retriever returning an
    # unknown object type would otherwise log on every request.
    with _warned_lock:
        if kind in _warned_types:
            return
        _warned_types.add(kind)
    _logger.warning(
        "ragpulse: cannot read text from %s objects (%s); using repr(). "
        "Pass to_text= to the decorator to say how.",
        kind.__qualname__,
        what,
    )


def clean_text(value: str) -> str:
    """``value`` with lone surrogates replaced, so it encodes as UTF-8 for export."""
    if value.isascii():  # constant time in CPython: most texts never pay for the check below
        return value
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")


def to_text(value: Any) -> str | None:
    """Best-effort text of a question or answer; ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, (int, float, bool)):
        return str(value)
    if isinstance(value, Mapping):
        for key in _TEXT_KEYS:
            inner = value.get(key)
            if isinstance(inner, (str, bytes)):
                return to_text(inner)
        return _json_or_repr(value)
    message_text = _openai_message_text(value)
    if message_text is not None:
        return message_text
    for attr in ("page_content", "text", "content"):
        inner = getattr(value, attr, None)
        if isinstance(inner, (str, bytes)):
            return to_text(inner)
    if isinstance(value, (list, tuple)):
        parts = [to_text(item) for item in value]
        return "\n".join(p for p in parts if p)
    _warn_once(type(value), "no text, content or page_content")
    return clean_text(repr(value))


def _openai_message_text(value: Any) -> str | None:
    """Text of an OpenAI-style ``ChatCompletion`` (or its chunk) without importing openai."""
    choices = getattr(value, "choices", None)
    if not isinstance(choices, (list, tuple)) or not choices:
        return None
    first = choices[0]
    for holder in ("message", "delta"):
        message = getattr(first, holder, None)
        content = getattr(message, "content", None)
        if isinstance(content, str):
            return clean_text(content)
        if message is not None and content is None:
            return ""
    text = getattr(first, "text", None)
    return clean_text(text) if isinstance(text, str) else None


def chunk_text(chunk: Any) -> str:
    """Text of one streamed chunk (str, bytes, OpenAI chunk, dict); ``""`` when none."""
    if isinstance(chunk, str):
        return chunk
    text = to_text(chunk)
    return text or ""


def _json_or_repr(value: Any) -> str:
    try:
        return json.dumps(_bounded(value, 0), ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        return clean_text(repr(value))


def _bounded(value: Any, depth: int) -> Any:
    # Deeply nested or self-referencing dicts are cut at a fixed depth instead
    # of exhausting the interpreter's recursion limit.
    if depth >= _MAX_JSON_DEPTH:
        return "…"
    if isinstance(value, Mapping):
        return {str(k): _bounded(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_bounded(v, depth + 1) for v in value]
    return value


def _first(mapping: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        if key in mapping and mapping[key] is not None:
            return mapping[key]
    return None


def _as_id(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _as_score(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def to_context(item: Any, to_text_fn: ToText | None = None) -> Context:
    """One retrieved item as a ``Context``: text plus id and score where present.

    Understands ``str``, ``dict`` (``content``/``text``/``page_content``),
    LangChain ``Document`` (``page_content``, ``metadata``), LlamaIndex nodes and
    ``NodeWithScore`` (``node``, ``score``, ``get_content()``), objects with
    ``text``, and ``(item, score)`` pairs as vector stores return them.
    """
    if to_text_fn is not None:
        return Context(text=clean_text(str(to_text_fn(item))), id=_id_of(item), score=None)
    if isinstance(item, str):
        return Context(text=clean_text(item))
    if isinstance(item, (bytes, bytearray)):
        return Context(text=bytes(item).decode("utf-8", "replace"))
    if isinstance(item, tuple) and len(item) == 2 and _as_score(item[1]) is not None:
        inner = to_context(item[0])
        return Context(text=inner.text, id=inner.id, score=_as_score(item[1]))
    if isinstance(item, Mapping):
        text = _first(item, _TEXT_KEYS)
        raw_metadata = item.get("metadata")
        metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
        ident = _first(item, _ID_KEYS) or _first(metadata, _ID_KEYS)
        score = _first(item, _SCORE_KEYS)
        return Context(
            text=to_text(text) or "" if text is not None else _json_or_repr(item),
            id=_as_id(ident),
            score=_as_score(score),
        )
    node = getattr(item, "node", None)
    if node is not None:  # LlamaIndex NodeWithScore
        inner = to_context(node)
        return Context(text=inner.text, id=inner.id, score=_as_score(getattr(item, "score", None)))
    page_content = getattr(item, "page_content", None)
    if isinstance(page_content, str):  # LangChain Document
        metadata = getattr(item, "metadata", None) or {}
        ident = getattr(item, "id", None) or (
            _first(metadata, _ID_KEYS) if isinstance(metadata, Mapping) else None
        )
        score = metadata.get("score") if isinstance(metadata, Mapping) else None
        return Context(text=clean_text(page_content), id=_as_id(ident), score=_as_score(score))
    get_content = getattr(item, "get_content", None)
    if callable(get_content):  # LlamaIndex TextNode and friends
        try:
            text = get_content()
        except Exception:
            text = getattr(item, "text", None)
        return Context(text=to_text(text) or "", id=_id_of(item))
    text_attr = getattr(item, "text", None)
    if isinstance(text_attr, str):
        return Context(
            text=clean_text(text_attr),
            id=_id_of(item),
            score=_as_score(getattr(item, "score", None)),
        )
    _warn_once(type(item), "no text, page_content or get_content()")
    return Context(text=clean_text(repr(item)))


def _id_of(item: Any) -> str | None:
    for attr in ("id", "id_", "node_id", "doc_id"):
        value = getattr(item, attr, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    if isinstance(item, Mapping):
        return _as_id(_first(item, _ID_KEYS))
    return None


def to_contexts(items: Any, to_text_fn: ToText | None = None) -> list[Context]:
    """A retriever's result as a list of ``Context``; a single item becomes a list of one."""
    if items is None:
        return []
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        return [to_context(items, to_text_fn)]
    return [to_context(item, to_text_fn) for item in items]
