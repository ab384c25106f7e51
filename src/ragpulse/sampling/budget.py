"""``EvaluationBudget``: the evaluations-per-minute cap on what the processor admits."""

from __future__ import annotations

import time
from collections.abc import Callable

from ragpulse._bucket import TokenBucket

__all__ = ["EvaluationBudget"]


class EvaluationBudget:
    """Admits at most ``per_minute`` evaluations a minute, bursting up to one minute's worth.

    A cost cap, so it applies to every evaluation, forced ones included: a flag
    set on every request must not blow through it. Thread-safe: request threads
    ask at once.
    """

    __slots__ = ("_bucket", "_per_minute")

    def __init__(self, per_minute: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not per_minute > 0:
            raise ValueError(f"per_minute must be positive, got {per_minute!r}")
        self._per_minute = float(per_minute)
        self._bucket = TokenBucket.per_period(per_minute, 60.0, clock=clock)

    @property
    def per_minute(self) -> float:
        """The cap."""
        return self._per_minute

    def admit(self) -> bool:
        """Spend one evaluation; False (nothing spent) while the minute's budget is gone."""
        return self._bucket.try_take()
