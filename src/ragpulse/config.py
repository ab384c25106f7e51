"""``ragpulse.configure()``: one call that wires tracing, evaluation, metrics and events.

Keyword arguments first, ``RAGPULSE_*`` variables second, OpenTelemetry's own
``OTEL_*`` variables respected as they are. It builds the global providers, or
joins the ones an application already configured without replacing them.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from ragpulse._files import FileLogExporter, FileMetricExporter, FileSpanExporter
from ragpulse.capture._content import ContentPolicy, Redactor, set_policy
from ragpulse.evaluation.types import ALL_METRICS, Evaluation, RagRecord
from ragpulse.judges.base import Judge
from ragpulse.processor import DEFAULT_HOLD_TIMEOUT, EvaluatingSpanProcessor
from ragpulse.sampling import EvalSampler

_logger = logging.getLogger("ragpulse.config")

DEFAULT_OUTPUT_FILE = "ragpulse-traces.jsonl"
ENV_OUTPUT_FILE = "RAGPULSE_OUTPUT_FILE"
ENV_EVALUATE = "RAGPULSE_EVALUATE"
ENV_PROMETHEUS_PORT = "RAGPULSE_PROMETHEUS_PORT"
ENV_PROMETHEUS_HOST = "RAGPULSE_PROMETHEUS_HOST"


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value.strip() if value and value.strip() else None


def _sibling(path: Path, signal: str) -> Path:
    stem = path.stem[: -len("-traces")] if path.stem.endswith("-traces") else path.stem
    return path.with_name(f"{stem}-{signal}{path.suffix or '.jsonl'}")


@dataclass
class Handle:
    """What ``configure()`` set up; call ``shutdown()`` before the process exits."""

    tracer_provider: TracerProvider
    processor: EvaluatingSpanProcessor | None
    meter_provider: metrics.MeterProvider
    logger_provider: _logs.LoggerProvider
    endpoint: str | None = None
    """Where OTLP goes; ``None`` when writing to files."""
    output_files: Mapping[str, Path] = field(default_factory=dict)
    """``traces``/``logs``/``metrics`` files when no endpoint is configured."""
    prometheus_url: str | None = None
    joined: bool = False
    """True when an application's own TracerProvider was joined, not replaced."""
    on_evaluation: Callable[[RagRecord, Evaluation], None] | None = None
    _owned: list[Any] = field(default_factory=list, repr=False)
    _push_readers: list[MetricReader] | None = field(default=None, repr=False)
    """Our metric readers that export (all but the Prometheus pull reader), when we built them."""
    _shut: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def force_flush(self, timeout: float = 30.0) -> bool:
        """Wait for in-flight evaluations and export everything recorded so far."""
        millis = int(timeout * 1000)
        ok = self.tracer_provider.force_flush(millis)
        # A pull reader (Prometheus) queues one snapshot per collection and serves them all
        # at the next scrape, so flushing it would duplicate series: flush push readers only.
        flushers: list[Any] = (
            [self.meter_provider] if self._push_readers is None else list(self._push_readers)
        )
        for provider in (*flushers, self.logger_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                try:
                    ok = bool(flush(millis)) and ok
                except Exception:
                    ok = False
        return ok

    def shutdown(self) -> None:
        """Flush and stop what ragpulse created; an application's own providers stay up."""
        with self._lock:
            if self._shut:
                return
            self._shut = True
        if self.joined and self.processor is not None:
            self.processor.retire()
            self.processor.downstream.force_flush()
        # Traces first: their last evaluations still emit metrics, events and hook calls;
        # then a hook that has a shutdown of its own (PhoenixAnnotations); then the rest.
        order = list(self._owned)
        if callable(getattr(self.on_evaluation, "shutdown", None)):
            after_traces = 1 if order and order[0] is self.tracer_provider else 0
            order.insert(after_traces, self.on_evaluation)
        for owned in order:
            try:
                owned.shutdown()
            except Exception:
                _logger.debug("ragpulse: shutdown of %r failed", owned, exc_info=True)


# Each signal's OTLP exporter: its module (the same name under .grpc and .http), class, HTTP path.
_OTLP_EXPORTERS: Mapping[str, tuple[str, str, str]] = {
    "traces": ("trace_exporter", "OTLPSpanExporter", "/v1/traces"),
    "logs": ("_log_exporter", "OTLPLogExporter", "/v1/logs"),
    "metrics": ("metric_exporter", "OTLPMetricExporter", "/v1/metrics"),
}


def _otlp_exporter(
    signal: str, endpoint: str | None, protocol: str, headers: Mapping[str, str] | None
) -> Any:
    """The OTLP exporter of ``signal`` for ``protocol``.

    With ``endpoint=None`` the exporter reads the standard ``OTEL_EXPORTER_OTLP_*``
    variables itself (per-signal endpoints, headers, certificates, timeouts).
    """
    module_name, name, path = _OTLP_EXPORTERS[signal]
    if protocol == "grpc":
        module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{module_name}")
        return getattr(module, name)(endpoint=endpoint, headers=dict(headers) if headers else None)
    module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.http.{module_name}")
    url = f"{endpoint.rstrip('/')}{path}" if endpoint else None
    return getattr(module, name)(endpoint=url, headers=headers)


def _prometheus_reader(host: str, port: int) -> MetricReader:
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server
    except ImportError as exc:  # the extra is not installed
        raise RuntimeError(
            "prometheus_port needs the Prometheus exporter: pip install 'ragpulse[prometheus]'"
        ) from exc
    start_http_server(port, addr=host)
    return PrometheusMetricReader()


def _join_tracer_provider(
    provider: TracerProvider, make: Callable[[SpanProcessor], EvaluatingSpanProcessor]
) -> EvaluatingSpanProcessor | None:
    """Put our processor in front of the provider's existing processors.

    The SDK has no public way to wrap processors already added, and adding ours
    beside them would export every evaluated span twice (once without scores).
    So the provider's current processors move behind ours, unchanged. Returns
    ``None`` when the provider's internals are not as expected.
    """
    multi = getattr(provider, "_active_span_processor", None)
    existing = getattr(multi, "_span_processors", None)
    lock = getattr(multi, "_lock", None)
    if not isinstance(existing, tuple) or lock is None:
        return None
    previous = [p for p in existing if isinstance(p, EvaluatingSpanProcessor)]
    if previous:
        # configure() was called before (a notebook cell run twice, say): the new settings
        # take the old processor's place in front of the same downstream, never a second
        # evaluator in front of the first.
        replacement = make(previous[0].downstream)
        with lock:
            multi._span_processors = tuple(  # type: ignore[union-attr]
                replacement if p is previous[0] else p for p in existing
            )
        previous[0].retire()
        return replacement
    inner = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]
    for processor in existing:
        inner.add_span_processor(processor)
    ours = make(inner)
    with lock:
        multi._span_processors = (ours,)  # type: ignore[union-attr]
    return ours


