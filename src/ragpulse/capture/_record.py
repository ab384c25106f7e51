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

from ragpulse import semconv
from ragpulse.adapters._agent import latest_user, resolve_question
from ragpulse.adapters._common import Issues
from ragpulse.adapters._history import given_results
from ragpulse.adapters._messages import Turn
from ragpulse.capture._roles import get_tool_roles
from ragpulse.capture._shield import log_failure, swallow
from ragpulse.capture._text import (
    MAX_RECORD_CHARS,
    ContextsRead,
    ToText,
    UnreadableError,
    read_contexts,
    to_text,
    unreadable_warning,
)
from ragpulse.evaluation.types import Context, Contexts, ContextSource, RagRecord

_logger = logging.getLogger("ragpulse.capture")

_MAX_WARNINGS = 8
MAX_RUBRIC_POINTS = 64
"""Required points read from one request's rubric; the rest are ignored with a warning."""
MAX_TOOL_RESULTS = 1024
"""Contexts one request may hold when tool results are added; past it the request is not
evaluated (``too_large``) rather than judged on part of its evidence."""
MAX_FAILED_TOOLS = 64
"""Distinct failed tool names one request keeps."""

EXPLICIT = "explicit"
"""Answer source: ``record_answer()``."""
GENERATED = "generated"
"""Answer source: the last ``@generation`` output."""
RESULT = "result"
"""Answer source: the ``@rag`` function's result."""


