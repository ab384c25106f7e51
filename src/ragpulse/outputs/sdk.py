"""The OpenTelemetry SDK's own options, from ``Settings``, given to its constructors.

The SDK reads its ``OTEL_*`` variables (``OTEL_BSP_*``, ``OTEL_BLRP_*``, the span and log
record limits, the sampler, the exemplar filter, the metric export timeout) where an
argument is left ``None``, and some of its readers raise on a value they cannot use
(``OTEL_BSP_MAX_QUEUE_SIZE=0`` is a ``ValueError`` from ``BatchSpanProcessor``; a
21-digit one an ``OverflowError``). ``Settings`` has read and checked each of them
(a bad one is one warning and its default), so every object ragpulse builds gets all of
them as arguments and the SDK reads none.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.sdk._logs import LogRecordLimits
from opentelemetry.sdk.metrics import (
    AlwaysOffExemplarFilter,
    AlwaysOnExemplarFilter,
    ExemplarFilter,
    TraceBasedExemplarFilter,
)
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from ragpulse.settings import Settings
from ragpulse.settings._parse import UNLIMITED

__all__ = [
    "SPEC_COUNT_LIMIT",
    "batch_options",
    "exemplar_filter",
    "log_record_limits",
    "sampler",
    "span_limits",
]

SPEC_COUNT_LIMIT: Final = 128
"""The OpenTelemetry specification's default of every count limit."""

_EXEMPLAR_FILTERS: Final[dict[str, type[ExemplarFilter]]] = {
    "trace_based": TraceBasedExemplarFilter,
    "always_on": AlwaysOnExemplarFilter,
    "always_off": AlwaysOffExemplarFilter,
}


def batch_options(settings: Settings, processor: str) -> dict[str, Any]:
    """The keyword arguments of ragpulse's batch processor ``processor`` (``"bsp"`` of spans,
    ``"blrp"`` of log records): ``OTEL_BSP_*`` or ``OTEL_BLRP_*``, checked."""
    queue = getattr(settings, f"{processor}_max_queue_size")
    batch = getattr(settings, f"{processor}_max_export_batch_size")
    return {
        "max_queue_size": queue,
        "schedule_delay_millis": getattr(settings, f"{processor}_schedule_delay") * 1000.0,
        # The SDK refuses a batch larger than its queue; the queue bounds it.
        "max_export_batch_size": min(batch, queue),
        "export_timeout_millis": getattr(settings, f"{processor}_export_timeout") * 1000.0,
    }


def _or(value: int | None, fallback: int | None) -> int | None:
    """A limit as given, else its fallback (``UNLIMITED`` goes to the SDK as ``UNSET``)."""
    return fallback if value is None else value


def span_limits(settings: Settings) -> SpanLimits:
    """The span limits of ``OTEL_ATTRIBUTE_*``, ``OTEL_SPAN_*``, ``OTEL_EVENT_*`` and
    ``OTEL_LINK_*``: a specific limit, else the general one, else the default."""
    count = _or(settings.attribute_count_limit, SPEC_COUNT_LIMIT)
    length = _or(settings.attribute_value_length_limit, UNLIMITED)
    return SpanLimits(
        max_attributes=count,
        max_events=_or(settings.span_event_count_limit, SPEC_COUNT_LIMIT),
        max_links=_or(settings.span_link_count_limit, SPEC_COUNT_LIMIT),
        max_span_attributes=_or(settings.span_attribute_count_limit, count),
        max_event_attributes=_or(settings.event_attribute_count_limit, count),
        max_link_attributes=_or(settings.link_attribute_count_limit, count),
        max_attribute_length=length,
        max_span_attribute_length=_or(settings.span_attribute_value_length_limit, length),
    )


def log_record_limits(settings: Settings) -> LogRecordLimits:
    """The log record limits of ``OTEL_ATTRIBUTE_*`` and ``OTEL_LOGRECORD_*``."""
    count = _or(settings.attribute_count_limit, SPEC_COUNT_LIMIT)
    length = _or(settings.attribute_value_length_limit, UNLIMITED)
    return LogRecordLimits(
        max_attributes=count,
        max_attribute_length=length,
        max_log_record_attributes=_or(settings.logrecord_attribute_count_limit, count),
        max_log_record_attribute_length=_or(
            settings.logrecord_attribute_value_length_limit, length
        ),
    )


def sampler(settings: Settings) -> Sampler:
    """The sampler ``OTEL_TRACES_SAMPLER`` (and ``OTEL_TRACES_SAMPLER_ARG``) names."""
    name = settings.traces_sampler
    root: Sampler
    if name.endswith("traceidratio"):
        root = TraceIdRatioBased(settings.traces_sampler_arg)
    else:
        root = ALWAYS_OFF if name.endswith("always_off") else ALWAYS_ON
    return ParentBased(root) if name.startswith("parentbased_") else root


def exemplar_filter(settings: Settings) -> ExemplarFilter:
    """The exemplar filter ``OTEL_METRICS_EXEMPLAR_FILTER`` names."""
    return _EXEMPLAR_FILTERS[settings.metrics_exemplar_filter]()
