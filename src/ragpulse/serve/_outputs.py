"""Where ``ragpulse serve`` sends what it produces: spans, metrics and log events.

The same choices as ``configure()``: the standard ``OTEL_EXPORTER_OTLP_*``
variables (endpoint, protocol, headers) when an endpoint is set, else OTLP-JSON
lines in ``output_file`` with ``-logs`` and ``-metrics`` siblings, plus an
optional Prometheus endpoint. The providers are the service's own; nothing is
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


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def build_outputs(
    *,
    output_file: Path | None = None,
    prometheus_host: str = "127.0.0.1",
    prometheus_port: int | None = None,
    metric_export_interval: float = 10.0,
    service_name: str = DEFAULT_SERVICE_NAME,
) -> Outputs:
    """Exporters for the standard ``OTEL_*`` endpoint, or files when ``output_file`` is set."""
    endpoint = _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    traces_endpoint = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    protocol = (_env("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").lower()
    resource = Resource.create({SERVICE_NAME: _env("OTEL_SERVICE_NAME") or service_name})
    interval = int(metric_export_interval * 1000)
    readers: list[MetricReader] = []
    files: dict[str, Path] = {}
    use_files = output_file is not None or not (endpoint or traces_endpoint)
    if use_files:
        path = output_file or Path("ragpulse-traces.jsonl")
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
        span_exporter = otlp_forwarder(endpoint, protocol)
        readers.append(
            PeriodicExportingMetricReader(
                _otlp_exporter("metrics", endpoint, protocol, None),
                export_interval_millis=interval,
            )
        )
        log_exporter = _otlp_exporter("logs", endpoint, protocol, None)
    prometheus_url = None
    if prometheus_port is not None:
        readers.append(_prometheus_reader(prometheus_host, prometheus_port))
        prometheus_url = f"http://{prometheus_host}:{prometheus_port}/metrics"
    meter_provider = MeterProvider(metric_readers=readers, resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    return Outputs(
        span_exporter=span_exporter,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        endpoint=None if use_files else (traces_endpoint or endpoint),
        files=files,
        prometheus_url=prometheus_url,
    )
