"""Where metrics are found: the built-in modules of this package, then the user's own.

A built-in metric is a module of ``ragpulse.metrics`` (a name without a leading
underscore) that defines ``METRIC``; it is found by listing the package, so adding one
touches that module alone. A user's metric (``@ragpulse.metric``, ``RubricMetric``) is
registered when it is made. Names are unique: a second metric of a taken name is refused.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from ragpulse.metrics._spec import CustomMetric, Metric

__all__ = [
    "ALL_METRICS",
    "METRICS",
    "builtin_names",
    "custom",
    "default_names",
    "default_thresholds",
    "findings_for",
    "get",
    "known",
    "load_metric_module",
    "register",
]

_lock = threading.Lock()
_builtin: dict[str, Metric] | None = None
_custom: dict[str, CustomMetric] = {}


def _discover() -> dict[str, Metric]:
    global _builtin
    if _builtin is None:
        package = importlib.import_module("ragpulse.metrics")
        found: list[Metric] = []
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"ragpulse.metrics.{info.name}")
            metric = getattr(module, "METRIC", None)
            if isinstance(metric, Metric):
                found.append(metric)
        found.sort(key=lambda m: (m.order, m.name))
        _builtin = {m.name: m for m in found}
    return _builtin


def builtin_names() -> tuple[str, ...]:
    """Every built-in metric, in their order."""
    return tuple(_discover())


def default_names() -> tuple[str, ...]:
    """The metrics computed when none are named."""
    return tuple(name for name, m in _discover().items() if m.default)


def known() -> tuple[str, ...]:
    """The built-ins, then the user's metrics registered in this process."""
    with _lock:
        names = tuple(_custom)
    return (*builtin_names(), *names)


def get(name: str) -> Metric | None:
    """The declaration of ``name``; ``None`` when no metric has that name."""
    metric = _discover().get(name)
    if metric is not None:
        return metric
    with _lock:
        user = _custom.get(name)
    return None if user is None else user.spec


def findings_for(metrics: Iterable[str]) -> frozenset[str]:
    """What the judges must find for ``metrics`` (their modules' ``findings``)."""
    wanted: set[str] = set()
    for name in metrics:
        metric = get(name)
        if metric is not None:
            wanted.update(metric.findings)
    return frozenset(wanted)


def custom(name: str) -> CustomMetric | None:
    """The user's metric ``name``, registered in this process; ``None`` otherwise."""
    with _lock:
        return _custom.get(name)


def default_thresholds() -> dict[str, float]:
    """Each known metric's pass/fail threshold, as its module declares it."""
    thresholds = {n: m.threshold for n, m in _discover().items() if m.threshold is not None}
    with _lock:
        users = list(_custom.items())
    thresholds.update({n: m.spec.threshold for n, m in users if m.spec.threshold is not None})
    return thresholds


def register(metric: CustomMetric) -> None:
    """Make ``metric`` known by its name; ``ValueError`` when a different one has it."""
    name = metric.spec.name
    if name in _discover():
        raise ValueError(f"metric name {name!r} is a built-in metric's; choose another")
    with _lock:
        current = _custom.get(name)
        # Re-importing the module that defines it (a reload, a child process) re-registers it.
        same = getattr(current, "qualname", None) == getattr(metric, "qualname", object())
        if current is not None and current is not metric and not same:
            raise ValueError(f"another metric is already named {name!r}")
        _custom[name] = metric


def load_metric_module(spec: str) -> list[str]:
    """Import the user's metrics from a file (``mymetrics.py``) or a module name.

    A file's directory joins ``sys.path`` and the file is imported by its module name,
    so its functions pickle by reference and a judge's child processes (which inherit
    ``sys.path``) import them too. Returns the names of the metrics it registered.
    ``ImportError`` says why it could not be imported.
    """
    before = set(known())
    path = Path(spec)
    try:
        is_file = path.is_file()
    except (OSError, ValueError) as exc:  # a name no file system takes (too long, a NUL)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ImportError(f"not a metric module's file or name: {spec[:100]!r} ({why})") from None
    if spec.endswith(".py") or is_file:
        if not is_file:
            raise ImportError(f"no metric module at {spec}")
        directory = str(path.resolve().parent)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        name = path.stem
    else:
        name = spec
    try:
        importlib.import_module(name)
    except ImportError:
        raise
    except Exception as exc:  # the user's module failed while it ran
        raise ImportError(f"metric module {spec} failed to import: {exc!r}") from exc
    return [n for n in known() if n not in before]


def thresholds_with(overrides: Mapping[str, float] | None) -> dict[str, float]:
    """The declared thresholds with ``overrides`` on top."""
    merged = default_thresholds()
    if overrides:
        merged.update(overrides)
    return merged


METRICS: tuple[str, ...] = builtin_names()
"""Every built-in metric, in order: the whole vector, read together and never averaged."""
ALL_METRICS: tuple[str, ...] = default_names()
"""The metrics computed when none are named."""
