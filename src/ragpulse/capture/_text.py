"""Turning whatever an application hands over into text and ``Context`` objects.

A value that crosses into ragpulse from user code (a retrieved item, an answer)
is read once, in bounded time and size, and never changed. Every walk over a
structure shares one budget of nodes and characters, stops at a fixed depth,
and marks a container met again on its own path as a cycle, so a dict that
refers to itself twice costs as much as a dict of two keys.

User objects can fail in any way while being read (a ``__repr__`` that raises,
a property that raises a ``BaseException`` subclass): such a value is
*unreadable*, reported as ``UnreadableError`` (or an ``Unreadable`` marker in a
list of contexts), never as the user's exception. ``KeyboardInterrupt`` and
``SystemExit`` are the exception: they ask the whole program to stop, so they
propagate (callers still end their spans on the way out).
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ragpulse.capture._json import dumps_ascii
from ragpulse.evaluation.types import Context

_logger = logging.getLogger("ragpulse.capture")

ToText = Callable[[Any], str]

PROPAGATE: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit)
"""Exceptions raised while reading a user value that ragpulse lets through."""

MAX_DEPTH = 32
"""Containers nested deeper than this are written as a marker."""
MAX_NODES = 10_000
"""Values visited in one structure before the rest is cut."""
MAX_STRUCTURE_CHARS = 1 << 20
"""Characters of text one structure (a list answer, a dict without a text key) may make."""
MAX_RECORD_CHARS = 1 << 20
"""Characters of context text one request reads for evaluation (the content policy sets it)."""
CONTEXT_CHARGE = 16
"""Characters of that budget one context takes beyond its text: even an empty passage leaves
as a document (``{"content": ""}``) and is held as a context, so a retriever's 100,000 empty
items are read no further than the budget."""
MAX_REPR_CHARS = 4096
"""Characters kept of the ``repr()`` of an object ragpulse cannot otherwise read."""

CYCLE_MARKER = "[cycle]"
DEPTH_MARKER = "[too deep]"
CUT_MARKER = "…[cut]"

_TEXT_KEYS = ("content", "text", "page_content", "document", "answer", "output")
_ID_KEYS = ("id", "doc_id", "document_id", "node_id", "id_")
_SCORE_KEYS = ("score", "similarity", "relevance_score", "distance")
_MAX_INT_BITS = 4096  # str() of a larger int is slow, and refused past 4300 digits
_STR = {str}

_warned_types: set[type] = set()
_warned_lock = threading.Lock()


class UnreadableError(Exception):
    """A user value could not be read; ``kind`` and ``error`` name the object and the failure."""

    def __init__(self, kind: str, error: str) -> None:
        super().__init__(f"cannot read {kind} ({error})")
        self.kind = kind
        self.error = error


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A retrieved item ragpulse could not read, kept in place of its ``Context``."""

    kind: str
    """The item's type name."""
    error: str
    """The exception type its reading raised."""


def unreadable_warning(count: int, first: Unreadable) -> str:
    """The warning a span carries for ``count`` unreadable retrieved items."""
    return f"{count} retrieved item(s) unreadable ({first.kind}: {first.error})"


def _type_name(value: Any) -> str:
    try:
        return str(type(value).__name__)
    except BaseException:  # a metaclass can do anything
        return "object"


def _unreadable(value: Any, exc: BaseException) -> UnreadableError:
    """Wrap what reading ``value`` raised; ``KeyboardInterrupt``/``SystemExit`` go through."""
    if isinstance(exc, PROPAGATE):
        raise exc
    return UnreadableError(_type_name(value), type(exc).__name__)


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


def to_text(value: Any, max_chars: int | None = None) -> str | None:
    """Text of a question or answer; ``None`` stays ``None``. ``max_chars``: a text is read
    no further than this (what can leave); a longer one comes back cut to it.

    Raises ``UnreadableError`` when the value cannot be read at all.
    """
    if value is None:
        return None
    if type(value) is str:
        if max_chars is not None and len(value) > max_chars:
            value = value[:max_chars]
        return value if value.isascii() else clean_text(value)
    try:
        return _Walk().text(value, 0)
    except UnreadableError:
        raise
    except BaseException as exc:
        raise _unreadable(value, exc) from None


