"""The user's own metrics: a function of the record, or a rubric one LLM call scores.

Both kinds land where the built-ins do (span attributes, the score histogram, log
events, ``ragpulse eval``, the report, ``calibrate``, the alert rules). A metric that
raises, exits, hangs past its ``timeout``, prints, returns something that is not a score in
[0, 1], or whose call fails, is an ``error`` of that metric for that record (explained,
counted as ``metric_failed``); the rest of the evaluation stands (``_boundary``).

A function metric of an importable module runs in a process of its own, which imports it
by reference (its module and name): define it in an importable module (``ragpulse eval
--metric-module mymetrics.py`` puts a file's directory on the path).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragpulse._guard import Guard
from ragpulse.evaluation.types import (
    AnnotatorKind,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Usage,
)
from ragpulse.metrics import _registry
from ragpulse.metrics._boundary import (
    DEFAULT_METRIC_TIMEOUT,
    MetricBoundary,
    in_main_script,
    measure_safely,
)
from ragpulse.metrics._spec import DEFAULT_THRESHOLD, Exported, Metric

__all__ = [
    "CustomMetric",
    "CustomMetricsJudge",
    "FunctionMetric",
    "MetricFunction",
    "measure_safely",
    "metric",
    "with_custom_metrics",
]

_guard = Guard(__name__)

MetricFunction = Callable[[RagRecord], float | MetricResult | None]
_F = TypeVar("_F", bound=Callable[..., Any])
_EXPLANATION_CHARS = 300


def explain_free_text(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """A user metric's explanation is free text: redacted whole, then cut, or withheld."""
    if not result.explanation:
        return None
    text = ex.text(result.explanation)
    return text if len(text) <= _EXPLANATION_CHARS else text[: _EXPLANATION_CHARS - 1] + "…"


def user_spec(name: str, description: str, threshold: float | None) -> Metric:
    """The declaration of a user's metric."""
    if not name or not name.replace("_", "").isalnum() or not name[0].isalpha():
        raise ValueError(f"metric name {name!r}: use letters, digits and underscores")
    return Metric(
        name=name,
        description=description,
        needs=("record",),
        findings=(),
        judges={"any": "the metric computes itself, after the judge"},
        threshold=threshold,
        explain=explain_free_text,
        content=("explanation",),
        order=1000,
    )


@runtime_checkable
class CustomMetric(Protocol):
    """A user's metric: its declaration, and how it measures one record."""

    @property
    def spec(self) -> Metric:
        """The metric's declaration (name, threshold, explanation policy)."""
        ...

    def measure(self, record: RagRecord) -> Awaitable[tuple[MetricResult, Usage]]:
        """The metric's result for ``record`` (may raise: ``measure_safely`` contains it)."""
        ...


def as_result(name: str, value: object) -> MetricResult:
    """What a metric returned as a result; ``ValueError`` when it is not a score in [0, 1]."""
    if value is None:
        return MetricResult(name, None, "undefined for this record", EvalStatus.NO_CLAIMS)
    if isinstance(value, MetricResult):
        score: object = value.score
        explanation = value.explanation
        status = value.status
    else:
        score, explanation, status = value, None, EvalStatus.OK
    if score is None:
        return MetricResult(name, None, explanation, EvalStatus.NO_CLAIMS)
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise ValueError(f"returned {type(score).__name__}, not a score in [0, 1]")
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise ValueError(f"returned {score!r}, outside [0, 1]")
    return MetricResult(name, float(score), explanation, status)


@dataclass(frozen=True, eq=False)
class FunctionMetric:
    """A metric computed by a function of the record (sync or async)."""

    spec: Metric
    function: Callable[[RagRecord], Any]
    timeout: float = DEFAULT_METRIC_TIMEOUT
    """Seconds it may take on one record; past them it is an ``error`` of this metric."""

    @property
    def qualname(self) -> str:
        """Where the function is defined: its module and name."""
        return f"{self.function.__module__}.{self.function.__qualname__}"

    async def measure(self, record: RagRecord) -> tuple[MetricResult, Usage]:
        """Call the function; its value becomes the result."""
        value = self.function(record)
        if inspect.isawaitable(value):
            value = await value
        return as_result(self.spec.name, value), Usage()


def metric(
    name: str,
    *,
    threshold: float | None = DEFAULT_THRESHOLD,
    description: str = "",
    timeout: float = DEFAULT_METRIC_TIMEOUT,
) -> Callable[[_F], _F]:
    """Register a function of a ``RagRecord`` as the metric ``name``.

    The function returns a score in [0, 1], a ``MetricResult`` (a score with an
    explanation), or ``None`` when the metric is undefined for the record. It is returned
    unchanged, so it stays importable (and picklable) by its own name. ``threshold`` sets
    its pass/fail label (``None``: no label). ``timeout`` bounds one record's measure (a
    metric of an importable module runs in a process of its own, killed past it).
    """
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"metric {name!r}: timeout must be a positive number of seconds")

    def register(function: _F) -> _F:
        spec = user_spec(name, description or (function.__doc__ or name).strip(), threshold)
        _registry.register(FunctionMetric(spec, function, float(timeout)))
        return function

    return register


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

    def __getstate__(self) -> dict[str, Any]:
        # A metric's process belongs to the process that started it; a copy starts its own.
        state = dict(self.__dict__)
        state["_boundaries"] = {}
        return state

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
