"""What of a request's text leaves the process: capture on/off, redaction, size caps."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragpulse.evaluation.types import Context

_logger = logging.getLogger("ragpulse.capture")

Redactor = Callable[[str], str]

DEFAULT_MAX_TEXT_LENGTH = 8192
DEFAULT_MAX_DOCUMENTS_LENGTH = 65536
TRUNCATION_MARKER = "…[truncated {n} chars]"


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    try:
        return int(value) if value else default
    except ValueError:
        _logger.warning("ragpulse: ignoring %s=%r (not an integer)", name, value)
        return default


@dataclass(frozen=True)
class ContentPolicy:
    """How texts are exported on spans; the evaluator always sees the raw text.

    ``capture_content=False`` exports only lengths and SHA-256 hashes.
    ``redact`` runs on every text before export. Texts longer than
    ``max_text_length`` characters are cut with a marker, and a span's
    documents JSON is held under ``max_documents_length``.
    """

    capture_content: bool = True
    redact: Redactor | None = None
    max_text_length: int = DEFAULT_MAX_TEXT_LENGTH
    max_documents_length: int = DEFAULT_MAX_DOCUMENTS_LENGTH

    @classmethod
    def from_env(
        cls,
        *,
        capture_content: bool | None = None,
        redact: Redactor | None = None,
        max_text_length: int | None = None,
    ) -> ContentPolicy:
        """Keyword arguments first, then ``RAGPULSE_CAPTURE_CONTENT`` and
        ``RAGPULSE_MAX_TEXT_LENGTH``."""
        return cls(
            capture_content=(
                capture_content
                if capture_content is not None
                else _env_bool("RAGPULSE_CAPTURE_CONTENT", True)
            ),
            redact=redact,
            max_text_length=(
                max_text_length
                if max_text_length is not None
                else _env_int("RAGPULSE_MAX_TEXT_LENGTH", DEFAULT_MAX_TEXT_LENGTH)
            ),
        )

    def export_text(self, text: str) -> str:
        """``text`` redacted and capped, ready to be an attribute value."""
        if self.redact is not None:
            try:
                text = self.redact(text)
            except Exception:
                # A failing redaction hook must not leak the raw text.
                _logger.exception("ragpulse: redact hook failed; exporting a marker instead")
                return "[redaction failed]"
        return cap(text, self.max_text_length)

    def text_attributes(self, key: str, text: str | None, *aliases: str) -> dict[str, str | int]:
        """Attributes describing ``text`` under ``key`` (and ``aliases``) as the policy allows.

        The text is redacted, capped or hashed once, whatever the number of keys.
        """
        if text is None:
            return {}
        keys = (key, *aliases)
        if self.capture_content:
            exported = self.export_text(text)
            return dict.fromkeys(keys, exported)
        digest = sha256(text)
        attributes: dict[str, str | int] = {}
        for name in keys:
            attributes[name + ".length"] = len(text)
            attributes[name + ".sha256"] = digest
        return attributes

    def documents_json(self, contexts: Sequence[Context]) -> str:
        """``gen_ai.retrieval.documents`` JSON: id, score, and content (or its length and hash)."""
        docs: list[dict[str, object]] = []
        budget = self.max_documents_length
        for context in contexts:
            doc: dict[str, object] = {}
            if context.id is not None:
                doc["id"] = context.id
            if context.score is not None:
                doc["score"] = context.score
            if self.capture_content:
                content = self.export_text(context.text)
                if len(content) > budget:
                    content = cap(content, max(budget, 0))
                budget -= len(content)
                doc["content"] = content
            else:
                doc["content_length"] = len(context.text)
                doc["content_sha256"] = sha256(context.text)
            docs.append(doc)
        return json.dumps(docs, ensure_ascii=False)


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    dropped = len(text) - limit
    return text[:limit] + TRUNCATION_MARKER.format(n=dropped)


def sha256(text: str) -> str:
    """Hex SHA-256 of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


_policy = ContentPolicy()


def get_policy() -> ContentPolicy:
    """The process-wide content policy (set by ``configure``)."""
    return _policy


def set_policy(policy: ContentPolicy) -> None:
    """Replace the process-wide content policy."""
    global _policy
    _policy = policy
