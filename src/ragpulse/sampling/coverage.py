"""``Coverage``: how much of what the sample rate asked for was evaluated, and the feedback.

The processor tells it, per evaluation unit, that the sampler asked for an
evaluation (``asked``), that one was dropped and why (``dropped``: queue full,
over budget, or held back by the lowered rate), and the sink tells it when one
came back (``completed``). Counts live in one-second buckets over a sliding
``window`` (bounded: one bucket a second of the window).

From them, at most once a second:

- ``value()``: evaluations completed / evaluations asked for over the window, the
  ``ragpulse.evaluator.coverage`` gauge;
- the sampler's throttle: while evaluations are dropped, the effective rate is
  lowered to what the judge sustains (completions a second over the window, as a
  share of what the configured rate asks for a second), so the sample stays spread
  over time instead of arriving in bursts the queue refuses; once drops stop it
  climbs back by ``RECOVERY_STEP`` a second up to the configured rate;
- a warning, at most once a minute, while more than 5 % of what was asked for is dropped
  (evaluations still running count as neither dropped nor completed).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

from ragpulse import errors
from ragpulse.sampling.sampler import EvalSampler

__all__ = ["HEADROOM", "MIN_FACTOR", "RECOVERY_STEP", "Coverage"]

# Throttled here, once a WARN_INTERVAL on the sampler's clock (the guard's filter runs on
# the wall clock, which a test cannot move).
_logger = logging.getLogger("ragpulse.coverage")

HEADROOM = 0.9
"""Share of the sustained throughput the lowered rate aims at, so the queue drains."""
MIN_FACTOR = 0.01
"""The effective rate is never lowered below this share of the configured rate."""
RECOVERY_STEP = 1.1
"""Factor by which the effective rate climbs back each second without a drop."""
WARN_INTERVAL = 60.0
"""Seconds between two coverage warnings."""
_WARN_BELOW = 0.95
"""Coverage under this share of what the rate asked for is worth a warning."""
# Drops that say nothing of what the judge sustains: they never lower the rate.
_NOT_CAPACITY = frozenset({errors.REASON_THROTTLED, errors.NO_EVIDENCE})


class _Bucket:
    __slots__ = ("asked", "completed", "drops", "second")

    def __init__(self, second: int) -> None:
        self.second = second
        self.asked = 0
        self.completed = 0
        self.drops: dict[str, int] = {}


class Coverage:
    """Counts asked, dropped and completed evaluations; steers ``sampler``'s throttle.

    Thread-safe: request threads ask and drop, worker threads complete.
    """

    def __init__(
        self,
        sampler: EvalSampler,
        *,
        window: float = 60.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not window >= 1.0:
            raise ValueError(f"window must be at least 1 second, got {window!r}")
        self._sampler = sampler
        self._window = int(window)
        self._clock = clock or sampler.clock
        self._lock = threading.Lock()
        self._buckets: collections.deque[_Bucket] = collections.deque(maxlen=self._window)
        self._adjusted_at: int | None = None
        self._dropped_since_adjust = 0
        self._warned_at: float | None = None

    # --- counting ---------------------------------------------------------------------

    def asked(self) -> None:
        """The sampler (rate or a rule) asked for one evaluation."""
        with self._lock:
            self._bucket().asked += 1
            self._maybe_adjust()

    def dropped(self, reason: str) -> None:
        """An asked-for evaluation did not run (a ``ragpulse.errors.REASON_*`` value)."""
        with self._lock:
            drops = self._bucket().drops
            drops[reason] = drops.get(reason, 0) + 1
            if reason not in _NOT_CAPACITY:
                self._dropped_since_adjust += 1
            self._maybe_adjust()

    def completed(self) -> None:
        """One evaluation came back."""
        with self._lock:
            self._bucket().completed += 1
            self._maybe_adjust()

    # --- reading ----------------------------------------------------------------------

    def value(self) -> float | None:
        """Completed / asked over the window (at most 1); ``None`` while nothing was asked."""
        with self._lock:
            self._expire(int(self._clock()))
            asked, completed, _ = self._totals()
        if asked == 0:
            return None
        return min(1.0, completed / asked)

    def main_reason(self) -> str | None:
        """The most frequent reason evaluations were dropped over the window."""
        with self._lock:
            self._expire(int(self._clock()))
            _, _, drops = self._totals()
        return max(drops, key=lambda reason: drops[reason]) if drops else None

    # --- inside the lock --------------------------------------------------------------

    def _bucket(self) -> _Bucket:
        second = int(self._clock())
        if not self._buckets or self._buckets[-1].second != second:
            self._expire(second)
            self._buckets.append(_Bucket(second))
        return self._buckets[-1]

    def _expire(self, second: int) -> None:
        while self._buckets and self._buckets[0].second <= second - self._window:
            self._buckets.popleft()

    def _totals(self, *, whole_seconds: bool = False) -> tuple[int, int, dict[str, int]]:
        asked = completed = 0
        drops: dict[str, int] = {}
        for bucket in self._buckets:
            if whole_seconds and bucket is self._buckets[-1]:
                break  # the second just begun: one event, not yet a rate
            asked += bucket.asked
            completed += bucket.completed
            for reason, count in bucket.drops.items():
                drops[reason] = drops.get(reason, 0) + count
        return asked, completed, drops

    def _maybe_adjust(self) -> None:
        now = self._buckets[-1].second
        if self._adjusted_at is None:
            self._adjusted_at = now
            return
        if now == self._adjusted_at:
            return
        self._adjusted_at = now
        asked, completed, drops = self._totals(whole_seconds=True)
        factor = self._sampler.throttle
        if self._dropped_since_adjust:
            # Rates over the same span, so the span cancels: what the judge finished as a
            # share of what the configured rate asked for.
            sustained = completed / asked if asked else 0.0
            factor = max(MIN_FACTOR, min(1.0, HEADROOM * sustained))
        elif factor < 1.0:
            factor = min(1.0, factor * RECOVERY_STEP)
        self._dropped_since_adjust = 0
        self._sampler.set_throttle(factor)
        self._warn(asked, completed, drops)

    def _warn(self, asked: int, completed: int, drops: dict[str, int]) -> None:
        # Judged on what was dropped, not on what has come back: an evaluation still running is
        # neither (on a busy machine most of the last seconds' are), and calling it missing
        # made the warning say "0 of 4 completed" of four evaluations three of which then came.
        dropped = sum(drops.values())
        if not asked or not dropped or dropped <= (1.0 - _WARN_BELOW) * asked:
            return
        now = self._clock()
        if self._warned_at is not None and now - self._warned_at < WARN_INTERVAL:
            return
        self._warned_at = now
        reason = max(drops, key=lambda r: drops[r])
        rate = self._sampler.rate
        effective = self._sampler.effective_rate
        running = max(0, asked - completed - dropped)
        lowered = f"; effective rate lowered to {effective:.3g}" if effective < rate else ""
        _logger.warning(
            "ragpulse: evaluation coverage %.0f%% at sample rate %g: %d of %d evaluations asked "
            "for in the last %d s were dropped, main reason %s (%d); %d completed, %d still "
            "running%s",
            100.0 * (asked - dropped) / asked,
            rate,
            dropped,
            asked,
            self._window,
            reason,
            drops[reason],
            completed,
            running,
            lowered,
        )
