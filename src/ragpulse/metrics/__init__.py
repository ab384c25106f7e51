"""Metrics: one module per metric, and the user's own.

Each built-in metric is a module of this package that declares a ``METRIC``
(``ragpulse.metrics._spec.Metric``): its name, the record fields it needs, what the
judges must find for it and how each finds it, its arithmetic, threshold, explanation
under the content policy and extra span attributes. The registry finds the modules by
listing the package, so a new metric is one new module (and its tests).

Judges find what the asked metrics declare they need (``findings_for``) and hand it to
``_assemble.assemble``, which has each metric's module score it.

The user's metrics are ``@ragpulse.metric("name")`` functions and
``ragpulse.RubricMetric("name", criteria=...)``; see ``docs/metrics.md``.
"""

from __future__ import annotations

from ragpulse.metrics._custom import FunctionMetric, metric
from ragpulse.metrics._registry import (
    ALL_METRICS,
    METRICS,
    builtin_names,
    default_names,
    get,
    known,
    load_metric_module,
)
from ragpulse.metrics._rubric import RubricMetric
from ragpulse.metrics._spec import CustomMetric, Metric, ScoreInputs

__all__ = [
    "ALL_METRICS",
    "METRICS",
    "CustomMetric",
    "FunctionMetric",
    "Metric",
    "RubricMetric",
    "ScoreInputs",
    "builtin_names",
    "default_names",
    "get",
    "known",
    "load_metric_module",
    "metric",
]
