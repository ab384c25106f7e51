"""What of a request's text leaves the process: capture on/off, redaction, conventions, byte caps.

Every captured attribute is capped in UTF-8 bytes (``max_text_bytes`` per text,
``max_documents_bytes`` for a retrieval span's documents), and so is everything a
span captures together (``max_span_bytes``), counted by a ``SpanBytes`` that
lives as long as the span. A cut text ends with a marker saying how much went;
the span lists the attributes that were cut or left out in
``ragpulse.capture.truncated``.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from opentelemetry.util.types import AttributeValue

from ragpulse import semconv
from ragpulse.capture._json import (
    TOOL_ROLE,
    contents_json,
    dumps_ascii,
    dumps_unicode,
    messages_json,
)
from ragpulse.capture._text import MAX_RECORD_CHARS, PROPAGATE, ContextsRead, Read, Unreadable
from ragpulse.evaluation.types import Context

if TYPE_CHECKING:
    from ragpulse.capture._messages import ChatMessage

_logger = logging.getLogger("ragpulse.capture")

Redactor = Callable[[str], str]

GENAI = "genai"
"""Convention: OpenTelemetry GenAI attributes (``gen_ai.retrieval.documents`` JSON…)."""
OPENINFERENCE = "openinference"
"""Convention: OpenInference attributes (``retrieval.documents.N.document.*``, ``input.value``…)."""
CONVENTIONS: tuple[str, ...] = (GENAI, OPENINFERENCE)

DEFAULT_MAX_TEXT_BYTES = 8192
DEFAULT_MAX_DOCUMENTS_BYTES = 65536
DEFAULT_MAX_SPAN_BYTES = 1 << 20
DEFAULT_MAX_DOCUMENTS = 32
DEFAULT_MAX_RECORD_CHARS = MAX_RECORD_CHARS
DEFAULT_CONVENTIONS: tuple[str, ...] = (GENAI,)
TRUNCATION_MARKER = "…[truncated {n} bytes]"
TRUNCATION_MARKER_CHARS = "…[truncated {n} characters]"
"""The marker of a text too long to be read whole: what was cut, counted in characters."""
# The marker with any count fits in this.
_MARKER_ROOM = len(TRUNCATION_MARKER_CHARS.encode()) + 16
_READ_FACTOR = 4
"""A non-ASCII text up to this many times the byte limit in characters is encoded whole (so
the marker counts the bytes cut); a longer one is read no further than the limit."""
_DOC_OVERHEAD = 64  # JSON punctuation, keys, id and score of one document, generously


class SpanBytes:
    """The captured bytes one span may still take, and the attributes that were cut.

    Created when a span starts; every captured text of that span is charged to it.
    """

    __slots__ = ("omitted_documents", "remaining", "truncated")

    def __init__(self, limit: int) -> None:
        self.remaining = limit
        self.truncated: list[str] | None = None
        self.omitted_documents = 0

    def cut(self, key: str) -> None:
        """Note that ``key`` was cut or left out."""
        if self.truncated is None:
            self.truncated = [key]
        elif key not in self.truncated:
            self.truncated.append(key)

    def truncation_attributes(self) -> dict[str, AttributeValue] | None:
        """What the span should say about its own truncation (``None`` when nothing was cut)."""
        if self.truncated is None and not self.omitted_documents:
            return None
        result: dict[str, AttributeValue] = {}
        if self.truncated:
            result[semconv.RAG_CAPTURE_TRUNCATED] = list(self.truncated)
        if self.omitted_documents:
            result[semconv.RAG_CAPTURE_DOCUMENTS_OMITTED] = self.omitted_documents
        return result


def utf8_len(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (constant time for ASCII)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))


def cap_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, with a marker saying how much went.

    A limit too small for the marker cuts without one. A non-ASCII text of more than
    ``_READ_FACTOR`` times ``limit`` characters is read no further than ``limit`` characters
    (each takes at least a byte): its marker counts the characters cut.
    """
    if text.isascii():
        size = len(text)
        if size <= limit:
            return text
        if limit < _MARKER_ROOM:
            return text[: max(limit, 0)]
        keep = limit - _MARKER_ROOM
        return text[:keep] + TRUNCATION_MARKER.format(n=size - keep)
    if len(text) > _READ_FACTOR * max(limit, 0):
        head = text[: max(limit, 0)].encode("utf-8", "replace")
        if limit < _MARKER_ROOM:
            return head[: max(limit, 0)].decode("utf-8", "ignore")
        kept = head[: limit - _MARKER_ROOM].decode("utf-8", "ignore")
        return kept + TRUNCATION_MARKER_CHARS.format(n=len(text) - len(kept))
    encoded = text.encode("utf-8", "replace")
    size = len(encoded)
    if size <= limit:
        return text
    # A cut inside a multi-byte character drops that character.
    if limit < _MARKER_ROOM:
        return encoded[: max(limit, 0)].decode("utf-8", "ignore")
    kept = encoded[: limit - _MARKER_ROOM].decode("utf-8", "ignore")
    return kept + TRUNCATION_MARKER.format(n=size - len(kept.encode("utf-8")))


