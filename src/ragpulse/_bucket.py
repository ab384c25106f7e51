"""A token bucket: the budget behind ``max_evaluations_per_minute`` and judge tokens per hour."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """Holds up to ``capacity`` tokens and refills ``refill_per_second`` of them continuously.

    ``try_take`` spends tokens only when there are enough (an evaluation is admitted or not);
    ``spend`` always spends and may leave the bucket in debt, because judge tokens are known
    only after the judge answered, and the debt must be repaid before ``available`` says yes
    again. Thread-safe: request threads take while the worker thread spends.
    """

    __slots__ = ("_capacity", "_clock", "_level", "_lock", "_rate", "_updated")

    def __init__(
        self,
        capacity: float,
        refill_per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity!r}")
        if refill_per_second < 0:
            raise ValueError(f"refill_per_second must not be negative, got {refill_per_second!r}")
        self._capacity = float(capacity)
        self._rate = float(refill_per_second)
        self._clock = clock
        # Starts full: a freshly started service may evaluate its first burst.
        self._level = self._capacity
        self._updated = clock()
        # Refill-then-take is a read-modify-write of two fields; without the lock two
        # request threads could both see the last token and both take it.
        self._lock = threading.Lock()

    @classmethod
    def per_period(
        cls,
        amount: float,
        period_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> TokenBucket:
        """Admits ``amount`` per ``period_seconds``, bursting up to one period's worth."""
        return cls(amount, amount / period_seconds, clock=clock)

    @property
    def capacity(self) -> float:
        """The most tokens the bucket holds."""
        return self._capacity

    def _refill(self) -> None:
        # Caller holds the lock.
        now = self._clock()
        elapsed = now - self._updated
        if elapsed > 0:
            self._level = min(self._capacity, self._level + elapsed * self._rate)
        # A clock that goes backwards (a test clock, a VM migration) must not mint tokens.
        self._updated = max(now, self._updated)

    def try_take(self, amount: float = 1.0) -> bool:
        """Take ``amount`` tokens if the bucket has them; False (and nothing taken) otherwise."""
        with self._lock:
            self._refill()
            if self._level >= amount:
                self._level -= amount
                return True
            return False

    def spend(self, amount: float) -> None:
        """Take ``amount`` tokens unconditionally; the level may go below zero (debt)."""
        if amount <= 0:
            return
        with self._lock:
            self._refill()
            self._level -= amount

    def available(self) -> float:
        """Tokens available now (negative while in debt)."""
        with self._lock:
            self._refill()
            return self._level