def to_json(value: Any, max_chars: int = MAX_STRUCTURE_CHARS) -> str:
    """``value`` as JSON text, read as any captured value is: bounded by nodes, characters
    and depth, cycles marked, an object without a JSON form as its ``repr()`` (a failing
    one as a marker in its place), bytes decoded as UTF-8. ``max_chars`` bounds the text
    read (and the values visited, which each take at least two characters of JSON): what
    is only going to be cut is not read.

    Raises ``UnreadableError`` only when the value itself cannot be read at all.
    """
    if _flat_and_plain(value, max_chars):
        # The usual small mapping (a tool call's arguments): its JSON straight, exactly as
        # the walk below would write it when it fits (ASCII only: either encoder's text;
        # each item takes over two characters, so the walk's node budget is never the bound).
        text = dumps_ascii(value)
        if len(text) <= max_chars and len(text) <= MAX_STRUCTURE_CHARS:
            return text
    chars = max(0, min(max_chars, MAX_STRUCTURE_CHARS))
    nodes = min(MAX_NODES, chars // 2 + 1)
    try:
        return _dumps(_Walk(nodes, chars).plain(value, 0))
    except UnreadableError:
        raise
    except BaseException as exc:
        raise _unreadable(value, exc) from None


def _flat_and_plain(value: Any, max_chars: int) -> bool:
    """Whether ``value`` is a dict of ASCII texts and plain numbers, ``True``, ``False`` or
    ``None`` by ASCII names, whose JSON fits in ``max_chars``: nothing in it for the walk to
    clean, mark or cut. Read no further than that: a longer one is the walk's to cut."""
    if type(value) is not dict:
        return False
    # Each item takes its key, its value and at least six characters of JSON around them.
    room = max_chars
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return False
        room -= len(key) + _ITEM_FRAME
        kind = type(item)
        if kind is str:
            room -= len(item)
            if room < 0 or not item.isascii():
                return False
        elif kind is int:
            if item.bit_length() > _MAX_INT_BITS:
                return False
        elif kind is not float and kind is not bool and item is not None:
            return False
        if room < 0:
            return False
    return True


_ITEM_FRAME = 6
"""Characters of JSON around one item of a mapping at least: quotes, colon, comma, spaces."""


def chunk_text(chunk: Any) -> str:
    """Text of one streamed chunk (str, bytes, OpenAI chunk, dict); ``""`` when none.

    Raises ``UnreadableError`` when the chunk cannot be read.
    """
    if type(chunk) is str:
        return chunk
    return to_text(chunk) or ""


class _Walk:
    """One bounded walk over a user value: shared node and character budgets, cycle marks."""

    __slots__ = ("chars", "nodes", "path")

    def __init__(self, nodes: int = MAX_NODES, chars: int = MAX_STRUCTURE_CHARS) -> None:
        self.nodes = nodes
        self.chars = chars
        # Containers on the current path (by id): one met again is a cycle.
        self.path: set[int] = set()

    def _leaf(self, text: str) -> str:
        if len(text) > self.chars:
            text = text[: max(self.chars, 0)] + CUT_MARKER
        self.chars -= len(text)
        return text

    def text(self, value: Any, depth: int) -> str:
        """The text a person would call this value."""
        self.nodes -= 1
        if self.nodes < 0 or self.chars <= 0:
            return CUT_MARKER
        if isinstance(value, str):
            return self._leaf(clean_text(value[: self.chars + 1]))
        if isinstance(value, (bytes, bytearray, memoryview)):
            return self._leaf(bytes(value[: self.chars * 4]).decode("utf-8", "replace"))
        if isinstance(value, (bool, float)):
            return str(value)
        if isinstance(value, int):
            return _int_text(value)
        if depth >= MAX_DEPTH:
            return DEPTH_MARKER
        if isinstance(value, Mapping):
            for key in _TEXT_KEYS:
                inner = value.get(key)
                if isinstance(inner, (str, bytes)):
                    return self.text(inner, depth + 1)
            return self._leaf(_dumps(self.plain(value, depth)))
        message_text = _openai_message_text(value)
        if message_text is not None:
            return self._leaf(message_text)
        for attr in ("page_content", "text", "content"):
            inner = getattr(value, attr, None)
            if isinstance(inner, (str, bytes)):
                return self.text(inner, depth + 1)
        if isinstance(value, (list, tuple)):
            marker = id(value)
            if marker in self.path:
                return CYCLE_MARKER
            self.path.add(marker)
            parts: list[str] = []
            try:
                for item in value:
                    if self.nodes <= 0 or self.chars <= 0:
                        parts.append(CUT_MARKER)
                        break
                    part = self._guarded(self.text, item, depth + 1)
                    if part:
                        parts.append(part)
            finally:
                self.path.discard(marker)
            return "\n".join(parts)
        _warn_once(type(value), "no text, content or page_content")
        return self._leaf(_repr(value))

    def plain(self, value: Any, depth: int) -> Any:
        """``value`` as plain JSON data (dict, list, str, number), cut to the budget."""
        self.nodes -= 1
        if self.nodes < 0 or self.chars <= 0:
            return CUT_MARKER
        if value is None or isinstance(value, (bool, float)):
            return value
        if isinstance(value, int):
            return value if value.bit_length() <= _MAX_INT_BITS else _int_text(value)
        if isinstance(value, str):
            return self._leaf(clean_text(value[: self.chars + 1]))
        if isinstance(value, (bytes, bytearray)):
            return self._leaf(bytes(value[: self.chars * 4]).decode("utf-8", "replace"))
        is_mapping = isinstance(value, Mapping)
        if not is_mapping and not isinstance(value, (list, tuple, set, frozenset)):
            return self._leaf(_repr(value))
        if depth >= MAX_DEPTH:
            return DEPTH_MARKER
        marker = id(value)
        if marker in self.path:
            return CYCLE_MARKER
        self.path.add(marker)
        result: Any
        try:
            if is_mapping:
                result = {}
                for key, item in value.items():
                    if self.nodes <= 0 or self.chars <= 0:
                        result[CUT_MARKER] = CUT_MARKER
                        break
                    name = self._leaf(
                        clean_text(key[: self.chars + 1])
                        if isinstance(key, str)
                        else self._guarded(_repr_leaf, key, 0)
                    )
                    result[name] = self._guarded(self.plain, item, depth + 1)
            else:
                result = []
                for item in value:
                    if self.nodes <= 0 or self.chars <= 0:
                        result.append(CUT_MARKER)
                        break
                    result.append(self._guarded(self.plain, item, depth + 1))
        finally:
            self.path.discard(marker)
        return result

    @staticmethod
    def _guarded(read: Callable[[Any, int], Any], value: Any, depth: int) -> Any:
        """``read(value, depth)``; a part that cannot be read becomes a marker in its place."""
        try:
            return read(value, depth)
        except BaseException as exc:
            if isinstance(exc, PROPAGATE):
                raise
            return f"[unreadable {_type_name(value)}: {type(exc).__name__}]"


def _dumps(data: Any) -> str:
    # ``data`` is plain JSON data of bounded size and depth: this cannot recurse far.
    return json.dumps(data, ensure_ascii=False)


def _int_text(value: int) -> str:
    if value.bit_length() > _MAX_INT_BITS:
        return f"<int of {value.bit_length()} bits>"
    return str(value)


def _repr_leaf(value: Any, depth: int) -> str:
    return _repr(value)


def _repr(value: Any) -> str:
    """``repr(value)``, capped; a failing ``__repr__`` makes the value unreadable."""
    try:
        text = repr(value)
    except BaseException as exc:
        raise _unreadable(value, exc) from None
    if not isinstance(text, str):  # a C extension can return anything
        raise UnreadableError(_type_name(value), "TypeError")
    if len(text) > MAX_REPR_CHARS:
        text = text[:MAX_REPR_CHARS] + CUT_MARKER
    return clean_text(text)


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


def _first(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            return value
    return None


def _as_id(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_text(value)
    return _Walk().text(value, MAX_DEPTH - 1)[:256]


def _as_score(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def to_context(item: Any, to_text_fn: ToText | None = None) -> Context:
    """One retrieved item as a ``Context``: text plus id and score where present.

    Understands ``str``, ``dict`` (``content``/``text``/``page_content``),
    LangChain ``Document`` (``page_content``, ``metadata``), LlamaIndex nodes and
    ``NodeWithScore`` (``node``, ``score``, ``get_content()``), objects with
    ``text``, and ``(item, score)`` pairs as vector stores return them.
    Raises ``UnreadableError`` when the item cannot be read.
    """
    if type(item) is str:
        return Context(item if item.isascii() else clean_text(item))
    try:
        return _to_context(item, to_text_fn, 0)
    except UnreadableError:
        raise
    except BaseException as exc:
        raise _unreadable(item, exc) from None


def _to_context(item: Any, to_text_fn: ToText | None, depth: int) -> Context:
    if to_text_fn is not None:
        return Context(text=to_text(to_text_fn(item)) or "", id=_id_of(item))
    if isinstance(item, str):
        return Context(text=clean_text(item))
    if isinstance(item, (bytes, bytearray)):
        return Context(text=bytes(item).decode("utf-8", "replace"))
    if depth >= 2:  # (item, score) of an (item, score) pair, or a node of a node: read as text
        return Context(text=to_text(item) or "")
    if isinstance(item, tuple) and len(item) == 2 and _as_score(item[1]) is not None:
        inner = _to_context(item[0], None, depth + 1)
        return Context(text=inner.text, id=inner.id, score=_as_score(item[1]))
    if isinstance(item, Mapping):
        text = _first(item, _TEXT_KEYS)
        raw_metadata = item.get("metadata")
        metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
        ident = _first(item, _ID_KEYS) or _first(metadata, _ID_KEYS)
        score = _first(item, _SCORE_KEYS)
        return Context(
            text=to_text(text) or "" if text is not None else _Walk().text(item, 0),
            id=_as_id(ident),
            score=_as_score(score),
        )
    node = getattr(item, "node", None)
    if node is not None:  # LlamaIndex NodeWithScore
        inner = _to_context(node, None, depth + 1)
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
    if isinstance(item, (list, tuple)):
        return Context(text=to_text(item) or "")
    _warn_once(type(item), "no text, page_content or get_content()")
    return Context(text=_repr(item))


def _id_of(item: Any) -> str | None:
    for attr in ("id", "id_", "node_id", "doc_id"):
        value = getattr(item, attr, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return _as_id(value)
    if isinstance(item, Mapping):
        return _as_id(_first(item, _ID_KEYS))
    return None


def read_context(item: Any, to_text_fn: ToText | None = None) -> Context | Unreadable:
    """``to_context``, with an unreadable item returned as an ``Unreadable`` marker."""
    if type(item) is str:
        return Context(item if item.isascii() else clean_text(item))
    try:
        return to_context(item, to_text_fn)
    except UnreadableError as exc:
        return Unreadable(exc.kind, exc.error)


Read = Context | Unreadable | str
"""One retrieved item as read. A plain ``str`` passage (already clean) stays a
``str`` until a record is built: most requests are never evaluated, and making
a ``Context`` per passage is the largest part of what capture would cost them."""


def as_context(item: Context | str) -> Context:
    """The ``Context`` of an item read as a plain passage or as a ``Context``."""
    return Context(item) if isinstance(item, str) else item


@dataclass(slots=True)
class ContextsRead:
    """A retriever's result as read: contexts in order, unreadable items marked in place.

    Reading stops once the contexts hold ``budget`` characters: the items past
    it are counted in ``omitted``, not read.
    """

    items: list[Read]
    budget: int = MAX_RECORD_CHARS
    """Characters of context text still to read."""
    unreadable: int = 0
    """How many of ``items`` are ``Unreadable``."""
    omitted: int = 0
    """Items not read because the budget was spent."""
    chars: int = 0
    """Characters of context text read."""
    plain: bool = False
    """Every item is an ASCII ``str`` (no id, score, or unreadable item)."""
    charged: int = 0
    """Characters of the record's budget the items read took: each its text and
    ``CONTEXT_CHARGE``."""

    def readable(self) -> list[Context | str]:
        """The readable items, plain passages still as ``str``."""
        if not self.unreadable:
            return self.items  # type: ignore[return-value]  # no Unreadable among them
        return [item for item in self.items if type(item) is not Unreadable]  # type: ignore[misc]

    def contexts(self) -> list[Context]:
        """The readable items as ``Context``."""
        return [as_context(item) for item in self.readable()]

    def first_unreadable(self) -> Unreadable | None:
        """The first item that could not be read, if any."""
        if not self.unreadable:
            return None
        return next(item for item in self.items if isinstance(item, Unreadable))

    def add(self, item: Any, to_text_fn: ToText | None = None) -> None:
        """Read one more item (or count it as omitted once the budget is spent)."""
        if self.budget < 0:
            self.omitted += 1
            return
        if type(item) is str and len(item) > self.budget + 1 and to_text_fn is None:
            item = item[: self.budget + 1]  # past the budget the request is not judged
        read = read_context(item, to_text_fn)
        self.items.append(read)
        if type(read) is Unreadable:
            self.unreadable += 1
            self.budget -= CONTEXT_CHARGE
            self.charged += CONTEXT_CHARGE
        else:
            size = len(read.text)  # type: ignore[union-attr]  # a Context here
            self.budget -= size + CONTEXT_CHARGE
            self.charged += size + CONTEXT_CHARGE
            self.chars += size


def read_contexts(
    items: Any, to_text_fn: ToText | None = None, budget: int = MAX_RECORD_CHARS
) -> ContextsRead:
    """A retriever's result as contexts in order; a single item becomes a list of one.

    Iterates ``items`` once; the caller must not pass a one-shot iterator it
    still needs (``is_one_shot`` says which). An item that cannot be read is an
    ``Unreadable`` in its place; an iterable that fails part-way keeps what was
    read and ends with an ``Unreadable``. Items past ``budget`` characters are
    counted, not read. Linear in what is read, with a fast path for a list of
    ``str``.
    """
    sequence = type(items) is list or type(items) is tuple
    plain = _ascii_texts(items) if sequence and to_text_fn is None and items else None
    if plain is not None:
        # The usual retrieval, passages as str, read at C speed: no Context is
        # made until a record is built, and none past the budget.
        charged = sum(map(len, items)) + CONTEXT_CHARGE * len(items)
        kept = list(items)
        if charged > budget:
            # Each item takes CONTEXT_CHARGE at least: the budget ends among the first few.
            head = items[: budget // CONTEXT_CHARGE + 1]
            texts = list(itertools.accumulate(map(len, head)))
            keep = 1 + bisect.bisect_right(  # the item crossing the budget is read
                range(len(texts)), budget, key=lambda i: texts[i] + CONTEXT_CHARGE * (i + 1)
            )
            kept = kept[:keep]
            charged = texts[len(kept) - 1] + CONTEXT_CHARGE * len(kept) if kept else 0
            if kept:
                # ... no further than the budget: past it the request is not judged.
                kept[-1] = kept[-1][: budget + 1]
        if not plain:
            kept = list(map(clean_text, kept))
        chars = sum(map(len, kept))
        # Fields in order (items, budget, unreadable, omitted, chars, plain, charged).
        return ContextsRead(
            kept, budget - charged, 0, len(items) - len(kept), chars, plain, charged
        )
    read = ContextsRead([], budget)
    if items is None:
        return read
    if not sequence and (isinstance(items, (str, bytes, Mapping)) or not _is_iterable(items)):
        read.add(items, to_text_fn)
        return read
    try:
        for item in items:
            read.add(item, to_text_fn)
    except BaseException as exc:
        if isinstance(exc, PROPAGATE):
            raise
        read.items.append(Unreadable(_type_name(items), type(exc).__name__))
        read.unreadable += 1
    return read


def _ascii_texts(items: list[Any] | tuple[Any, ...]) -> bool | None:
    """Whether ``items`` are all ASCII text (``True``), all ``str`` but not all ASCII
    (``False``), or not all text (``None``).

    ``str.isascii`` refuses anything but a ``str``: the usual passages take one
    pass at C speed, and nothing of the items' own is called.
    """
    try:
        if all(map(str.isascii, items)):
            return True
    except TypeError:
        return None
    return False if set(map(type, items)) == _STR else None


def _is_iterable(value: Any) -> bool:
    try:
        iter_method = getattr(type(value), "__iter__", None)
    except BaseException:
        return False
    return iter_method is not None


def is_one_shot(value: Any) -> bool:
    """Whether iterating ``value`` would use it up (an iterator or generator, sync or async)."""
    return isinstance(value, (Iterator, AsyncIterator))