def hmac_sha256(key: bytes, text: str) -> str:
    """Hex HMAC-SHA256 of the UTF-8 text under ``key``."""
    return hmac.new(key, text.encode("utf-8", "replace"), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class ContentPolicy:
    """How texts are exported on spans; the evaluator always sees the raw text.

    ``capture_content=False`` exports only lengths, and, when ``hash_key`` is
    set, the HMAC-SHA256 of each text under that key (equal texts can then be
    matched across spans without being readable; with no key no hash leaves,
    since an unkeyed hash of a short text is found by trying every value).
    ``redact`` runs on every text before export. Each exported text is held
    under ``max_text_bytes`` UTF-8 bytes, a retrieval span's documents under
    ``max_documents_bytes``, and all that one span captures under
    ``max_span_bytes``; what is cut ends with a marker and is listed in
    ``ragpulse.capture.truncated``. ``conventions`` chooses the attribute
    names content is written under: ``"genai"`` (OpenTelemetry GenAI, the
    default), ``"openinference"`` (what Phoenix renders: a retriever's
    Documents tab, ``input.value``/``output.value``, LLM messages), or both,
    which writes the content twice. The OpenInference form writes three
    attributes per document, so it writes at most ``max_documents`` of them.

    ``max_record_chars`` bounds what one request holds for evaluation (question,
    contexts, answer, reference): capture stops reading retrieved items past it,
    and such a request is not evaluated (``ragpulse.eval.status = "skipped"``,
    ``ragpulse.eval.error.type = "too_large"``) rather than judged on part of
    its contexts.
    """

    capture_content: bool = True
    redact: Redactor | None = None
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    max_documents_bytes: int = DEFAULT_MAX_DOCUMENTS_BYTES
    max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES
    max_documents: int = DEFAULT_MAX_DOCUMENTS
    conventions: tuple[str, ...] = DEFAULT_CONVENTIONS
    max_record_chars: int = DEFAULT_MAX_RECORD_CHARS
    hash_key: str | None = field(default=None, repr=False)
    """The per-deployment secret that keys content hashes; never logged or exported."""
    genai: bool = field(init=False, repr=False, compare=False)
    """Whether GenAI attributes are written (derived from ``conventions``)."""
    openinference: bool = field(init=False, repr=False, compare=False)
    """Whether OpenInference attributes are written (derived from ``conventions``)."""
    _verbatim: bool = field(init=False, repr=False, compare=False)
    """Whether texts that fit are exported as given: captured, and no redaction hook."""
    _hash_key: bytes | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        conventions = (
            (self.conventions,) if isinstance(self.conventions, str) else tuple(self.conventions)
        )
        unknown = [c for c in conventions if c not in CONVENTIONS]
        if unknown or not conventions:
            raise ValueError(
                f"conventions must be a non-empty subset of {CONVENTIONS}, got {self.conventions!r}"
            )
        for name in (
            "max_text_bytes",
            "max_documents_bytes",
            "max_span_bytes",
            "max_documents",
            "max_record_chars",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        object.__setattr__(self, "conventions", conventions)
        object.__setattr__(self, "genai", GENAI in conventions)
        object.__setattr__(self, "openinference", OPENINFERENCE in conventions)
        object.__setattr__(self, "_verbatim", self.capture_content and self.redact is None)
        key = self.hash_key.encode("utf-8") if self.hash_key else None
        object.__setattr__(self, "_hash_key", key)

    def digest(self, text: str) -> str | None:
        """The keyed hash of ``text`` exported without content; ``None`` with no ``hash_key``."""
        return None if self._hash_key is None else hmac_sha256(self._hash_key, text)

    # --- texts --------------------------------------------------------------------------

    def redacted(self, text: str) -> str:
        """``text`` after the redaction hook; a failing hook yields a marker, never the text."""
        if self.redact is None:
            return text
        try:
            redacted = self.redact(text)
            if not isinstance(redacted, str):
                raise TypeError(f"redact returned {type(redacted).__name__}, not str")
            return redacted
        except BaseException as exc:
            if isinstance(exc, PROPAGATE):
                raise
            # A failing redaction hook must not leak the raw text.
            _logger.warning(
                "ragpulse: redact hook failed (%s); exporting a marker instead", type(exc).__name__
            )
            return "[redaction failed]"

    def export_text(self, text: str) -> str:
        """``text`` redacted and capped to ``max_text_bytes``, ready to be an attribute value."""
        return cap_bytes(self.redacted(text), self.max_text_bytes)

    def _charged_text(self, text: str, spent: SpanBytes | None, key: str) -> str | None:
        """``export_text``, also held under what the span has left and charged to it.

        ``None`` when the span has no room left; a cut is noted under ``key``.
        """
        text = self.redacted(text)
        limit = self.max_text_bytes
        if spent is None:
            return cap_bytes(text, limit)
        if spent.remaining < limit:
            limit = spent.remaining
            if limit < _MARKER_ROOM and (len(text) > limit or utf8_len(text) > limit):
                spent.cut(key)
                return None
        exported = cap_bytes(text, limit)
        if exported is not text:
            spent.cut(key)
        spent.remaining -= utf8_len(exported)
        return exported

    def put_text(
        self,
        attributes: dict[str, AttributeValue],
        keys: tuple[str, ...],
        text: str | None,
        spent: SpanBytes | None = None,
    ) -> None:
        """Write ``text`` into ``attributes`` under ``keys`` (a key, then its aliases).

        The text is redacted, capped or hashed once, whatever the number of keys;
        each copy is charged to ``spent``.
        """
        if text is None:
            return
        if self._verbatim and text.isascii():
            size = len(text) * len(keys)
            if len(text) <= self.max_text_bytes and (spent is None or size <= spent.remaining):
                # The usual text: nothing to redact or cut, and room for every copy.
                for key in keys:
                    attributes[key] = text
                if spent is not None:
                    spent.remaining -= size
                return
        if not self.capture_content:
            digest = self.digest(text)
            for name in keys:
                attributes[semconv.withheld(name, semconv.SUFFIX_LENGTH)] = len(text)
                if digest is not None:
                    attributes[semconv.withheld(name, semconv.SUFFIX_HMAC_SHA256)] = digest
            return
        key = keys[0]
        exported = self._charged_text(text, spent, key)
        if exported is None:
            return
        attributes[key] = exported
        for alias in keys[1:]:
            if spent is not None:
                size = utf8_len(exported)
                if size > spent.remaining:
                    spent.cut(alias)
                    continue
                spent.remaining -= size
            attributes[alias] = exported

    # --- documents -------------------------------------------------------------------------

    def put_documents(
        self,
        attributes: dict[str, AttributeValue],
        read: ContextsRead,
        spent: SpanBytes | None = None,
    ) -> None:
        """Write a retrieval span's documents into ``attributes`` in the chosen conventions.

        Within the byte caps. An unreadable item is written in its place with
        ``unreadable`` naming the error; the items ``read`` left out are counted.
        """
        items, plain, omitted = read.items, read.plain, read.omitted
        if self.genai:
            text = self._plain_documents_json(read, spent) if plain else None
            if text is None:
                text = self._documents_json(items, spent)
            attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS] = text
        if self.openinference and not (
            plain and self._plain_documents_openinference(read, spent, attributes)
        ):
            self._documents_openinference(items, spent, attributes)
        if omitted and spent is not None:
            spent.omitted_documents += omitted
            spent.cut(
                semconv.GEN_AI_RETRIEVAL_DOCUMENTS if self.genai else semconv.OI_RETRIEVAL_DOCUMENTS
            )

    def _limit(self, spent: SpanBytes | None) -> int:
        limit = self.max_documents_bytes
        if spent is not None and spent.remaining < limit:
            limit = spent.remaining
        return limit

    def _document(self, item: Context | Unreadable, room: int) -> tuple[dict[str, object], bool]:
        """One document of the JSON form, its content within ``room`` bytes; and whether cut."""
        if isinstance(item, Unreadable):
            return {semconv.GEN_AI_DOCUMENT_UNREADABLE: f"{item.kind}: {item.error}"}, False
        doc: dict[str, object] = {}
        if item.id is not None:
            doc["id"] = item.id
        if item.score is not None:
            doc["score"] = item.score
        if not self.capture_content:
            doc[semconv.DOCUMENT_CONTENT_LENGTH] = len(item.text)
            digest = self.digest(item.text)
            if digest is not None:
                doc[semconv.DOCUMENT_CONTENT_HMAC_SHA256] = digest
            return doc, False
        redacted = self.redacted(item.text)
        content = cap_bytes(redacted, min(self.max_text_bytes, room))
        doc["content"] = content
        return doc, content is not redacted

    def _plain_documents_json(self, read: ContextsRead, spent: SpanBytes | None) -> str | None:
        """The JSON of ASCII ``str`` passages, uncut, as many as fit (counted when not all do).

        ``None`` when a passage would need cutting, for the general path. The
        sizes were measured as the passages were read; the JSON is written from
        the texts in one pass.
        """
        texts: Sequence[str] = read.items  # type: ignore[assignment]  # plain: all str
        if not self._verbatim or not texts:
            return None
        limit = self._limit(spent)
        # '{"content": ""}, ' is 17 bytes around each passage; escaping may add more,
        # which the measure below catches.
        count = len(texts)
        if read.chars + 17 * count > limit:
            ends = list(itertools.accumulate(map(len, texts)))
            # The k-th passage ends at ends[k] + 17 * (k + 1): find the last that fits.
            low, high = 0, count
            while low < high:
                middle = (low + high) // 2
                if ends[middle] + 17 * (middle + 1) <= limit:
                    low = middle + 1
                else:
                    high = middle
            count = low
        shown = texts if count == len(texts) else texts[: count + 1]
        if not _none_longer(shown, read.chars, self.max_text_bytes):
            return None
        while True:
            text = contents_json(texts if count == len(texts) else texts[:count])
            if len(text) <= limit or count == 0:
                break
            count //= 2  # escapes made it bigger than estimated: write fewer
        if spent is not None:
            spent.remaining -= len(text)
            if count < len(texts):
                spent.cut(semconv.GEN_AI_RETRIEVAL_DOCUMENTS)
                spent.omitted_documents = max(spent.omitted_documents, len(texts) - count)
        return text

    def _documents_json(self, items: Sequence[Read], spent: SpanBytes | None) -> str:
        """``gen_ai.retrieval.documents``: id, score, and content (or its length and hash)."""
        limit = self._limit(spent)
        key = semconv.GEN_AI_RETRIEVAL_DOCUMENTS
        # Fast path: when the documents look like they fit, one dumps of them all,
        # measured once; otherwise one document at a time.
        text: str | None = None
        if self._documents_fit(items, limit):
            docs: list[dict[str, object]] = []
            cut = False
            ascii_only = True
            plain = self.capture_content and self.redact is None
            max_text = self.max_text_bytes
            for item in items:
                # Inline for the common documents: a passage, or a readable Context,
                # short enough, with no hook to run.
                if plain and type(item) is str and len(item) <= max_text and item.isascii():
                    docs.append({"content": item})
                    continue
                if type(item) is str:
                    item = Context(item)
                if plain and type(item) is Context and item.text.isascii():
                    content = item.text
                    if len(content) <= max_text:
                        if item.id is None and item.score is None:
                            docs.append({"content": content})
                        else:
                            doc: dict[str, object] = {}
                            if item.id is not None:
                                doc["id"] = item.id
                            if item.score is not None:
                                doc["score"] = item.score
                            doc["content"] = content
                            docs.append(doc)
                        continue
                doc, was_cut = self._document(item, max_text)  # type: ignore[arg-type]
                docs.append(doc)
                cut = cut or was_cut
                ascii_only = False
            # For ASCII texts both forms are the same JSON; the escaping one is faster.
            text = (dumps_ascii if ascii_only else dumps_unicode)(docs)
            if utf8_len(text) > limit:
                text = None
            elif cut and spent is not None:
                spent.cut(key)
        if text is None:
            text = self._documents_json_bounded(items, limit, spent, key)
        if spent is not None:
            spent.remaining -= utf8_len(text)
        return text

    def _documents_fit(self, items: Sequence[Read], limit: int) -> bool:
        """Whether the documents, each capped, look like they fit in ``limit`` bytes."""
        estimate = 2
        max_text = self.max_text_bytes
        for item in items:
            estimate += _DOC_OVERHEAD
            if type(item) is not Unreadable:
                text = item if type(item) is str else item.text  # type: ignore[union-attr]
                estimate += min(len(text) if text.isascii() else utf8_len(text), max_text)
            if estimate > limit:
                return False
        return True

    def _documents_json_bounded(
        self,
        items: Sequence[Read],
        limit: int,
        spent: SpanBytes | None,
        key: str,
    ) -> str:
        # One document at a time, each measured, until the next would not fit.
        pieces: list[str] = []
        used = 2  # the brackets
        for read in items:
            item = Context(read) if isinstance(read, str) else read
            separator = 2 if pieces else 0
            room = limit - used - separator - _DOC_OVERHEAD
            if room <= _MARKER_ROOM:
                break
            doc, was_cut = self._document(item, room)
            piece = dumps_unicode(doc)
            size = utf8_len(piece) + separator
            if used + size > limit and isinstance(item, Context):
                # Escaping grew the content (quotes, control characters): cut for the worst case.
                doc, was_cut = self._document(item, room // 6)
                piece = dumps_unicode(doc)
                size = utf8_len(piece) + separator
            if used + size > limit:
                break
            if was_cut and spent is not None:
                spent.cut(key)
            pieces.append(piece)
            used += size
        omitted = len(items) - len(pieces)
        if omitted and spent is not None:
            spent.cut(key)
            spent.omitted_documents = max(spent.omitted_documents, omitted)
        return "[" + ", ".join(pieces) + "]"

    def _plain_documents_openinference(
        self,
        read: ContextsRead,
        spent: SpanBytes | None,
        attributes: dict[str, AttributeValue],
    ) -> bool:
        """The OpenInference documents of ASCII ``str`` passages when all fit uncut.

        ``False`` (nothing written) otherwise, for the general path. The sizes
        were measured as the passages were read, and the keys of ``count``
        documents are made once.
        """
        texts: Sequence[str] = read.items  # type: ignore[assignment]  # plain: all str
        count = len(texts)
        if not self._verbatim or not texts or count > self.max_documents:
            return False
        total = read.chars
        # Every document keeps more than the marker's room before it, as the general path wants.
        if total + _MARKER_ROOM >= self._limit(spent) or not _none_longer(
            texts, total, self.max_text_bytes
        ):
            return False
        attributes.update(zip(_oi_content_keys(count), texts, strict=True))
        if spent is not None:
            spent.remaining -= total
        return True

    def _documents_openinference(
        self,
        items: Sequence[Read],
        spent: SpanBytes | None,
        attributes: dict[str, AttributeValue],
    ) -> None:
        """``retrieval.documents.N.document.{id,content,score}``, what Phoenix renders."""
        limit = self._limit(spent)
        used = 0
        written = 0
        plain = self.capture_content and self.redact is None
        max_text = self.max_text_bytes
        keys = _oi_document_keys
        for index, read in enumerate(items):
            if written >= self.max_documents:
                break
            room = limit - used
            if room <= _MARKER_ROOM:
                break
            if plain and type(read) is str and len(read) <= min(max_text, room) and read.isascii():
                # A plain passage that fits: nothing to redact, cut or measure twice.
                attributes[keys(index)[2]] = read
                used += len(read)
                written += 1
                continue
            item = Context(read) if isinstance(read, str) else read
            prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
            if isinstance(item, Unreadable):
                attributes[prefix + semconv.OI_DOCUMENT_METADATA] = dumps_ascii(
                    {semconv.GEN_AI_DOCUMENT_UNREADABLE: f"{item.kind}: {item.error}"}
                )
                written += 1
                continue
            if item.id is not None:
                attributes[prefix + semconv.OI_DOCUMENT_ID] = item.id
                used += utf8_len(item.id)
            if item.score is not None:
                attributes[prefix + semconv.OI_DOCUMENT_SCORE] = item.score
            if self.capture_content:
                redacted = self.redacted(item.text)
                content = cap_bytes(redacted, min(self.max_text_bytes, room))
                if content is not redacted and spent is not None:
                    spent.cut(semconv.OI_RETRIEVAL_DOCUMENTS)
                attributes[prefix + semconv.OI_DOCUMENT_CONTENT] = content
                used += utf8_len(content)
            else:
                content_key = prefix + semconv.OI_DOCUMENT_CONTENT
                attributes[semconv.withheld(content_key, semconv.SUFFIX_LENGTH)] = len(item.text)
                digest = self.digest(item.text)
                if digest is not None:
                    attributes[semconv.withheld(content_key, semconv.SUFFIX_HMAC_SHA256)] = digest
            written += 1
        omitted = len(items) - written
        if spent is not None:
            spent.remaining -= used
            if omitted:
                spent.cut(semconv.OI_RETRIEVAL_DOCUMENTS)
                spent.omitted_documents = max(spent.omitted_documents, omitted)

    # --- messages ----------------------------------------------------------------------------

    def put_messages(
        self,
        attributes: dict[str, AttributeValue],
        messages: Sequence[ChatMessage],
        spent: SpanBytes | None,
        *,
        output: bool,
    ) -> None:
        """Write a generation's input or output messages into ``attributes``, their structure
        kept (tool calls with their ids, names and arguments; tool results with the calls
        they answer).

        In the chosen conventions, capped like documents: each text (a message's, a tool
        call's arguments) under ``max_text_bytes``, all of them under
        ``max_documents_bytes`` and what the span has left; when not all fit, the last ones
        (the newest turns) are kept.
        """
        genai_key = semconv.GEN_AI_OUTPUT_MESSAGES if output else semconv.GEN_AI_INPUT_MESSAGES
        if not messages:
            return
        if not self.capture_content:
            joined = "\n".join(_message_texts(messages))
            self.put_text(attributes, (genai_key,), joined, spent)
            return
        limit = self._limit(spent)
        if len(messages) == 1:
            message = messages[0]
            text = message.text
            if (
                self._verbatim
                and _plain(message)
                and text.isascii()
                and len(text) <= self.max_text_bytes
                and _MARKER_ROOM < limit - _DOC_OVERHEAD >= len(text)
                and (self.max_documents or not self.openinference)
            ):
                # One message that fits as it is, as a generation's answer: its
                # text (ASCII) is its bytes, and its OpenInference keys are made once.
                if self.genai:
                    self._put_messages_json(attributes, genai_key, messages, spent)
                if self.openinference:
                    role_key, content_key = _OI_FIRST_MESSAGE_KEYS[output]
                    attributes[role_key] = message.role
                    attributes[content_key] = text
                    if spent is not None:
                        spent.remaining -= len(text)
                return
        kept = self._kept_messages(messages, limit, spent, genai_key)
        if self.genai:
            self._put_messages_json(attributes, genai_key, kept, spent)
        if self.openinference:
            for index, message in enumerate(kept):
                written = _oi_message(attributes, output, index, message)
                if spent is not None:
                    spent.remaining -= written

    @staticmethod
    def _put_messages_json(
        attributes: dict[str, AttributeValue],
        key: str,
        messages: Sequence[ChatMessage],
        spent: SpanBytes | None,
    ) -> None:
        """The GenAI JSON of ``messages`` under ``key``, charged to ``spent``."""
        value = messages_json(messages)
        attributes[key] = value
        if spent is not None:
            spent.remaining -= utf8_len(value)

    def _kept_messages(
        self,
        messages: Sequence[ChatMessage],
        limit: int,
        spent: SpanBytes | None,
        genai_key: str,
    ) -> list[ChatMessage]:
        """The newest messages that fit in ``limit`` bytes, each text redacted and capped."""
        kept: list[ChatMessage] = []
        used = 0
        cut = False
        for message in reversed(messages):
            room = limit - used - _DOC_OVERHEAD * (1 + len(message.calls))
            if room <= _MARKER_ROOM:
                break
            if self.openinference and len(kept) >= self.max_documents:
                break
            content, was_cut = self._capped(message.text, room)
            used += utf8_len(content) + _DOC_OVERHEAD
            calls = []
            for call in message.calls:
                arguments = call.arguments
                if arguments is not None:
                    arguments, cut_here = self._capped(arguments, max(limit - used, 0))
                    was_cut = was_cut or cut_here
                    used += utf8_len(arguments)
                calls.append(replace(call, arguments=arguments))
                used += _DOC_OVERHEAD
            cut = cut or was_cut
            kept.append(replace(message, text=content, calls=tuple(calls)))
        kept.reverse()
        if spent is not None and (cut or len(kept) < len(messages)):
            spent.cut(genai_key)
        return kept

    def _capped(self, text: str, room: int) -> tuple[str, bool]:
        """``text`` redacted and capped to ``room`` (and ``max_text_bytes``); whether cut."""
        redacted = self.redacted(text)
        content = cap_bytes(redacted, min(self.max_text_bytes, room))
        return content, content is not redacted


def _plain(message: ChatMessage) -> bool:
    """Whether ``message`` is text alone: no tool call, no tool result."""
    return not message.calls and message.call_id is None and message.role != TOOL_ROLE


def _message_texts(messages: Sequence[ChatMessage]) -> list[str]:
    """Every text of ``messages``: their contents and their tool calls' arguments."""
    texts: list[str] = []
    for message in messages:
        if message.text:
            texts.append(message.text)
        texts.extend(call.arguments for call in message.calls if call.arguments)
    return texts


def _oi_message(
    attributes: dict[str, AttributeValue], output: bool, index: int, message: ChatMessage
) -> int:
    """One message in OpenInference's flattened form; the bytes of text it wrote."""
    role_key, content_key = _oi_message_keys(output, index)
    attributes[role_key] = message.role
    attributes[content_key] = message.text
    written = utf8_len(message.text)
    prefix = role_key[: -len(semconv.OI_MESSAGE_ROLE)]
    if message.call_id is not None:
        attributes[prefix + semconv.OI_MESSAGE_TOOL_CALL_ID] = message.call_id
    if message.name is not None:
        attributes[prefix + semconv.OI_MESSAGE_NAME] = message.name
    for number, call in enumerate(message.calls):
        call_prefix = f"{prefix}{semconv.OI_MESSAGE_TOOL_CALLS}.{number}."
        if call.id is not None:
            attributes[call_prefix + semconv.OI_TOOL_CALL_ID_KEY] = call.id
        if call.name is not None:
            attributes[call_prefix + semconv.OI_TOOL_CALL_FUNCTION_NAME] = call.name
        if call.arguments is not None:
            attributes[call_prefix + semconv.OI_TOOL_CALL_FUNCTION_ARGUMENTS] = call.arguments
            written += utf8_len(call.arguments)
    return written


@functools.lru_cache(maxsize=256)
def _oi_message_keys(output: bool, index: int) -> tuple[str, str]:
    """The role and content keys of the OpenInference input or output message at ``index``."""
    prefix = semconv.OI_LLM_OUTPUT_MESSAGES if output else semconv.OI_LLM_INPUT_MESSAGES
    return (
        f"{prefix}.{index}.{semconv.OI_MESSAGE_ROLE}",
        f"{prefix}.{index}.{semconv.OI_MESSAGE_CONTENT}",
    )


_OI_FIRST_MESSAGE_KEYS = {output: _oi_message_keys(output, 0) for output in (False, True)}
"""The role and content keys of the first OpenInference input (False) and output (True) message."""


def _none_longer(texts: Sequence[str], total: int, limit: int) -> bool:
    """Whether no text of ``texts`` is longer than ``limit`` (``total``: at least their sum)."""
    return total <= limit or max(map(len, texts), default=0) <= limit


@functools.lru_cache(maxsize=64)
def _oi_content_keys(count: int) -> tuple[str, ...]:
    """The content keys of the first ``count`` OpenInference documents."""
    return tuple(_oi_document_keys(index)[2] for index in range(count))


@functools.lru_cache(maxsize=256)
def _oi_document_keys(index: int) -> tuple[str, str, str]:
    """The id, score and content keys of the OpenInference document at ``index``."""
    prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
    return (
        prefix + semconv.OI_DOCUMENT_ID,
        prefix + semconv.OI_DOCUMENT_SCORE,
        prefix + semconv.OI_DOCUMENT_CONTENT,
    )


_policy = ContentPolicy()


def get_policy() -> ContentPolicy:
    """The process-wide content policy (set by ``configure``)."""
    return _policy


def set_policy(policy: ContentPolicy) -> None:
    """Replace the process-wide content policy."""
    global _policy
    _policy = policy
