"""The user's own metrics measured after a judge, each behind its own boundary."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from ragpulse._guard import Guard
from ragpulse.evaluation.types import (
    AnnotatorKind,
    EvalStatus,
    Evaluation,
    RagRecord,
)
from ragpulse.judging.metric_boundary import (
    MetricBoundary,
    in_main_script,
)
from ragpulse.metrics import _registry
from ragpulse.metrics._spec import CustomMetric

__all__ = ["CustomMetricsJudge", "with_custom_metrics"]

_guard = Guard(__name__)


class CustomMetricsJudge:
    """Wraps a judge: the judge computes the built-ins, then each user metric is measured.

    Runs where the wrapped judge runs (in its child processes when it is CPU-bound); each
    user metric is measured behind its own boundary (``MetricBoundary``), one after another.
    """

    def __init__(self, judge: Any, metrics: Sequence[CustomMetric]) -> None:
        self.judge = judge
        self.metrics = tuple(metrics)
        self.name: str = judge.name
        self.annotator_kind: AnnotatorKind = judge.annotator_kind
        # A function of the __main__ script cannot be imported by a child process (it would
        # run the script): with one, the judge stays on the worker thread, said once.
        scripted = [m.spec.name for m in self.metrics if in_main_script(m)]
        cpu_bound = getattr(judge, "cpu_bound", False) is True
        self.cpu_bound: bool = cpu_bound and not scripted
        if cpu_bound and scripted:
            _guard.warning(
                "metric %s is defined in the __main__ script, so judge %s runs on the worker "
                "thread, not in its own processes; define it in an importable module "
                "(metric_modules=, --metric-module) to run it there",
                ", ".join(scripted),
                self.name,
            )
        self._boundaries: dict[str, MetricBoundary] = {}
        if not self.cpu_bound:
            self._start()  # it runs here: the metrics' processes start with the application

    def __getstate__(self) -> dict[str, Any]:
        # A metric's process belongs to the process that started it; a copy starts its own.
        state = dict(self.__dict__)
        state["_boundaries"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A copy is made to run (a judge's process receives it): its metrics' processes
        # start now, beside the judge's own start-up, not when the first record needs them.
        self.__dict__.update(state)
        self._start()

    def _start(self) -> None:
        """Start each user metric's process (where it has one) ahead of the first record."""
        for metric in self.metrics:
            with _guard("ragpulse: could not start a metric's process"):
                self._boundary(metric).start()

    def _boundary(self, metric: CustomMetric) -> MetricBoundary:
        boundary = self._boundaries.get(metric.spec.name)
        if boundary is None:
            boundary = self._boundaries[metric.spec.name] = MetricBoundary(metric)
        return boundary

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """The judge's evaluation with the asked user metrics beside its own; never raises."""
        started = time.perf_counter()
        own = {m.spec.name for m in self.metrics}
        builtin = [m for m in metrics if m not in own]
        if builtin:
            evaluation: Evaluation = await self.judge.evaluate(record, builtin)
        else:
            evaluation = Evaluation(EvalStatus.OK, {}, judge=self.name,
                                    annotator_kind=self.annotator_kind)  # fmt: skip
        if evaluation.status is EvalStatus.ERROR:
            return evaluation
        results = dict(evaluation.metrics)
        usage = evaluation.usage
        for user in self.metrics:
            if user.spec.name in metrics:
                result, spent = await self._boundary(user).measure(record)
                results[user.spec.name] = result
                usage = usage + spent
        status = evaluation.status
        if status is EvalStatus.SKIPPED and any(r.score is not None for r in results.values()):
            status = EvalStatus.OK
        took = (time.perf_counter() - started) * 1000.0
        return replace(
            evaluation,
            status=status,
            metrics=results,
            usage=usage,
            duration_ms=max(evaluation.duration_ms, took),
        )

    async def aclose(self) -> None:
        """End the metrics' processes; close the wrapped judge, when it can be closed."""
        boundaries, self._boundaries = self._boundaries, {}
        for boundary in boundaries.values():
            boundary.close()
        close = getattr(self.judge, "aclose", None)
        if close is not None:
            await close()


def custom_metrics(names: Collection[str]) -> list[CustomMetric]:
    """The user's metrics among ``names``, registered in this process."""
    found = (_registry.custom(name) for name in names)
    return [m for m in found if m is not None]


def with_custom_metrics(judge: Any, names: Collection[str]) -> Any:
    """``judge`` wrapped to measure the user's metrics among ``names``; else ``judge``
    (also when it already measures them)."""
    users = custom_metrics(names)
    if not users or isinstance(judge, CustomMetricsJudge):
        return judge
    return CustomMetricsJudge(judge, users)
