"""The per-request record that ``@retrieval`` and ``@generation`` report into.

A ``@rag`` call puts a ``RecordBuilder`` in a ``contextvars.ContextVar``; inner
decorated calls (also in asyncio tasks, and in threads run with a copied
context) find it there, so the unit is complete when the ``@rag`` span ends,
without buffering the trace.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import SpanContext

from ragpulse.capture._text import ToText, to_contexts, to_text
from ragpulse.evaluation.types import Context, RagRecord

_logger = logging.getLogger("ragpulse.capture")


class RecordBuilder:
    """Collects one request's question, contexts, answer and reference."""

    __slots__ = (
        "_lock",
        "answer",
        "attributes",
        "contexts",
        "explicit_answer",
        "generated_answer",
        "name",
        "question",
        "reference",
    )

    def __init__(self, name: str, question: str | None) -> None:
        # Inner calls may report from several threads or tasks at once.
        self._lock = threading.Lock()
        self.name = name
        self.question = question
        self.contexts: list[Context] = []
        self.answer: str | None = None
        self.generated_answer: str | None = None
        self.explicit_answer: str | None = None
        self.reference: str | None = None
        self.attributes: dict[str, Any] = {}

    def add_contexts(self, contexts: Sequence[Context]) -> None:
        with self._lock:
            self.contexts.extend(contexts)

    def set_generated_answer(self, answer: str | None) -> None:
        with self._lock:
            self.generated_answer = answer

    def build(self, span_context: SpanContext | None) -> RagRecord:
        """The finished record; an explicit answer wins over a generated one."""
        with self._lock:
            answer = self.explicit_answer
            if answer is None:
                answer = self.generated_answer
            if answer is None:
                answer = self.answer
            return RagRecord(
                question=self.question,
                contexts=tuple(self.contexts),
                answer=answer,
                reference=self.reference,
                name=self.name,
                span_context=span_context,
                attributes=dict(self.attributes),
            )


current_record: contextvars.ContextVar[RecordBuilder | None] = contextvars.ContextVar(
    "ragpulse_record", default=None
)

_warned_outside = False


def _builder(what: str) -> RecordBuilder | None:
    global _warned_outside
    builder = current_record.get()
    if builder is None and not _warned_outside:
        _warned_outside = True
        _logger.warning("ragpulse: %s called outside any @rag call; ignored", what)
    return builder


def record_contexts(items: Any, *, to_text: ToText | None = None) -> None:
    """Report retrieved items for the current ``@rag`` request (code that cannot be decorated)."""
    builder = _builder("record_contexts")
    if builder is not None:
        builder.add_contexts(to_contexts(items, to_text))


def record_answer(answer: Any) -> None:
    """Set the current ``@rag`` request's answer; it wins over inferred answers."""
    builder = _builder("record_answer")
    if builder is not None:
        builder.explicit_answer = to_text(answer)


def record_reference(reference: Any) -> None:
    """Set the current ``@rag`` request's reference (gold) answer, for correctness."""
    builder = _builder("record_reference")
    if builder is not None:
        builder.reference = to_text(reference)


def record_question(question: Any) -> None:
    """Set the current ``@rag`` request's question when it cannot be inferred."""
    builder = _builder("record_question")
    if builder is not None:
        builder.question = to_text(question)


def force_evaluation() -> None:
    """Ask for the current ``@rag`` request to be evaluated whatever the sample rate says."""
    builder = _builder("force_evaluation")
    if builder is not None:
        builder.attributes["force"] = True


class Handoff:
    """Passes a finished ``RagRecord`` from the ``@rag`` wrapper to the span processor.

    The wrapper offers the record just before ``span.end()``; the processor takes
    it in ``on_end``, which the SDK calls synchronously inside ``end()``, so an
    entry lives for microseconds. Records are kept only while an evaluating
    processor is registered, and never more than ``max_entries``.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._lock = threading.Lock()
        self._records: OrderedDict[tuple[int, int], RagRecord] = OrderedDict()
        self._consumers = 0
        self._max_entries = max_entries

    def add_consumer(self) -> None:
        with self._lock:
            self._consumers += 1

    def remove_consumer(self) -> None:
        with self._lock:
            self._consumers = max(0, self._consumers - 1)
            if self._consumers == 0:
                self._records.clear()

    def offer(self, record: RagRecord) -> None:
        context = record.span_context
        if context is None or self._consumers == 0:
            return
        with self._lock:
            self._records[(context.trace_id, context.span_id)] = record
            while len(self._records) > self._max_entries:
                self._records.popitem(last=False)

    def take(self, context: SpanContext | None) -> RagRecord | None:
        if context is None or not self._records:
            return None
        with self._lock:
            return self._records.pop((context.trace_id, context.span_id), None)


handoff = Handoff()
