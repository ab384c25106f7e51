"""The conventions a span may be written in, and the reader of each.

``detect_convention`` says which convention wrote a span; ``readers_for`` gives the readers to
try for a facet, the span's own convention first and the others after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from ragpulse import semconv
from ragpulse.adapters import genai, openinference, openllmetry
from ragpulse.adapters._common import (
    Attributes,
    Events,
    Issues,
    attributes_of,
    events_of,
    text,
)
from ragpulse.evaluation.types import Context

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


Convention = Literal["openinference", "genai", "openllmetry", "ragpulse"]

# Issues kept verbatim for logs; the count covers all of them.
MAX_ISSUES_KEPT = 20


class Reader(Protocol):
    """What each convention module provides (the modules themselves satisfy it)."""

    def matches(self, attributes: Attributes, events: Events) -> bool: ...
    def is_retrieval(self, attributes: Attributes, events: Events) -> bool: ...
    def is_llm(self, attributes: Attributes, events: Events) -> bool: ...
    def documents(
        self, span: ReadableSpan, issues: Issues, positions: list[int] | None = None
    ) -> list[Context]: ...
    def query(self, span: ReadableSpan, issues: Issues) -> str | None: ...
    def input_text(self, span: ReadableSpan, issues: Issues) -> str | None: ...
    def output_text(self, span: ReadableSpan, issues: Issues) -> str | None: ...


class _RagpulseReader:
    """ragpulse's own ``@rag`` unit: question and answer under ``ragpulse.*``."""

    def matches(self, attributes: Attributes, events: Events) -> bool:
        return semconv.RAG_UNIT in attributes

    def is_retrieval(self, attributes: Attributes, events: Events) -> bool:
        return False

    def is_llm(self, attributes: Attributes, events: Events) -> bool:
        return False

    def documents(
        self, span: ReadableSpan, issues: Issues, positions: list[int] | None = None
    ) -> list[Context]:
        return []

    def query(self, span: ReadableSpan, issues: Issues) -> str | None:
        return None

    def input_text(self, span: ReadableSpan, issues: Issues) -> str | None:
        return text(attributes_of(span).get(semconv.RAG_QUESTION))

    def output_text(self, span: ReadableSpan, issues: Issues) -> str | None:
        return text(attributes_of(span).get(semconv.RAG_ANSWER))


# Detection order: the most specific marker first. A ragpulse unit also carries
# OpenInference attributes, and OpenLLMetry's LLM spans carry GenAI ones.
READERS: dict[Convention, Reader] = {
    "ragpulse": _RagpulseReader(),
    "openinference": openinference,
    "openllmetry": openllmetry,
    "genai": genai,
}
FALLBACKS: tuple[Reader, ...] = (openinference, genai, openllmetry)


def detect_convention(span: ReadableSpan) -> Convention | None:
    """Which convention wrote ``span``; ``None`` for a span no adapter reads."""
    attributes, events = attributes_of(span), events_of(span)
    for convention, reader in READERS.items():
        if reader.matches(attributes, events):
            return convention
    return None


def readers_for(convention: Convention | None) -> tuple[Reader, ...]:
    if convention is None:
        return FALLBACKS
    primary = READERS[convention]
    return (primary, *(reader for reader in FALLBACKS if reader is not primary))


def first_list(
    readers: Sequence[Reader],
    span: ReadableSpan,
    issues: Issues,
    positions: list[int] | None = None,
) -> list[Context]:
    for reader in readers:
        found = reader.documents(span, issues, positions)
        if found:
            return found
        if positions is not None:
            positions.clear()
    return []


def first_text(
    readers: Sequence[Reader],
    facet: Literal["query", "input_text", "output_text"],
    span: ReadableSpan,
    issues: Issues,
) -> str | None:
    for reader in readers:
        found: str | None = getattr(reader, facet)(span, issues)
        if found is not None:
            return found
    return None
