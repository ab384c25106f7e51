"""The attributes a user names for the score histogram and the label counter, and their bound.

``RAGPULSE_METRIC_ATTRIBUTES=service.version,gen_ai.request.model`` puts those attributes of
the evaluated span (or of its resource, or of the record ``@generation`` filled) on every
score and label point, so a drop is seen per deploy or per model. Each distinct combination
of their values is a series per metric and label, so ``MetricDimensions`` keeps at most
``limit`` combinations; points of any later one carry ``otel.metric.overflow=true`` instead
of the named attributes, as the OpenTelemetry SDK's cardinality limit does, while keeping the
service, unit and metric the alerts group by (the SDK's own limit folds those into its
overflow point too, which would hide the scores from every alert).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from ragpulse import semconv
from ragpulse.evaluation.types import RagRecord

__all__ = ["MetricDimensions", "pick", "with_unit_attributes"]

_VALUE_TYPES = (str, bool, int, float)


def pick(names: tuple[str, ...], *sources: Mapping[str, Any] | None) -> dict[str, Any]:
    """The attributes ``names`` from the first of ``sources`` that has each (plain values
    only: a metric attribute must be low-cardinality and hashable)."""
    found: dict[str, Any] = {}
    for name in names:
        for source in sources:
            value = source.get(name) if source else None
            if isinstance(value, _VALUE_TYPES):
                found[name] = value
                break
    return found


def with_unit_attributes(
    record: RagRecord, span: ReadableSpan, names: tuple[str, ...]
) -> RagRecord:
    """``record`` with the attributes ``names`` it lacks, read from its unit's span, then
    from the span's resource (``service.version`` lives there)."""
    resource = span.resource.attributes if span.resource is not None else None
    picked = pick(names, record.attributes, span.attributes, resource)
    if all(record.attributes.get(k) == v for k, v in picked.items()):
        return record
    return dataclasses.replace(record, attributes={**record.attributes, **picked})


class MetricDimensions:
    """Keeps at most ``limit`` combinations of the named attributes' values.

    ``bound`` is called on the worker thread for every point; the lock is held only while
    the set of seen combinations is read or grown, never while the SDK records.
    """

    def __init__(self, names: tuple[str, ...], limit: int) -> None:
        self.names = names
        self.limit = limit
        self._seen: set[tuple[Any, ...]] = set()
        self._lock = threading.Lock()

    def bound(self, attributes: Mapping[str, Any]) -> Mapping[str, Any]:
        """``attributes`` as they may be recorded: unchanged while their combination of the
        named attributes is one of the first ``limit``; else without them, overflowed."""
        if not self.names:
            return attributes
        combination = tuple(attributes.get(name) for name in self.names)
        if all(value is None for value in combination):
            return attributes
        with self._lock:
            if combination in self._seen:
                return attributes
            if len(self._seen) < self.limit:
                self._seen.add(combination)
                return attributes
        kept = {k: v for k, v in attributes.items() if k not in self.names}
        kept[semconv.OTEL_METRIC_OVERFLOW] = True
        return kept
