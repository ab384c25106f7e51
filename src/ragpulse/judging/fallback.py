"""``FallbackJudge``: ask one judge, and another when the first one cannot answer."""

from __future__ import annotations

from typing import Any

from ragpulse.judges.base import Judge
from ragpulse.judging.resilient import ResilientJudge

__all__ = ["FallbackJudge"]


class FallbackJudge(ResilientJudge):
    """``ResilientJudge(primary, fallback=fallback)``, named for what it is most used for.

    Uses ``primary`` (retried, behind its circuit breaker and token budget); when its
    result is still an error, or the breaker is open, or the budget is spent,
    ``fallback`` answers and its result says why. The result's ``judge`` and
    ``annotator_kind`` are those of the judge that produced it and its ``usage``
    counts every call. Keyword arguments are those of ``ResilientJudge``.
    """

    def __init__(self, primary: Judge, fallback: Judge, **options: Any) -> None:
        super().__init__(primary, fallback=fallback, **options)
