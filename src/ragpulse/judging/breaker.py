"""A circuit breaker for the judge: fail fast while it is down, probe to find it back up."""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable


class BreakerState(str, enum.Enum):
    """Where the breaker stands."""

    CLOSED = "closed"
    """Calls go through; consecutive failures are counted."""
    OPEN = "open"
    """Calls are refused until ``reset_timeout`` has passed since the breaker opened."""
    HALF_OPEN = "half_open"
    """One probe call is in flight; its outcome closes or re-opens the breaker."""


class CircuitBreaker:
    """Closed -> open after ``failure_threshold`` consecutive failures -> half-open probe.

    Every call asks ``allow()`` first and reports ``record_success()`` or
    ``record_failure()`` after. While open, ``allow()`` says no until
    ``reset_timeout`` seconds have passed; then exactly one caller is let through
    as a probe (half-open) and everyone else is still refused until it reports.
    """

    __slots__ = (
        "_clock",
        "_failures",
        "_lock",
        "_opened_at",
        "_reset_timeout",
        "_state",
        "_threshold",
    )

    def __init__(
        self,
        failure_threshold: int = 5,
        reset_timeout: float = 30.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold must be at least 1, got {failure_threshold!r}")
        if reset_timeout < 0:
            raise ValueError(f"reset_timeout must not be negative, got {reset_timeout!r}")
        self._threshold = failure_threshold
        self._reset_timeout = reset_timeout
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        # The worker's loop changes the state while other threads read ``state`` for
        # metrics; the open->half-open transition must hand out exactly one probe.
        self._lock = threading.Lock()

    @property
    def state(self) -> BreakerState:
        """The current state (an open breaker past its reset timeout still reads open)."""
        return self._state

    @property
    def is_open(self) -> bool:
        """True while calls are being refused or probed (open or half-open)."""
        return self._state is not BreakerState.CLOSED

    def allow(self) -> bool:
        """May a call go through now? In half-open, True only for the single probe."""
        with self._lock:
            if self._state is BreakerState.CLOSED:
                return True
            if (
                self._state is BreakerState.OPEN
                and self._clock() - self._opened_at >= self._reset_timeout
            ):
                self._state = BreakerState.HALF_OPEN
                return True
            return False

    def record_success(self) -> None:
        """The call worked: close the breaker and forget past failures."""
        with self._lock:
            self._state = BreakerState.CLOSED
            self._failures = 0

    def record_failure(self) -> None:
        """The call failed: count it; open on the threshold or when the probe failed."""
        with self._lock:
            self._failures += 1
            if self._state is BreakerState.HALF_OPEN or (
                self._state is BreakerState.CLOSED and self._failures >= self._threshold
            ):
                self._state = BreakerState.OPEN
                self._opened_at = self._clock()

    def release_probe(self) -> None:
        """The probe ended without an outcome (cancelled): let the next caller probe instead."""
        with self._lock:
            if self._state is BreakerState.HALF_OPEN:
                self._state = BreakerState.OPEN
                # Leave ``_opened_at`` as it is, so the next allow() probes at once.
