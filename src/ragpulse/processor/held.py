"""The spans held while their evaluation runs: ``HeldSpans``.

Every unit submitted for evaluation has one entry here, made **before** it is
submitted, so its result, however fast, always finds it:

- *held*: the unit's ``ReadableSpan`` waits for its scores, bounded by count
  (``max_spans``), estimated bytes (``max_bytes``) and time (``hold_timeout``);
- *late*: the span went out without its scores (over a bound, past its
  deadline, flushed or shut down); the entry keeps only the span's ``Resource``,
  for the carrier span the result becomes.

A held entry turns late atomically, under the same lock its result takes it by,
so a result is matched either to the held span or to the resource of the span
that already went out, never to neither. Late entries are bounded too
(``max_late``, oldest first out); a result whose entry was evicted gets the last
resource seen, the one every span of a process's provider shares.

Retrieval spans of a trace that may be evaluated wait here too, for their unit
(``wait``): they end before it, and its evaluation writes each document's scores
onto them. When the unit is submitted it takes them along (``claim``, then
``hold``), and they leave with it: rebuilt with their scores, or unchanged when
the unit goes on without its result. An LLM call that may have given a final answer
waits the same way (``wait(answer=True)``) until its trace's root ends: when the
conversation went on after it, it is a unit itself (``claim_answer``, then ``hold``).
Units and retrieval spans share one count and one byte total within ``max_spans``
and ``max_bytes``; a retrieval span starts waiting only while the total is within
half of each, so retrieval spans never crowd out units. It waits at most
``hold_timeout`` for its unit, then at most as long as the unit; past any bound it
goes on unchanged.

A reaper thread forwards spans past their deadline through ``on_expired``. The
lock is never held while calling it, or anything else outside this module.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["DEFAULT_MAX_LATE", "Held", "HeldSpans", "SpanKey", "Waiting"]

SpanKey = tuple[int, int]
"""A span's ``(trace_id, key)``: span ids alone may repeat across traces (many apps, any
id generator), and one unit must never take another's place."""

DEFAULT_MAX_LATE = 4096
"""Late entries remembered for carrier spans."""


