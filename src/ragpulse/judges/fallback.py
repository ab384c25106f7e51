"""``FallbackJudge``: ask one judge, and another when the first one fails."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection

from ragpulse.evaluation.types import AnnotatorKind, EvalStatus, Evaluation, RagRecord
from ragpulse.judges.base import Judge

__all__ = ["FallbackJudge"]


class FallbackJudge:
    """Uses ``primary``; when its evaluation has status ``error``, uses ``fallback``.

    The result's ``judge`` and ``annotator_kind`` are those of the judge that produced
    it, its ``usage`` counts both judges' calls, and its explanation says why it fell
    back. When both fail, the primary's failure is returned (its ``error_type`` and
    ``retry_after`` are what a retry of the primary needs), noting the fallback's
    error too.

    ``primary`` and ``fallback`` are public so a caller that keeps its own circuit
    breaker (the ragpulse worker) can go to the fallback directly while the primary
    is down.
    """

    def __init__(self, primary: Judge, fallback: Judge, *, name: str | None = None) -> None:
        self.primary = primary
        self.fallback = fallback
        self.name = name or f"{primary.name}|{fallback.name}"
        # The kind of the judge that answers when all is well; each result carries its own.
        self.annotator_kind: AnnotatorKind = primary.annotator_kind

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """The primary's evaluation, or the fallback's when the primary errs."""
        first = await _evaluate_safely(self.primary, record, metrics)
        if first.status is not EvalStatus.ERROR:
            return first
        second = await _evaluate_safely(self.fallback, record, metrics)
        why = f"{self.primary.name} failed ({first.error_type})"
        if first.explanation:
            why = f"{why}: {first.explanation}"
        usage = first.usage + second.usage
        duration_ms = first.duration_ms + second.duration_ms
        if second.status is EvalStatus.ERROR:
            return dataclasses.replace(
                first,
                usage=usage,
                duration_ms=duration_ms,
                explanation=(
                    f"{why}; fallback {self.fallback.name} failed too ({second.error_type})"
                ),
            )
        explanation = f"fell back to {self.fallback.name}: {why}"
        if second.explanation:
            explanation = f"{explanation}. {second.explanation}"
        return dataclasses.replace(
            second, usage=usage, duration_ms=duration_ms, explanation=explanation
        )


async def _evaluate_safely(judge: Judge, record: RagRecord, metrics: Collection[str]) -> Evaluation:
    """``judge.evaluate``, with a judge that breaks the no-raise contract kept in line."""
    started = time.perf_counter()
    try:
        return await judge.evaluate(record, metrics)
    except Exception as exc:  # a third-party judge may raise; ours never do
        return Evaluation.failed(
            "unexpected",
            judge=judge.name,
            annotator_kind=judge.annotator_kind,
            explanation=f"{type(exc).__name__}: {exc}",
            duration_ms=(time.perf_counter() - started) * 1000.0,
        )
