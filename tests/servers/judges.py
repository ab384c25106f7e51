"""Judges the tests plug in the way a user plugs in their own (``Judge`` is a public protocol):
one that answers from a script, and one that never answers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Collection

from ragpulse.evaluation.types import (
    GROUNDEDNESS,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Usage,
)

__all__ = ["HangingJudge", "ScriptedJudge", "ok"]


def ok(judge: str = "scripted", score: float = 0.9, tokens: int = 0) -> Evaluation:
    """A successful LLM evaluation of one call with a groundedness ``score``."""
    return Evaluation(
        status=EvalStatus.OK,
        metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, score)},
        judge=judge,
        annotator_kind="LLM",
        usage=Usage(calls=1, prompt_tokens=tokens),
    )


class ScriptedJudge:
    """Answers with ``outcomes`` in order (repeating the last); an exception is raised."""

    annotator_kind = "LLM"

    def __init__(self, *outcomes: Evaluation | BaseException | object, name: str = "scripted"):
        self.name = name
        self._outcomes = list(outcomes) or [ok(name)]
        self.calls = 0
        self.call_times: list[float] = []

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        outcome = self._outcomes[min(self.calls, len(self._outcomes) - 1)]
        self.calls += 1
        self.call_times.append(time.monotonic())
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[return-value]


class HangingJudge:
    """Never answers; ``started`` is set once it has been asked."""

    name = "hanging"
    annotator_kind = "LLM"

    def __init__(self) -> None:
        self.started = threading.Event()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")
