"""``--metric-module``: the same option in ``ragpulse eval``, ``calibrate`` and ``serve``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ragpulse.metrics._registry import load_metric_module

__all__ = ["METRIC_MODULE_HELP", "add_metric_module_option", "load_metric_modules"]

METRIC_MODULE_HELP = (
    "a file (mymetrics.py) or module defining your own metrics with @ragpulse.metric or "
    "ragpulse.RubricMetric; imported first, so --metrics may name them (repeatable)"
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


def load_metric_modules(modules: Sequence[str]) -> list[str]:
    """Import each module; ``ValueError`` with one line saying which failed and why."""
    registered: list[str] = []
    for module in modules:
        try:
            registered.extend(load_metric_module(module))
        except (ImportError, ValueError) as exc:
            raise ValueError(f"--metric-module {module}: {exc}") from None
    return registered
