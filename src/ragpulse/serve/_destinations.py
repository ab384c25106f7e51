"""Where ``ragpulse serve`` sends what it produces: spans, metrics and log events.

Built by the outputs layer (``ragpulse.outputs``) from the same ``Settings`` as
``configure()``: OTLP to the endpoint when one is set (``OTEL_EXPORTER_OTLP_*``),
every signal behind the same retrying, byte-bounded ``Delivery``, else OTLP-JSON
lines in the output file with ``-logs`` and ``-metrics`` siblings; plus an
optional Prometheus endpoint. The span exporter sends the bytes spans arrived in
(``ragpulse.serve._encode``), the forwarders the log and metric requests serve
relays (``ragpulse.serve._relay``), to where serve's own events and metrics go.
The providers are the service's own; nothing is installed globally.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace.export import SpanExporter

from ragpulse.outputs import build as outputs
from ragpulse.serve._encode import FileForwarder, forwarder_class
from ragpulse.serve._relay import (
    LOGS,
    RELAYED,
    Forwarder,
    RelayedSignal,
    SignalFile,
    relay_forwarder_class,
)
from ragpulse.settings import Settings

DEFAULT_SERVICE_NAME = "ragpulse-serve"


@dataclass
class Outputs:
    """The span exporter and the metric and log providers of one service."""

    span_exporter: SpanExporter
    forwarders: dict[str, Forwarder]
    """Send the log and metric requests serve relays, by signal: OTLP, or the signal's file."""
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    exporters: outputs.Exporters
    endpoint: str | None = None
    files: dict[str, Path] = field(default_factory=dict)
    prometheus_url: str | None = None

    def shutdown(self, timeout: float) -> None:
        """Flush and stop the metric and log providers and their deliveries within ``timeout``
        (the span exporter is the sink's)."""
        for provider in (self.meter_provider, self.logger_provider):
            try:
                provider.shutdown()
            except Exception:
                continue
        self.exporters.shutdown(timeout)


def build_outputs(settings: Settings, *, output_file: Path | None = None) -> Outputs:
    """Exporters for the settings' OTLP endpoint, or files (always when ``output_file`` is set).

    Endpoint, protocol, headers, export timeout, compression, metric interval, the
    export buffer, Prometheus endpoint and service name are ``Settings``' (keywords,
    then ``RAGPULSE_*`` and ``OTEL_*`` variables), the same values ``configure()`` uses.
    """
    s = settings
    resource = Resource.create({SERVICE_NAME: s.service_name or _service_name()})
    exporters = outputs.Exporters(s, output_file=output_file)
    otlp = (
        None
        if "traces" in exporters.files
        else exporters.otlp("traces", forwarder_class(s.protocol))
    )
    span_exporter: SpanExporter = (
        otlp if otlp is not None else FileForwarder(exporters.files["traces"])
    )
    prometheus = None
    prometheus_url = None
    if s.prometheus_port is not None:
        prometheus = outputs.prometheus_reader(s.prometheus_host, s.prometheus_port)
        prometheus_url = outputs.prometheus_url(s)
    meter_provider, _ = outputs.meter_provider(exporters, resource, prometheus=prometheus)
    logger_provider = outputs.logger_provider(exporters, resource)
    # After the providers: where their exporters fell back to a file, the relay writes it too.
    forwarders = {signal.name: _forwarder(exporters, signal) for signal in RELAYED}
    return Outputs(
        span_exporter=span_exporter,
        forwarders=forwarders,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        exporters=exporters,
        endpoint=exporters.endpoint,
        files=exporters.files,
        prometheus_url=prometheus_url,
    )


def _forwarder(exporters: outputs.Exporters, signal: RelayedSignal) -> Forwarder:
    """Where ``signal``'s relayed requests go: where serve's own go (its metrics only with an
    endpoint for them), else the signal's file."""
    s = exporters.settings
    wanted = signal.name not in exporters.files and (
        signal is LOGS or bool(s.endpoint or s.metrics_endpoint)
    )
    otlp = (
        exporters.otlp(signal.name, relay_forwarder_class(signal, s.protocol)) if wanted else None
    )
    if otlp is not None:
        forwarder: Forwarder = otlp
        return forwarder
    return SignalFile(exporters.file(signal.name), signal)


def _service_name() -> str:
    return os.environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
