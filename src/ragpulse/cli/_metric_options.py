"""Options naming metrics, the same in every command: ``--metric-module`` (``ragpulse eval``,
``calibrate`` and ``serve``) and ``--threshold METRIC=VALUE`` (``eval`` and ``demo``)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping, Sequence

from ragpulse.cli._shared import _UsageError
from ragpulse.metrics import _registry as registry
from ragpulse.metrics._registry import load_metric_module

__all__ = [
    "METRIC_MODULE_HELP",
    "add_metric_module_option",
    "add_threshold_option",
    "declared_thresholds",
    "load_metric_modules",
    "threshold_overrides",
]

METRIC_MODULE_HELP = (
    "a file (mymetrics.py) or module defining your own metrics with @ragpulse.metric or "
    "ragpulse.RubricMetric; imported first, so --metrics may name them (repeatable; "
    "the modules of RAGPULSE_METRIC_MODULES are imported too)"
)


def add_metric_module_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add ``--metric-module FILE|MODULE`` (repeatable)."""
    parser.add_argument(
        "--metric-module",
        action="append",
        default=[],
        metavar="FILE|MODULE",
        help=METRIC_MODULE_HELP,
    )


def load_metric_modules(
    modules: Sequence[str], environ: Mapping[str, str] | None = None
) -> list[str]:
    """Import the modules the environment names (``RAGPULSE_METRIC_MODULES``, comma
    separated, as ``configure()`` reads it), then each of ``modules``; ``ValueError`` with
    one line saying which failed and why."""
    # Imported here: settings reads the metrics registry, which this package defines.
    from ragpulse.settings import variable_of

    variable = variable_of("metric_modules") or "RAGPULSE_METRIC_MODULES"
    given = (os.environ if environ is None else environ).get(variable, "")
    named = [(variable, m.strip()) for m in given.split(",") if m.strip()]
    named += [("--metric-module", module) for module in modules]
    registered: list[str] = []
    for source, module in named:
        try:
            registered.extend(load_metric_module(module))
        except (ImportError, ValueError) as exc:
            raise ValueError(f"{source} {module}: {exc}") from None
    return registered


def declared_thresholds(judge: str = "lexical") -> str:
    """``faithfulness 0.74, groundedness unlabelled, ...``: the thresholds ``judge`` labels by."""
    from ragpulse.judges._labels import label_policy

    policy = label_policy(judge)
    parts = []
    for name in registry.builtin_names():
        limit = policy[name].threshold
        parts.append(f"{name} {'unlabelled' if limit is None else f'{limit:g}'}")
    return ", ".join(parts)


def add_threshold_option(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--threshold METRIC=VALUE`` (repeatable); ``threshold_overrides`` reads it."""
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help=(
            f"{help} (repeatable; a threshold given labels a metric the judge scores "
            "unlabelled; default: the judge's declaration, the offline judge's: "
            f"{declared_thresholds()}; docs/judges.md, Labels)"
        ),
    )


def threshold_overrides(specs: Sequence[str]) -> dict[str, float]:
    """The thresholds ``--threshold METRIC=VALUE`` moves, by metric; ``_UsageError`` (one line,
    exit 2) for a value outside [0, 1], a missing ``=`` or a metric no one declared."""
    overrides: dict[str, float] = {}
    known = registry.known()
    for spec in specs:
        metric, sep, value = spec.partition("=")
        metric = metric.strip()
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not 0.0 <= number <= 1.0:
            raise _UsageError(
                f"--threshold expects METRIC=VALUE with VALUE in [0, 1]; got {spec!r}"
            )
        if metric not in known:
            raise _UsageError(
                f"--threshold {spec}: unknown metric; choose from {', '.join(known)} "
                "(your own: --metric-module)"
            )
        overrides[metric] = number
    return overrides