class RecordBuilder:
    """Collects one request's question, contexts, answer and reference.

    It also keeps what could not be read: a request with an unreadable context
    or answer is not evaluated (ragpulse does not call an answer unsupported
    because it could not read the passage that supports it).
    """

    __slots__ = (
        "_lock",
        "agent",
        "answer",
        "attributes",
        "budget",
        "contexts",
        "conversation_id",
        "explicit_answer",
        "failed_tools",
        "generated_answer",
        "max_chars",
        "name",
        "question",
        "reference",
        "resolved_question",
        "rubric",
        "sources",
        "too_large",
        "tool_calls",
        "unreadable_answers",
        "unreadable_contexts",
        "warnings",
    )

    def __init__(self, name: str, question: str | None, budget: int = MAX_RECORD_CHARS) -> None:
        # Inner calls may report from several threads or tasks at once.
        self._lock = threading.Lock()
        self.name = name
        self.question = question
        # Plain passages are kept as str until ``build`` (see ``ContextsRead``).
        self.contexts: list[Context | str] = []
        self.answer: str | None = None
        self.generated_answer: str | None = None
        self.explicit_answer: str | None = None
        self.reference: str | None = None
        self.rubric: tuple[str, ...] | None = None
        self.attributes: dict[str, Any] = {}
        self.sources: list[ContextSource] = []
        """Which retrieval span each run of ``contexts`` came from."""
        self.unreadable_contexts = 0
        self.budget = budget
        """Characters of context text the record may still take."""
        self.max_chars = budget
        """Characters the record holds in all: a text is read no further than one more (a
        longer one makes the request ``too_large``, and is not judged in part)."""
        self.too_large = False
        # Answer sources (EXPLICIT, GENERATED, RESULT) that were given but could not be read.
        self.unreadable_answers: set[str] = set()
        self.warnings: list[str] = []
        self.conversation_id: str | None = None
        self.tool_calls = 0
        """``@tool`` calls made inside the request, evidence and acting tools alike."""
        self.failed_tools: list[str] = []
        """Evidence tools that raised, returned an error result or returned nothing."""
        self.agent = False
        """A generation was given tool calls or results: the answer is an agent's."""
        self.resolved_question: str | None = None
        """The question joined to the earlier user turn it follows up on (``add_conversation``)."""

    def add_read(self, read: ContextsRead, span_id: int = 0) -> None:
        """Add contexts as read, unreadable ones counted and named in a warning.

        ``span_id``: the retrieval span that wrote them as its documents, in order
        (0: none), so their per-document scores can be written on it.
        """
        contexts = read.readable()
        with self._lock:
            if span_id and contexts and not read.unreadable:
                # Unreadable items shift the positions; such a record is not evaluated.
                self.sources.append((span_id, 0, len(self.contexts), len(contexts)))
            self.contexts.extend(contexts)
            self.unreadable_contexts += read.unreadable
            self.budget -= read.charged
            if read.omitted or self.budget < 0:
                self.too_large = True
        if read.unreadable:
            first = read.first_unreadable()
            if first is not None:
                self.warn(unreadable_warning(read.unreadable, first))

    def add_tool_result(self, tool: str, call_id: str | None, text: str, span_id: int) -> None:
        """One evidence tool's result: a context with its tool and call id, its span the
        source its per-document scores go to (document 0 of that span)."""
        with self._lock:
            self.tool_calls += 1
            if len(self.contexts) >= MAX_TOOL_RESULTS:
                # Past the bound the request is not judged on part of its evidence.
                self.too_large = True
                return
            if span_id:
                self.sources.append((span_id, 0, len(self.contexts), 1))
            self.contexts.append(Context(text, call_id, tool=tool))
            self.budget -= len(text)
            if self.budget < 0:
                self.too_large = True

    def add_tool_call(self, tool: str, *, failed: bool, unreadable: bool = False) -> None:
        """A tool call with no evidence to add: an acting tool's, a failed evidence tool's
        (``failed``: it raised, returned an error result or returned nothing), or one whose
        result could not be read (``unreadable``: the request is then not evaluated)."""
        with self._lock:
            self.tool_calls += 1
            if unreadable:
                self.unreadable_contexts += 1
            known = tool in self.failed_tools
            if failed and not known and len(self.failed_tools) < MAX_FAILED_TOOLS:
                self.failed_tools.append(tool)

    def add_conversation(self, turns: Sequence[Turn]) -> None:
        """A generation's input, as turns: read as a trace's LLM call is read.

        The tool results it was given are evidence (this turn's, then the earlier turns',
        within the history bounds; a passage already held counts once), a failed one of this
        turn names its tool as failed, and when the latest user turn is the request's
        question and a follow-up, the question judged joins the user turn before it.
        """
        latest = latest_user(turns)
        question = self.question
        if latest is not None and question is not None:
            asked = turns[latest].text
            if asked is not None and asked.strip() == question.strip():
                self.resolved_question = resolve_question(turns, latest)
        with self._lock:
            known = {item if type(item) is str else item.text for item in self.contexts}  # type: ignore[union-attr]
        rule = get_tool_roles()
        given = given_results(turns, latest, rule.is_evidence, Issues(0), known=known)
        with self._lock:
            if any(turn.is_tool_result or turn.calls for turn in turns):
                self.agent = True
            for name in given.failed:
                shown = name or "unnamed tool"
                if shown not in self.failed_tools and len(self.failed_tools) < MAX_FAILED_TOOLS:
                    self.failed_tools.append(shown)
            for result in given.results:
                if result.passage in known:
                    continue
                known.add(result.passage)
                if len(self.contexts) >= MAX_TOOL_RESULTS:
                    self.too_large = True
                    return
                if result.history:
                    # Whether a tool ragpulse saw vouches for it is the processor's to say.
                    given_before = self.attributes.get(semconv.RAG_ADAPTER_HISTORY_GIVEN, ())
                    self.attributes[semconv.RAG_ADAPTER_HISTORY_GIVEN] = (
                        *given_before,
                        len(self.contexts),
                    )
                self.contexts.append(Context(result.passage, result.call_id, tool=result.name))
                self.budget -= len(result.passage)
                if self.budget < 0:
                    self.too_large = True

    def set_generated_answer(self, answer: str | None) -> None:
        # One store is atomic: the lock is for readers of several fields at once.
        self.generated_answer = answer

    def set_answer(self, source: str, value: Any) -> None:
        """Read ``value`` as the answer from ``source``: ``EXPLICIT``, ``GENERATED``, ``RESULT``."""
        text = self.read(value, "answer")
        with self._lock:
            if source == EXPLICIT:
                self.explicit_answer = text
            elif source == GENERATED:
                self.generated_answer = text
            else:
                self.answer = text
            if text is None and value is not None:
                self.unreadable_answers.add(source)
            else:
                self.unreadable_answers.discard(source)

    def final_answer(self) -> str | None:
        """The answer that counts: explicit, else generated, else the ``@rag`` result."""
        with self._lock:
            for answer in (self.explicit_answer, self.generated_answer, self.answer):
                if answer is not None:
                    return answer
            return None

    def read_rubric(self, value: Any) -> tuple[str, ...] | None:
        """``value`` (one text or an iterable of them) as required points, bounded.

        At most ``MAX_RUBRIC_POINTS`` points are read; an unreadable point is left out
        with a warning (completeness is then judged on the points that could be read).
        """
        if value is None:
            return None
        items = [value] if isinstance(value, str) else value
        points: list[str] = []
        try:
            iterator = iter(items)
        except TypeError:
            iterator = iter([value])
        for item in iterator:
            if len(points) >= MAX_RUBRIC_POINTS:
                self.warn(f"rubric longer than {MAX_RUBRIC_POINTS} points; the rest ignored")
                break
            text = self.read(item, "rubric point")
            if text is not None and text.strip():
                points.append(text.strip())
        return tuple(points)

    def warn(self, message: str) -> None:
        """Keep a warning for the span (the first few of a request)."""
        with self._lock:
            if len(self.warnings) < _MAX_WARNINGS and message not in self.warnings:
                self.warnings.append(message)

    def read(self, value: Any, what: str) -> str | None:
        """``value`` as text; when it cannot be read, ``None`` and a warning."""
        try:
            return to_text(value, self.max_chars + 1)
        except UnreadableError as exc:
            self.warn(f"{what} unreadable ({exc.kind}: {exc.error})")
            return None

    @property
    def evaluable(self) -> bool:
        """False when a context, or the answer that counts, could not be read."""
        with self._lock:
            if self.unreadable_contexts:
                return False
            sources = (
                (EXPLICIT, self.explicit_answer),
                (GENERATED, self.generated_answer),
                (RESULT, self.answer),
            )
            for source, answer in sources:
                if answer is not None:
                    return True
                if source in self.unreadable_answers:
                    return False
            return True

    def build(self, span_context: SpanContext | None) -> RagRecord:
        """The finished record; an explicit answer wins over a generated one."""
        answer = self.final_answer()
        with self._lock:
            return RagRecord(
                question=self.resolved_question or self.question,
                # One tuple of what was read: a Context per passage is made by its reader.
                contexts=Contexts(self.contexts),
                answer=answer,
                reference=self.reference,
                rubric=self.rubric or (),
                name=self.name,
                span_context=span_context,
                attributes=dict(self.attributes),
                sources=tuple(self.sources),
                conversation_id=self.conversation_id,
                failed_tools=tuple(self.failed_tools),
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


# The record_* helpers never raise into the caller: a value that cannot be read
# becomes a warning on the @rag span; any other failure is logged and swallowed
# (KeyboardInterrupt and SystemExit excepted).


def record_contexts(items: Any, *, to_text: ToText | None = None) -> None:
    """Report retrieved items for the current ``@rag`` request (code that cannot be decorated).

    An item that cannot be read is counted; the request is then not evaluated.
    Iterators are read to the end: pass a list if you still need the items.
    """
    try:
        builder = _builder("record_contexts")
        if builder is not None:
            builder.add_read(read_contexts(items, to_text, max(builder.budget, 0)))
    except BaseException as exc:
        swallow(exc)
        log_failure("record_contexts()", exc)


def record_answer(answer: Any) -> None:
    """Set the current ``@rag`` request's answer; it wins over inferred answers."""
    try:
        builder = _builder("record_answer")
        if builder is not None:
            builder.set_answer(EXPLICIT, answer)
    except BaseException as exc:
        swallow(exc)
        log_failure("record_answer()", exc)


def record_rubric(points: Any) -> None:
    """Set the current ``@rag`` request's required points, for completeness.

    A list of texts ("dose: 200 mg", "frequency: once daily"); each is judged
    against the answer. It wins over the ``@rag(rubric=...)`` callable.
    """
    try:
        builder = _builder("record_rubric")
        if builder is not None:
            builder.rubric = builder.read_rubric(points)
    except BaseException as exc:
        swallow(exc)
        log_failure("record_rubric()", exc)


def record_reference(reference: Any) -> None:
    """Set the current ``@rag`` request's reference (gold) answer, for correctness."""
    try:
        builder = _builder("record_reference")
        if builder is not None:
            builder.reference = builder.read(reference, "reference")
    except BaseException as exc:
        swallow(exc)
        log_failure("record_reference()", exc)


def record_question(question: Any) -> None:
    """Set the current ``@rag`` request's question when it cannot be inferred."""
    try:
        builder = _builder("record_question")
        if builder is not None:
            builder.question = builder.read(question, "question")
    except BaseException as exc:
        swallow(exc)
        log_failure("record_question()", exc)


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

    @property
    def wanted(self) -> bool:
        """Whether any processor takes records (if not, building one is wasted work)."""
        return self._consumers > 0

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