@dataclass(frozen=True, slots=True)
class Held:
    """One span waiting for its evaluation."""

    span: ReadableSpan
    held_at: float
    """``time.monotonic()`` when it was held."""
    deadline: float
    size: int
    """Estimated bytes (its retrieval spans' included)."""
    retrievals: tuple[ReadableSpan, ...] = ()
    """The unit's retrieval spans, waiting with it for its documents' scores."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """One retrieval span (or an LLM call's, ``answer``) waiting for its unit to end."""

    span: ReadableSpan
    deadline: float
    size: int
    """Estimated bytes."""
    answer: bool = False
    """An LLM call whose output may be a final answer: the span of its own unit, taken by
    ``claim_answer``, never by a unit's ``claim`` of its evidence."""


def _parent_id(waiting: Waiting) -> int | None:
    parent = waiting.span.parent
    return None if parent is None else parent.span_id


OnExpired = Callable[[list[Held], list[ReadableSpan]], None]


class HeldSpans:
    """The table of units under evaluation: held spans and the late ones' resources.

    Args:
        hold_timeout: seconds a span may be held before ``on_expired`` gets it.
        max_spans, max_bytes: bounds on what is held at once.
        on_expired: called on the reaper thread with the units past their deadline,
            already turned late, and the retrieval spans whose unit did not come in
            time; the caller forwards them.
        max_late: late entries remembered.
    """

    def __init__(
        self,
        *,
        hold_timeout: float,
        max_spans: int,
        max_bytes: int,
        on_expired: OnExpired,
        max_late: int = DEFAULT_MAX_LATE,
    ) -> None:
        self._hold_timeout = hold_timeout
        self._max_spans = max_spans
        self._max_bytes = max_bytes
        self._max_late = max_late
        self._on_expired = on_expired
        self._closed = False
        self._last_resource = Resource.get_empty()
        self._start(reaper=True)
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._after_fork_in_child)
            os.register_at_fork(after_in_child=lambda: (m := ref()) is not None and m())

    def _start(self, *, reaper: bool) -> None:
        # One lock guards both tables and the byte count; the condition wakes the reaper.
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._held: OrderedDict[SpanKey, Held] = OrderedDict()
        self._waiting: OrderedDict[SpanKey, Waiting] = OrderedDict()
        # The waiting spans' ids by trace, so a unit's end finds its trace's without
        # reading the others' (a relay holds many traces at once).
        self._waiting_traces: dict[int, set[int]] = {}
        self.waiting = 0
        """Retrieval spans waiting for their unit now: a plain attribute, read without the
        lock on every span that ends (a stale value only delays or skips a look)."""
        self._spans = 0
        """Spans held: units, their retrieval spans and the retrieval spans waiting."""
        self._bytes = 0
        self._late: OrderedDict[SpanKey, Resource] = OrderedDict()
        self._ended_roots: OrderedDict[int, None] = OrderedDict()
        """Traces whose local root ended lately: an LLM call's span arriving after it has no
        unit left to be (``ragpulse serve`` receives spans in any order)."""
        if reaper:
            threading.Thread(
                target=self._reap_forever, name="ragpulse-hold-reaper", daemon=True
            ).start()

    # --- entries -------------------------------------------------------------------------

    def hold(
        self,
        key: SpanKey,
        span: ReadableSpan,
        size: int,
        retrievals: Sequence[Waiting] = (),
    ) -> bool:
        """Make the entry of a unit about to be submitted, with its ``claim``-ed retrievals.

        True: the span is held (its retrieval spans with it). False: it would pass a
        bound (or the table is closed); it is entered late, and the caller forwards
        it as pending and its retrieval spans unchanged.
        """
        now = time.monotonic()
        size += sum(waiting.size for waiting in retrievals)
        spans = 1 + len(retrievals)
        with self._lock:
            self._last_resource = span.resource
            fits = (
                not self._closed
                and self._spans + spans <= self._max_spans
                and self._bytes + size <= self._max_bytes
            )
            if not fits:
                self._enter_late(key, span.resource)
                return False
            deadline = now + self._hold_timeout
            kept = tuple(waiting.span for waiting in retrievals)
            self._held[key] = Held(span, now, deadline, size, kept)
            self._bytes += size
            self._spans += spans
            # No wake-up for the reaper: it never sleeps past ``hold_timeout``, and a new
            # entry's deadline is never earlier than the ones it already knows. A request's
            # thread then wakes no thread of ours.
            return True

    def wait(self, key: SpanKey, span: ReadableSpan, size: int, *, answer: bool = False) -> bool:
        """Keep a retrieval span (``answer``: an LLM call that may be a unit) until its unit
        ends; False: over a bound (or closed), the caller forwards it now."""
        with self._lock:
            # Only within half of each bound: retrieval spans never crowd out the units.
            if (
                self._closed
                or key in self._waiting  # received twice: the copy goes on now
                or (answer and key[0] in self._ended_roots)
                or self._spans + 1 > self._max_spans // 2
                or self._bytes + size > self._max_bytes // 2
            ):
                return False
            self._waiting[key] = Waiting(span, time.monotonic() + self._hold_timeout, size, answer)
            self._waiting_traces.setdefault(key[0], set()).add(key[1])
            self.waiting = len(self._waiting)
            self._bytes += size
            self._spans += 1
            return True  # the reaper is not woken either (see ``hold``)

    def claim(self, trace_id: int, span_ids: Iterable[int]) -> list[Waiting]:
        """Take the waiting retrieval spans of ``trace_id`` with these ids (in their order of
        ending), for their unit's ``hold`` or for the caller to forward; an LLM call's span
        waiting as an ``answer`` stays."""
        if not self._waiting:
            return []
        with self._lock:
            taken: list[Waiting] = []
            for span_id in dict.fromkeys(span_ids):
                waiting = self._waiting.get((trace_id, span_id))
                if waiting is not None and not waiting.answer:
                    del self._waiting[(trace_id, span_id)]
                    taken.append(waiting)
            for waiting in taken:
                self._unindex(trace_id, waiting)
            self._untrack(taken)
        taken.sort(key=lambda waiting: waiting.deadline)
        return taken

    def claim_answer(self, trace_id: int, span_id: int) -> Waiting | None:
        """Take the LLM call's span waiting as ``answer``: its output is a final answer,
        and the span is its unit's. ``None``: it is not waiting (it went on already)."""
        if not self._waiting:
            return None
        with self._lock:
            waiting = self._waiting.get((trace_id, span_id))
            if waiting is None or not waiting.answer:
                return None
            del self._waiting[(trace_id, span_id)]
            self._unindex(trace_id, waiting)
            self._untrack([waiting])
        return waiting

    def root_ended(self, trace_id: int) -> None:
        """The local root of ``trace_id`` was read: an LLM call's span of it arriving later
        goes on at once (``wait`` refuses it) instead of waiting for a unit that is gone."""
        with self._lock:
            self._ended_roots[trace_id] = None
            self._ended_roots.move_to_end(trace_id)
            while len(self._ended_roots) > self._max_late:
                self._ended_roots.popitem(last=False)

    def enter_late(self, key: SpanKey, resource: Resource) -> None:
        """Make the entry of a unit whose span already went out: its result becomes a carrier
        span with ``resource``."""
        with self._lock:
            self._enter_late(key, resource)

    def claim_trace(self, trace_id: int, parent_id: int | None = None) -> list[Waiting]:
        """Take every waiting retrieval span of ``trace_id`` (only the children of
        ``parent_id``, when given): their unit ended without taking them."""
        if not self._waiting:
            return []
        with self._lock:
            span_ids = self._waiting_traces.get(trace_id, ())
            keys = [
                (trace_id, span_id)
                for span_id in span_ids
                if parent_id is None or _parent_id(self._waiting[(trace_id, span_id)]) == parent_id
            ]
            taken = [self._waiting.pop(key) for key in keys]
            for waiting in taken:
                self._unindex(trace_id, waiting)
            self._untrack(taken)
        taken.sort(key=lambda waiting: waiting.deadline)
        return taken

    def _unindex(self, trace_id: int, waiting: Waiting) -> None:
        # Caller holds the lock.
        span_ids = self._waiting_traces.get(trace_id)
        if span_ids is None or waiting.span.context is None:
            return
        span_ids.discard(waiting.span.context.span_id)
        if not span_ids:
            del self._waiting_traces[trace_id]

    def _untrack(self, taken: Sequence[Waiting]) -> None:
        # Caller holds the lock.
        self.waiting = len(self._waiting)
        self._spans -= len(taken)
        self._bytes -= sum(waiting.size for waiting in taken)

    def settle(self, key: SpanKey) -> Held | Resource:
        """Take the entry of a returned evaluation.

        The held span to forward with its scores, or, when the span already
        went out, the resource its carrier span takes.
        """
        with self._lock:
            held = self._held.pop(key, None)
            if held is not None:
                self._release(held)
                return held
            return self._late.pop(key, self._last_resource)

    def forget(self, key: SpanKey) -> Held | None:
        """Drop the entry of a unit that was not submitted after all.

        Its entry when its span was still held: nobody forwarded it (nor its
        retrieval spans), the caller must.
        """
        with self._lock:
            self._late.pop(key, None)
            held = self._held.pop(key, None)
            if held is not None:
                self._release(held)
            return held

    def release_all(self) -> tuple[list[Held], list[ReadableSpan]]:
        """Turn every held unit late and return them, and the retrieval spans still
        waiting for theirs, for a flush or a shutdown to forward."""
        with self._lock:
            released = list(self._held.values())
            for key, held in self._held.items():
                self._enter_late(key, held.span.resource)
            self._held.clear()
            waiting = [entry.span for entry in self._waiting.values()]
            self._waiting.clear()
            self._waiting_traces.clear()
            self.waiting = 0
            self._spans = 0
            self._bytes = 0
        return released, waiting

    def _release(self, held: Held) -> None:
        # Caller holds the lock.
        self._bytes -= held.size
        self._spans -= 1 + len(held.retrievals)

    def close(self) -> tuple[list[Held], list[ReadableSpan]]:
        """Stop holding (later ``hold`` calls return False), stop the reaper, release all."""
        with self._lock:
            self._closed = True
            self._wake.notify_all()
        return self.release_all()

    def _enter_late(self, key: SpanKey, resource: Resource) -> None:
        # Caller holds the lock.
        self._late[key] = resource
        while len(self._late) > self._max_late:
            self._late.popitem(last=False)

    # --- introspection -------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Spans held now: units, and the retrieval spans with them or waiting for them."""
        return self._spans

    @property
    def bytes(self) -> int:
        """Estimated bytes held now."""
        return self._bytes

    # --- the reaper ------------------------------------------------------------------------

    def _reap_forever(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                expired = self._take_expired(now)
                stale = self._take_stale(now)
                if not expired and not stale:
                    fronts = [next(iter(self._held.values())).deadline] if self._held else []
                    if self._waiting:
                        fronts.append(next(iter(self._waiting.values())).deadline)
                    # Empty, it still looks within ``hold_timeout``: what came in since
                    # expires no earlier than that.
                    wait = min(fronts) - now if fronts else self._hold_timeout
                    self._wake.wait(timeout=wait)
                    continue
            self._on_expired(expired, stale)

    def _take_expired(self, now: float) -> list[Held]:
        # Caller holds the lock. Every span is held for the same timeout, so insertion
        # order is deadline order: only the front needs looking at.
        expired: list[Held] = []
        while self._held:
            key, held = next(iter(self._held.items()))
            if held.deadline > now:
                break
            self._held.popitem(last=False)
            self._release(held)
            self._enter_late(key, held.span.resource)
            expired.append(held)
        return expired

    def _take_stale(self, now: float) -> list[ReadableSpan]:
        # Caller holds the lock. Retrieval spans whose unit did not come in time; the same
        # timeout for all, so the front is the oldest here too.
        stale: list[Waiting] = []
        while self._waiting:
            key, waiting = next(iter(self._waiting.items()))
            if waiting.deadline > now:
                break
            self._waiting.popitem(last=False)
            self._unindex(key[0], waiting)
            stale.append(waiting)
        self._untrack(stale)
        return [waiting.span for waiting in stale]

    def _after_fork_in_child(self) -> None:
        # The parent still holds (and will forward) these spans; the child must not, and
        # the parent's lock and reaper thread are copies in an unknown state: start over.
        self._start(reaper=not self._closed)
