"""Where ``ragpulse serve`` sends what it produces: spans, metrics and log events.

The same choices as ``configure()``, from the same ``Settings``: OTLP to the
endpoint when one is set (``OTEL_EXPORTER_OTLP_*``), else OTLP-JSON lines in the
output file with ``-logs`` and ``-metrics`` siblings, plus an optional
Prometheus endpoint. The providers are the service's own; nothing is
installed globally.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace.export import SpanExporter

from ragpulse._files import FileLogExporter, FileMetricExporter
from ragpulse.config import _otlp_exporter, _prometheus_reader, _sibling
from ragpulse.serve._export import file_forwarder, otlp_forwarder
from ragpulse.settings import Settings

DEFAULT_SERVICE_NAME = "ragpulse-serve"


@dataclass
class Outputs:
    """The span exporter and the metric and log providers of one service."""

    span_exporter: SpanExporter
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    endpoint: str | None = None
    files: dict[str, Path] = field(default_factory=dict)
    prometheus_url: str | None = None

    def shutdown(self) -> None:
        """Flush and stop the metric and log providers (the span exporter is the sink's)."""
        for provider in (self.meter_provider, self.logger_provider):
            try:
                provider.shutdown()
            except Exception:
                continue


def build_outputs(settings: Settings, *, output_file: Path | None = None) -> Outputs:
    """Exporters for the settings' OTLP endpoint, or files (always when ``output_file`` is set).

    Endpoint, protocol, headers, export timeout, metric interval, Prometheus
    endpoint and service name are ``Settings``' (keywords, then ``RAGPULSE_*`` and
    ``OTEL_*`` variables), the same values ``configure()`` uses.
    """
    s = settings
    resource = Resource.create({SERVICE_NAME: s.service_name or _service_name()})
    interval = int(s.metric_interval * 1000)
    readers: list[MetricReader] = []
    files: dict[str, Path] = {}
    use_files = output_file is not None or not (s.endpoint or s.traces_endpoint)
    if use_files:
        path = output_file or s.output_file
        files = {
            "traces": path,
            "logs": _sibling(path, "logs"),
            "metrics": _sibling(path, "metrics"),
        }
        span_exporter: SpanExporter = file_forwarder(path)
        readers.append(
            PeriodicExportingMetricReader(
                FileMetricExporter(files["metrics"]), export_interval_millis=interval
            )
        )
        log_exporter: Any = FileLogExporter(files["logs"])
    else:
        span_exporter = otlp_forwarder(s.endpoint, s.protocol, s.headers, s.export_timeout)
        otlp = (s.endpoint, s.protocol, s.headers, s.export_timeout)
        if s.endpoint or s.metrics_endpoint:
            readers.append(
                PeriodicExportingMetricReader(
                    _otlp_exporter("metrics", *otlp), export_interval_millis=interval
                )
            )
        log_exporter = _otlp_exporter("logs", *otlp)
    prometheus_url = None
    if s.prometheus_port is not None:
        readers.append(_prometheus_reader(s.prometheus_host, s.prometheus_port))
        prometheus_url = f"http://{s.prometheus_host}:{s.prometheus_port}/metrics"
    meter_provider = MeterProvider(metric_readers=readers, resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    return Outputs(
        span_exporter=span_exporter,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        endpoint=None if use_files else (s.traces_endpoint or s.endpoint),
        files=files,
        prometheus_url=prometheus_url,
    )


def _service_name() -> str:
    return os.environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