def configure(
    *,
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    judge: Judge | None = None,
    sampler: EvalSampler | None = None,
    sample_rate: float | None = None,
    max_evaluations_per_minute: float | None = None,
    max_judge_tokens_per_hour: float | None = None,
    always_evaluate: Collection[str] = (),
    metrics_to_compute: Collection[str] = ALL_METRICS,
    hold_timeout: float = DEFAULT_HOLD_TIMEOUT,
    thresholds: Mapping[str, float] | None = None,
    inline_annotations: bool = False,
    capture_content: bool | None = None,
    redact: Redactor | None = None,
    max_text_length: int | None = None,
    output_file: str | Path | None = None,
    prometheus_port: int | None = None,
    prometheus_host: str | None = None,
    metric_export_interval: float | None = None,
    on_evaluation: Callable[[RagRecord, Evaluation], None] | None = None,
    evaluate: bool | None = None,
    concurrency: int = 4,
    max_queue_size: int = 1000,
) -> Handle:
    """Set up ragpulse for this process and return a ``Handle``.

    With an OTLP endpoint (``endpoint=`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``),
    traces, metrics and log events go there over ``http/protobuf`` or ``grpc``
    (``OTEL_EXPORTER_OTLP_PROTOCOL``). Without one, they are appended as OTLP-JSON
    lines to ``output_file`` (default ``ragpulse-traces.jsonl``, with ``-logs`` and
    ``-metrics`` siblings). If the application already set a global SDK
    ``TracerProvider``, ragpulse joins it: its processors keep working and receive
    the evaluated spans. ``evaluate=False`` (or ``RAGPULSE_EVALUATE=false``) records
    spans only.
    """
    set_policy(
        ContentPolicy.from_env(
            capture_content=capture_content, redact=redact, max_text_length=max_text_length
        )
    )
    if evaluate is None:
        evaluate = (_env(ENV_EVALUATE) or "true").lower() not in {"0", "false", "no", "off"}
    if sampler is None:
        overrides: dict[str, Any] = {}
        if sample_rate is not None:
            overrides["rate"] = sample_rate
        if max_evaluations_per_minute is not None:
            overrides["max_evaluations_per_minute"] = max_evaluations_per_minute
        if max_judge_tokens_per_hour is not None:
            overrides["max_judge_tokens_per_hour"] = max_judge_tokens_per_hour
        if always_evaluate:
            overrides["always_evaluate"] = tuple(always_evaluate)
        sampler = EvalSampler.from_env(**overrides)

    attributes: dict[str, Any] = {}
    if service_name:
        attributes[SERVICE_NAME] = service_name
    resource = Resource.create(attributes)
    service = str(resource.attributes.get(SERVICE_NAME, "unknown_service"))

    endpoint = endpoint or _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    env_has_traces_endpoint = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") is not None
    protocol = (protocol or _env("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").lower()
    owned: list[Any] = []
    files: dict[str, Path] = {}

    # --- traces -------------------------------------------------------------
    if endpoint or env_has_traces_endpoint:
        span_exporter: SpanExporter = _otlp_exporter("traces", endpoint, protocol, headers)
    else:
        path = Path(output_file or _env(ENV_OUTPUT_FILE) or DEFAULT_OUTPUT_FILE)
        files = {
            "traces": path,
            "logs": _sibling(path, "logs"),
            "metrics": _sibling(path, "metrics"),
        }
        span_exporter = FileSpanExporter(files["traces"])

    # --- metrics --------------------------------------------------------------
    global_meter_provider = metrics.get_meter_provider()
    prometheus_url = None
    push_readers: list[MetricReader] | None = None
    if isinstance(global_meter_provider, MeterProvider):
        meter_provider: metrics.MeterProvider = global_meter_provider
    else:
        readers: list[MetricReader] = []
        if endpoint or _env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
            readers.append(
                PeriodicExportingMetricReader(
                    _otlp_exporter("metrics", endpoint, protocol, headers),
                    export_interval_millis=(
                        int(metric_export_interval * 1000) if metric_export_interval else None
                    ),
                )
            )
        elif files:
            readers.append(
                PeriodicExportingMetricReader(
                    FileMetricExporter(files["metrics"]),
                    export_interval_millis=int((metric_export_interval or 60.0) * 1000),
                )
            )
        port_text = _env(ENV_PROMETHEUS_PORT)
        port = (
            prometheus_port
            if prometheus_port is not None
            else (int(port_text) if port_text else None)
        )
        push_readers = list(readers)
        if port is not None:
            host = prometheus_host or _env(ENV_PROMETHEUS_HOST) or "127.0.0.1"
            readers.append(_prometheus_reader(host, port))
            prometheus_url = f"http://{host}:{port}/metrics"
        sdk_meter_provider = MeterProvider(metric_readers=readers, resource=resource)
        metrics.set_meter_provider(sdk_meter_provider)
        owned.append(sdk_meter_provider)
        meter_provider = sdk_meter_provider

    # --- logs (evaluation events) ---------------------------------------------------
    global_logger_provider = _logs.get_logger_provider()
    if isinstance(global_logger_provider, LoggerProvider):
        logger_provider: _logs.LoggerProvider = global_logger_provider
    else:
        sdk_logger_provider = LoggerProvider(resource=resource)
        log_exporter: LogRecordExporter = (
            FileLogExporter(files["logs"])
            if files
            else _otlp_exporter("logs", endpoint, protocol, headers)
        )
        sdk_logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
        _logs.set_logger_provider(sdk_logger_provider)
        owned.append(sdk_logger_provider)
        logger_provider = sdk_logger_provider

    def make_processor(downstream: SpanProcessor) -> EvaluatingSpanProcessor:
        return EvaluatingSpanProcessor(
            downstream,
            judge=judge,
            sampler=sampler,
            metrics=metrics_to_compute,
            hold_timeout=hold_timeout,
            thresholds=thresholds,
            inline_annotations=inline_annotations,
            service_name=service,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            on_evaluation=on_evaluation,
            concurrency=concurrency,
            max_queue_size=max_queue_size,
        )

    def add_pipeline(provider: TracerProvider) -> EvaluatingSpanProcessor | None:
        """Our exporting processor, behind the evaluator when evaluation is on."""
        downstream = BatchSpanProcessor(span_exporter)
        evaluating = make_processor(downstream) if evaluate else None
        provider.add_span_processor(evaluating or downstream)
        return evaluating

    # --- the tracer provider: join or build ---------------------------------------------
    existing = trace.get_tracer_provider()
    joined = isinstance(existing, TracerProvider)
    processor: EvaluatingSpanProcessor | None = None
    if isinstance(existing, TracerProvider):
        tracer_provider = existing
        processor = _join_tracer_provider(existing, make_processor) if evaluate else None
        if processor is not None:
            files.pop("traces", None)  # the app's own processors export the scored spans
        elif evaluate or not files:
            # Unknown provider internals, or an endpoint to copy spans to: ours goes beside.
            processor = add_pipeline(existing)
    else:
        tracer_provider = TracerProvider(resource=resource)
        processor = add_pipeline(tracer_provider)
        trace.set_tracer_provider(tracer_provider)
        owned.insert(0, tracer_provider)

    return Handle(
        tracer_provider=tracer_provider,
        processor=processor,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        endpoint=None if files else (endpoint or _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
        output_files=files,
        prometheus_url=prometheus_url,
        joined=joined,
        on_evaluation=on_evaluation,
        _push_readers=push_readers,
        _owned=owned,
    )
