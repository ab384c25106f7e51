"""``--metric-module``: the same option in ``ragpulse eval``, ``calibrate`` and ``serve``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence

from ragpulse.metrics._registry import load_metric_module

__all__ = ["METRIC_MODULE_HELP", "add_metric_module_option", "load_metric_modules"]

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
