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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ragpulse._guard import Guard
from ragpulse.evaluation.types import (
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Usage,
)
from ragpulse.metrics import _registry
from ragpulse.metrics._spec import (
    DEFAULT_METRIC_TIMEOUT,
    DEFAULT_THRESHOLD,
    CustomMetric,
    Exported,
    Metric,
)

__all__ = [
    "CustomMetric",
    "FunctionMetric",
    "MetricFunction",
    "metric",
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
