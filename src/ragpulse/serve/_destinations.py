"""Where ``ragpulse serve`` sends what it relays and produces: spans, log records, metrics.

Built by the outputs layer (``ragpulse.outputs``) from the same ``Settings`` as
``configure()``: OTLP to the endpoint when one is set (``OTEL_EXPORTER_OTLP_*``), else
OTLP-JSON lines in the output file with ``-logs`` and ``-metrics`` siblings; plus an
optional Prometheus endpoint. Each signal's forwarder (``ragpulse.outputs.forwarders``)
sends what serve relays of it, as the bytes it arrived in, to where serve's own events
and metrics go. The providers are the service's own; nothing is installed globally.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from ragpulse.outputs import build as outputs
from ragpulse.outputs.forwarders import Forwarder, forwarder_for
from ragpulse.outputs.relayed import SIGNALS
from ragpulse.settings import Settings

DEFAULT_SERVICE_NAME = "ragpulse-serve"


@dataclass
class Outputs:
    """The forwarders and the metric and log providers of one service."""

    forwarders: dict[str, Forwarder]
    """Send what serve relays, by signal (traces, logs, metrics): OTLP, or the signal's file."""
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    exporters: outputs.Exporters
    endpoint: str | None = None
    files: dict[str, Path] = field(default_factory=dict)
    prometheus_url: str | None = None

    def shutdown(self, timeout: float) -> None:
        """Flush and stop the metric and log providers and their deliveries within ``timeout``
        (the forwarders are the relays')."""
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
    prometheus = None
    prometheus_url = None
    if s.prometheus_port is not None:
        prometheus = outputs.prometheus_reader(s.prometheus_host, s.prometheus_port)
        prometheus_url = outputs.prometheus_url(s)
    meter_provider, _ = outputs.meter_provider(exporters, resource, prometheus=prometheus)
    logger_provider = outputs.logger_provider(exporters, resource)
    # After the providers: where their exporters fell back to a file, the relay writes it too.
    forwarders = {signal.name: forwarder_for(exporters, signal) for signal in SIGNALS}
    return Outputs(
        forwarders=forwarders,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        exporters=exporters,
        endpoint=exporters.endpoint,
        files=exporters.files,
        prometheus_url=prometheus_url,
    )


def _service_name() -> str:
    return os.environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
