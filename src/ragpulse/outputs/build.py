"""The outputs layer: where spans, metrics and log events go, built from ``Settings``.

``configure()`` and ``ragpulse serve`` build their exporters and providers here,
so both get the same choices and the same guarantees:

- OTLP to the endpoint when one is set (``OTEL_EXPORTER_OTLP_*`` read by the
  exporters as they are), else OTLP-JSON lines in ``output_file`` with ``-logs``
  and ``-metrics`` siblings (``ragpulse.outputs.files``); an OTLP exporter that cannot be
  built from the variables falls back to its file, with one warning;
- every OTLP exporter wrapped for delivery (``ragpulse.outputs.delivery``): export never
  blocks, batches are cut below ``export_max_batch_bytes``, a buffer bounded by
  ``export_buffer_bytes`` and ``export_buffer_seconds`` rides out a backend
  restart, and what is dropped is counted (``ragpulse.evaluator.export.dropped``);
- HTTP sessions that read the environment (proxies, CA bundle, ``.netrc``) once
  per URL, not once per request, where the OpenTelemetry certificate variables win over
  ``REQUESTS_CA_BUNDLE`` and ``CURL_CA_BUNDLE`` (``SteadySession``);
- the metric and log providers (``meter_provider``, ``logger_provider``), with the
  optional Prometheus reader.

What is specific to a caller stays with it: ``configure()`` joins an application's
own providers; ``ragpulse serve`` relays what it receives (``ragpulse.outputs.relay``)
through the same ``Delivery``.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import requests
from opentelemetry import metrics
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import SpanExporter
from requests.utils import get_netrc_auth

from ragpulse import semconv
from ragpulse.outputs.delivery import (
    DeliveringLogExporter,
    DeliveringMetricExporter,
    DeliveringSpanExporter,
    ExitDeadline,
    Flushes,
)
from ragpulse.outputs.files import FileLogExporter, FileMetricExporter, FileSpanExporter
from ragpulse.outputs.refusal import Refusals, http_refusal, watch, watch_grpc
from ragpulse.outputs.sdk import batch_options, exemplar_filter, log_record_limits
from ragpulse.settings import Settings

__all__ = [
    "DropCounter",
    "Exporters",
    "SteadySession",
    "logger_provider",
    "meter_provider",
    "otlp_exporter",
    "prometheus_reader",
    "prometheus_reader_or_none",
    "prometheus_url",
    "sibling",
]

_logger = logging.getLogger("ragpulse.outputs")

_E = TypeVar("_E", FileSpanExporter, FileLogExporter, FileMetricExporter)

# Each signal's OTLP exporter: its module (the same name under .grpc and .http), class, HTTP path.
_OTLP_EXPORTERS: Mapping[str, tuple[str, str, str]] = {
    "traces": ("trace_exporter", "OTLPSpanExporter", "/v1/traces"),
    "logs": ("_log_exporter", "OTLPLogExporter", "/v1/logs"),
    "metrics": ("metric_exporter", "OTLPMetricExporter", "/v1/metrics"),
}
# Set, the SDK's HTTP exporters build their session from a credential provider of the user's.
_CREDENTIAL_PROVIDER_PREFIX = "OTEL_PYTHON_EXPORTER_OTLP_HTTP_"
_CREDENTIAL_PROVIDER_SUFFIX = "CREDENTIAL_PROVIDER"


def sibling(path: Path, signal: str) -> Path:
    """The file of ``signal`` beside the traces file ``path`` (``a-traces``: ``a-logs``)."""
    stem = path.stem[: -len("-traces")] if path.stem.endswith("-traces") else path.stem
    return path.with_name(f"{stem}-{signal}{path.suffix or '.jsonl'}")


class SteadySession(requests.Session):
    """A ``requests`` session that reads the environment once per URL, not per request.

    ``requests`` looks up proxies, the CA bundle variables and ``~/.netrc`` on every
    request of a session that trusts the environment: about a tenth of an exporter
    thread's time at a few hundred requests a second. This session resolves them the
    first time it sends to a URL and keeps the answer; the values are the ones a plain
    session would use (the environment does not change under a running exporter).
    """

    def __init__(self) -> None:
        super().__init__()
        # Off, prepare_request skips its .netrc lookup; the settings are resolved below.
        self.trust_env = False
        self._settled: dict[tuple[str, Any, Any, Any], dict[str, Any]] = {}
        self._netrc: dict[str, Any] = {}
        self.refusals = Refusals()
        """What each request's answer said: a refusal for good, or None (``_refusal``)."""

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        self.refusals.note(None)  # no answer at all (a connection error) is retried
        response = super().send(request, **kwargs)
        self.refusals.note(http_refusal(response.status_code, response.reason))
        return response

    def merge_environment_settings(
        self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> dict[str, Any]:
        if (verify is None or verify is True) and isinstance(self.verify, str):
            # The exporter set this session's CA from OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE;
            # requests would let REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE replace it (a session's
            # verify loses to the environment's), and TLS to the backend would fail.
            verify = self.verify
        key = (str(url), stream, verify, cert if not isinstance(cert, list) else tuple(cert))
        if not proxies:
            settled = self._settled.get(key)
            if settled is not None:
                return settled
        self.trust_env = True
        try:
            merged: dict[str, Any] = super().merge_environment_settings(
                url, proxies, stream, verify, cert
            )
        finally:
            self.trust_env = False
        if not proxies:
            self._settled[key] = merged
        return merged

    def prepare_request(self, request: requests.Request) -> requests.PreparedRequest:
        if request.auth is None and self.auth is None and request.url:
            url = str(request.url)
            if url not in self._netrc:
                self._netrc[url] = get_netrc_auth(url)
            request.auth = self._netrc[url]
        return super().prepare_request(request)


def _session_or_none() -> SteadySession | None:
    """Our session, unless the user named a credential provider that builds its own."""
    if any(
        name.startswith(_CREDENTIAL_PROVIDER_PREFIX) and name.endswith(_CREDENTIAL_PROVIDER_SUFFIX)
        for name in os.environ
    ):
        return None
    return SteadySession()


def otlp_exporter(
    signal: str,
    endpoint: str | None,
    protocol: str,
    headers: Mapping[str, str] | None,
    timeout: float | None = None,
    compression: str | None = None,
    *,
    exporter_class: type | None = None,
    signal_endpoint: str | None = None,
) -> Any:
    """The OTLP exporter of ``signal`` for ``protocol``.

    ``signal_endpoint`` (the signal's own URL) is used as it is; else ``endpoint`` is the
    base, to which an HTTP exporter appends ``/v1/<signal>``, as the OTLP exporter
    specification says. With neither, the exporter reads the standard
    ``OTEL_EXPORTER_OTLP_*`` variables itself; it always reads the headers (when
    ``headers`` is None), certificates, client key and certificate, and the gRPC insecure
    flag itself. ``exporter_class`` replaces the SDK's class (a subclass of it that
    encodes differently).
    """
    module_name, name, path = _OTLP_EXPORTERS[signal]
    if protocol == "grpc":
        module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{module_name}")
        options: dict[str, Any] = {}
        if compression is not None:
            import grpc

            gzip = compression == "gzip"
            options["compression"] = (
                grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression
            )
        exporter = (exporter_class or getattr(module, name))(
            endpoint=signal_endpoint or endpoint,
            headers=dict(headers) if headers else None,
            timeout=timeout,
            **options,
        )
        watch_grpc(exporter)
        return exporter
    module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.http.{module_name}")
    url = signal_endpoint or (f"{endpoint.rstrip('/')}{path}" if endpoint else None)
    options = {}
    if compression is not None:
        from opentelemetry.exporter.otlp.proto.http import Compression

        options["compression"] = Compression(compression)
    session = _session_or_none()
    if session is not None:
        options["session"] = session
    exporter = (exporter_class or getattr(module, name))(
        endpoint=url, headers=headers, timeout=timeout, **options
    )
    if session is not None:
        watch(exporter, session.refusals)
    return exporter


class DropCounter:
    """``ragpulse.evaluator.export.dropped``, bound to a meter once the meter provider exists."""

    def __init__(self) -> None:
        self._counter: Any = None

    def bind(self, provider: metrics.MeterProvider) -> None:
        self._counter = provider.get_meter("ragpulse").create_counter(
            semconv.METRIC_EXPORT_DROPPED,
            unit="{item}",
            description="Spans, log records and metric snapshots ragpulse could not deliver.",
        )

    def __call__(self, signal: str, reason: str, count: int) -> None:
        if self._counter is not None:
            self._counter.add(
                count, {semconv.ATTR_EXPORT_SIGNAL: signal, semconv.ATTR_EXPORT_REASON: reason}
            )


class Exporters:
    """The exporters of one setup: OTLP wrapped for delivery, or OTLP-JSON files.

    ``output_file`` given writes files even when an endpoint is set (``ragpulse serve
    --output-file``). Every ``Delivery`` made is in ``deliveries``, for flush and
    shutdown; they share one ``deadline`` and count drops in ``drops``. So is each output
    file, checked as its exporter is made: one that cannot be written is said at once (the
    path, why, and that what goes there is dropped and counted).
    """

    def __init__(self, settings: Settings, *, output_file: Path | None = None) -> None:
        self.settings = settings
        self.deadline = ExitDeadline()
        self.drops = DropCounter()
        self.deliveries: list[Flushes] = []
        self.files: dict[str, Path] = {}
        self._output_file = output_file or settings.output_file
        self._files_forced = output_file is not None
        self.endpoint: str | None = None
        # Each signal goes to its own endpoint, else the base one, else its file.
        for signal in ("traces", "logs", "metrics"):
            if output_file is not None or settings.signal_endpoint(signal)[0] is None:
                self.files[signal] = self.file(signal)
        if "traces" not in self.files:
            self.endpoint = settings.signal_endpoint("traces")[0]

    def delivery_options(self) -> dict[str, Any]:
        """The keyword arguments of a ``Delivery`` under these settings."""
        s = self.settings
        return {
            "max_batch_bytes": s.export_max_batch_bytes,
            "max_buffer_bytes": s.export_buffer_bytes,
            "max_buffer_age": s.export_buffer_seconds,
            "shutdown_timeout": s.shutdown_timeout,
            "deadline": self.deadline,
            "on_drop": self.drops,
        }

    def otlp(self, signal: str, exporter_class: type | None = None) -> Any:
        """The OTLP exporter of ``signal``; None (and one warning) when it cannot be built."""
        s = self.settings
        endpoint, own = s.signal_endpoint(signal)
        try:
            return otlp_exporter(
                signal,
                None if own else endpoint,
                s.signal_protocol(signal),
                s.headers,
                s.signal_timeout(signal),
                s.signal_compression(signal),
                exporter_class=exporter_class,
                signal_endpoint=endpoint if own else None,
            )
        except Exception as exc:  # the exporter read an OTEL_* variable it cannot use
            self.files[signal] = self.file(signal)
            _logger.warning(
                "ragpulse: cannot build the OTLP %s exporter (%s: %s); writing %s to %s instead",
                signal,
                type(exc).__name__,
                exc,
                signal,
                self.files[signal],
            )
            return None

    def file(self, signal: str) -> Path:
        """The OTLP-JSON file of ``signal``."""
        path = self._output_file
        return path if signal == "traces" else sibling(path, signal)

    def delivered(self, delivery: Flushes) -> None:
        """Count ``delivery`` among this setup's (flushed and shut down with it)."""
        self.deliveries.append(delivery)

    def _to_file(self, exporter: _E) -> _E:
        """``exporter`` of a file, checked now and flushed with this setup."""
        exporter.check()
        self.delivered(exporter.output)
        return exporter

    def spans(self) -> SpanExporter:
        """The span exporter: OTLP behind delivery, or the traces file."""
        otlp = None if "traces" in self.files else self.otlp("traces")
        if otlp is None:
            return self._to_file(FileSpanExporter(self.files["traces"], self.drops))
        wrapped = DeliveringSpanExporter(otlp, **self.delivery_options())
        self.delivered(wrapped.delivery)
        return wrapped

    def logs(self) -> LogRecordExporter:
        """The log exporter (evaluation events): OTLP behind delivery, or the logs file."""
        otlp = None if "logs" in self.files else self.otlp("logs")
        if otlp is None:
            return self._to_file(FileLogExporter(self.files["logs"], self.drops))
        wrapped = DeliveringLogExporter(otlp, **self.delivery_options())
        self.delivered(wrapped.delivery)
        return wrapped

    def metrics(self) -> MetricExporter | None:
        """The push metric exporter: OTLP behind delivery, or the metrics file."""
        otlp = None if "metrics" in self.files else self.otlp("metrics")
        if otlp is not None:
            self.files.pop("metrics", None)
            wrapped = DeliveringMetricExporter(otlp, **self.delivery_options())
            self.delivered(wrapped.delivery)
            return wrapped
        if "metrics" not in self.files:
            return None
        return self._to_file(FileMetricExporter(self.files["metrics"], self.drops))

    def shutdown(self, timeout: float) -> None:
        """Deliver what every delivery holds within ``timeout`` in all, then stop them."""
        self.deadline.start(timeout)
        for delivery in self.deliveries:
            delivery.shutdown(self.deadline.remaining(timeout))


def prometheus_reader(host: str, port: int) -> MetricReader:
    """A Prometheus reader serving ``/metrics`` on ``host:port``; raises when it cannot."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server
    except ImportError as exc:  # the extra is not installed
        raise RuntimeError(
            "prometheus_port needs the Prometheus exporter: pip install 'ragpulse[prometheus]'"
        ) from exc
    start_http_server(port, addr=host)
    return PrometheusMetricReader()


def prometheus_reader_or_none(host: str, port: int) -> MetricReader | None:
    """``prometheus_reader``, or None and one log line: a busy port must not stop the app."""
    try:
        return prometheus_reader(host, port)
    except (OSError, RuntimeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        _logger.warning(
            "ragpulse: cannot serve Prometheus metrics on %s:%d (%s); going on without /metrics",
            host,
            port,
            why,
        )
        return None


def prometheus_url(settings: Settings) -> str:
    """Where the Prometheus reader of ``settings`` serves ``/metrics``."""
    return f"http://{settings.prometheus_host}:{settings.prometheus_port}/metrics"


def meter_provider(
    exporters: Exporters,
    resource: Resource,
    *,
    prometheus: MetricReader | None = None,
) -> tuple[MeterProvider, list[MetricReader]]:
    """A meter provider exporting every ``metric_interval``; and its push readers.

    The push readers are the ones to flush (a pull reader serves what it holds at the
    next scrape). The drop counter is bound to the provider made.
    """
    push: list[MetricReader] = []
    settings = exporters.settings
    exporter = exporters.metrics()
    if exporter is not None:
        push.append(
            PeriodicExportingMetricReader(
                exporter,
                export_interval_millis=settings.metric_interval * 1000,
                export_timeout_millis=settings.metric_export_timeout * 1000,
            )
        )
    readers: Sequence[MetricReader] = [*push, prometheus] if prometheus is not None else push
    provider = MeterProvider(
        metric_readers=readers,
        resource=resource,
        shutdown_on_exit=False,
        exemplar_filter=exemplar_filter(settings),
    )
    exporters.drops.bind(provider)
    return provider, push


def logger_provider(exporters: Exporters, resource: Resource) -> LoggerProvider:
    """A logger provider (the evaluation events) in front of the logs exporter."""
    settings = exporters.settings
    provider = LoggerProvider(
        resource=resource,
        shutdown_on_exit=False,
        log_record_limits=log_record_limits(settings),
    )
    provider.add_log_record_processor(
        BatchLogRecordProcessor(exporters.logs(), **batch_options(settings, "blrp"))
    )
    return provider
