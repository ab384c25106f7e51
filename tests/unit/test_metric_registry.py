"""One metric, one module: the registry finds each built-in metric by its module alone."""

from __future__ import annotations

import importlib
import pkgutil

import ragpulse.metrics
from ragpulse.metrics import ALL_METRICS, METRICS, _registry
from ragpulse.metrics._spec import Metric
from ragpulse.signals.emit import DEFAULT_THRESHOLDS


def _modules() -> list[str]:
    return [m.name for m in pkgutil.iter_modules(ragpulse.metrics.__path__) if m.name[0] != "_"]


def test_every_public_module_of_the_package_declares_one_metric_named_like_it() -> None:
    for name in _modules():
        metric = importlib.import_module(f"ragpulse.metrics.{name}").METRIC
        assert isinstance(metric, Metric)
        assert metric.name == name


def test_the_built_in_metrics_are_the_modules_in_their_declared_order() -> None:
    assert set(METRICS) == set(_modules())
    orders = [_registry.get(name).order for name in METRICS]  # type: ignore[union-attr]
    assert orders == sorted(orders)


def test_the_default_set_is_faithfulness_groundedness_correctness() -> None:
    assert ALL_METRICS == ("faithfulness", "groundedness", "correctness")


def test_thresholds_come_from_the_metric_modules() -> None:
    assert DEFAULT_THRESHOLDS["correctness"] == 0.5
    assert DEFAULT_THRESHOLDS["context_recall"] == 0.7
    # A share to read, not to pass: no threshold, no label.
    assert "context_utilisation" not in DEFAULT_THRESHOLDS


def test_findings_name_what_the_judges_must_find_for_the_asked_metrics() -> None:
    assert "passage_help" in _registry.findings_for(["context_precision"])
    assert "passage_help" not in _registry.findings_for(["faithfulness", "context_recall"])
