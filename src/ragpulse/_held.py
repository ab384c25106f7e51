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

A reaper thread forwards spans past their deadline through ``on_expired``. The
lock is never held while calling it, or anything else outside this module.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["DEFAULT_MAX_LATE", "Held", "HeldSpans", "SpanKey"]

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
    """Estimated bytes."""


OnExpired = Callable[[list[Held]], None]


class HeldSpans:
    """The table of units under evaluation: held spans and the late ones' resources.

    Args:
        hold_timeout: seconds a span may be held before ``on_expired`` gets it.
        max_spans, max_bytes: bounds on what is held at once.
        on_expired: called on the reaper thread with spans past their deadline,
            already turned late; the caller forwards them.
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
        self._bytes = 0
        self._late: OrderedDict[SpanKey, Resource] = OrderedDict()
        if reaper:
            threading.Thread(
                target=self._reap_forever, name="ragpulse-hold-reaper", daemon=True
            ).start()

    # --- entries -------------------------------------------------------------------------

    def hold(self, key: SpanKey, span: ReadableSpan, size: int) -> bool:
        """Make the entry of a unit about to be submitted.

        True: the span is held. False: it would pass a bound (or the table is
        closed); it is entered late, and the caller forwards it as pending.
        """
        now = time.monotonic()
        with self._lock:
            self._last_resource = span.resource
            fits = (
                not self._closed
                and len(self._held) < self._max_spans
                and self._bytes + size <= self._max_bytes
            )
            if not fits:
                self._enter_late(key, span.resource)
                return False
            self._held[key] = Held(span, now, now + self._hold_timeout, size)
            self._bytes += size
            if len(self._held) == 1:
                self._wake.notify()
            return True

    def settle(self, key: SpanKey) -> Held | Resource:
        """Take the entry of a returned evaluation.

        The held span to forward with its scores, or, when the span already
        went out, the resource its carrier span takes.
        """
        with self._lock:
            held = self._held.pop(key, None)
            if held is not None:
                self._bytes -= held.size
                return held
            return self._late.pop(key, self._last_resource)

    def forget(self, key: SpanKey) -> bool:
        """Drop the entry of a unit that was not submitted after all.

        True when its span was still held: nobody forwarded it, the caller must.
        """
        with self._lock:
            self._late.pop(key, None)
            held = self._held.pop(key, None)
            if held is None:
                return False
            self._bytes -= held.size
            return True

    def release_all(self) -> list[Held]:
        """Turn every held span late and return them, for a flush or a shutdown to forward."""
        with self._lock:
            released = list(self._held.values())
            for key, held in self._held.items():
                self._enter_late(key, held.span.resource)
            self._held.clear()
            self._bytes = 0
        return released

    def close(self) -> list[Held]:
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
        """Spans held now."""
        return len(self._held)

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
                expired = self._take_expired(time.monotonic())
                if not expired:
                    wait = None
                    if self._held:
                        wait = next(iter(self._held.values())).deadline - time.monotonic()
                    self._wake.wait(timeout=wait)
                    continue
            self._on_expired(expired)

    def _take_expired(self, now: float) -> list[Held]:
        # Caller holds the lock. Every span is held for the same timeout, so insertion
        # order is deadline order: only the front needs looking at.
        expired: list[Held] = []
        while self._held:
            key, held = next(iter(self._held.items()))
            if held.deadline > now:
                break
            self._held.popitem(last=False)
            self._bytes -= held.size
            self._enter_late(key, held.span.resource)
            expired.append(held)
        return expired

    def _after_fork_in_child(self) -> None:
        # The parent still holds (and will forward) these spans; the child must not, and
        # the parent's lock and reaper thread are copies in an unknown state: start over.
        self._start(reaper=not self._closed)
