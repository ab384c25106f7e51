"""``ragpulse.configure()``: one call that wires tracing, evaluation, metrics and events.

Keyword arguments first, ``RAGPULSE_*`` variables second, OpenTelemetry's own
``OTEL_*`` variables respected as they are; all of them are read once, into a
``Settings`` (``ragpulse.settings``), whose parser never raises. ``configure()``
builds the parts from it: the global providers (or joins the ones an
application already configured, without replacing them), exporters that retry
and buffer through a backend restart (``ragpulse.outputs.delivery``), the evaluating span
processor and its worker, and the exit and SIGTERM hooks (``ragpulse.outputs.exit``).
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.environment_variables import OTEL_BSP_MAX_QUEUE_SIZE
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ragpulse.capture._content import set_policy
from ragpulse.capture._roles import set_tool_roles
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.judges.base import Judge
from ragpulse.offline.calibrate import calibrated_thresholds
from ragpulse.outputs import build as outputs
from ragpulse.outputs import exit as _exit
from ragpulse.outputs.delivery import Delivery, ExitDeadline
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings import Settings
from ragpulse.settings.options import (
    BoundsOptions,
    ContentOptions,
    EvaluationOptions,
    ExportOptions,
    JudgeOptions,
    SamplingOptions,
    option_settings,
    spelling,
)
from ragpulse.worker import EvalWorker

_logger = logging.getLogger("ragpulse.config")

# Providers ragpulse made and a handle has shut down. OpenTelemetry's API sets its global
# providers once per process, so a configure() after shutdown() (a test suite, a notebook)
# finds them still global: it builds new meter and logger providers instead of using dead
# ones, and gives the tracer provider a fresh pipeline (a shut-down TracerProvider still
# makes spans; only its processors stopped).
_retired: weakref.WeakSet[Any] = weakref.WeakSet()

# Settings that size the worker: with ``worker=`` they would be ignored.
_WORKER_SETTINGS = (
    "concurrency",
    "judge_nice",
    "max_queue_size",
    "max_queue_bytes",
    "max_input_chars",
    "evaluation_timeout",
)
# Settings a second configure() cannot change: the exporters of the first call stay.
_EXPORT_SETTINGS = ("endpoint", "protocol", "output_file", "prometheus_port", "service_name")


@dataclass
class Handle:
    """What ``configure()`` set up; ``shutdown()`` flushes it within ``shutdown_timeout``.

    Without a ``shutdown()`` call, the same happens at exit (``atexit``). A handle
    replaced by a later ``configure()`` hands its providers and exporters over: its
    ``shutdown()`` then stops nothing the live handle uses.
    """

    tracer_provider: TracerProvider
    processor: EvaluatingSpanProcessor | None
    meter_provider: metrics.MeterProvider
    logger_provider: _logs.LoggerProvider
    endpoint: str | None = None
    """Where OTLP goes; ``None`` when writing to files."""
    output_files: Mapping[str, Path] = field(default_factory=dict)
    """The ``traces``/``logs``/``metrics`` files ragpulse writes when no endpoint is configured."""
    prometheus_url: str | None = None
    joined: bool = False
    """True when an application's own TracerProvider was joined, not replaced."""
    on_evaluation: Callable[[RagRecord, Evaluation], None] | None = None
    settings: Settings = field(default_factory=Settings)
    """The checked settings this handle was built from."""
    _owned: list[Any] = field(default_factory=list, repr=False)
    _push_readers: list[MetricReader] | None = field(default=None, repr=False)
    """Our metric readers that export (all but the Prometheus pull reader), when we built them."""
    _span_processor: SpanProcessor | None = field(default=None, repr=False)
    """The batch processor ragpulse added in front of its span exporter."""
    _deliveries: list[Delivery[Any]] = field(default_factory=list, repr=False)
    _deadline: ExitDeadline = field(default_factory=ExitDeadline, repr=False)
    _replaced: bool = field(default=False, repr=False)
    _shut: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def force_flush(self, timeout: float = 30.0) -> bool:
        """Finish in-flight evaluations and deliver everything recorded so far.

        Returns False, as the SDK does, when anything was not flushed within
        ``timeout`` seconds: an evaluation still running (its span went out
        ``pending``), or exports the backend has not accepted yet (they stay
        queued and are retried).
        """
        end = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, end - time.monotonic())

        # The evaluating processor waits for evaluations in flight and says False when one
        # did not finish; the SDK's batch processors always say True, so the export queues
        # behind them are asked last.
        ok = self.tracer_provider.force_flush(int(left() * 1000))
        # A pull reader (Prometheus) queues one snapshot per collection and serves them all
        # at the next scrape, so flushing it would duplicate series: flush push readers only.
        flushers: list[Any] = (
            [self.meter_provider] if self._push_readers is None else list(self._push_readers)
        )
        for provider in (*flushers, self.logger_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                try:
                    ok = bool(flush(int(left() * 1000))) and ok
                except Exception:
                    ok = False
        for delivery in self._deliveries:
            ok = delivery.flush(left()) and ok
        # The hook's own queue last (PhoenixAnnotations): the evaluations above fed it.
        flush_hook = getattr(self.on_evaluation, "flush", None)
        if callable(flush_hook):
            try:
                ok = _call_with_timeout(flush_hook, left()) is not False and ok
            except Exception:
                _logger.debug("ragpulse: flush of %r failed", self.on_evaluation, exc_info=True)
                ok = False
        return ok

    def shutdown(self, timeout: float | None = None) -> None:
        """Flush and stop what ragpulse created, within ``timeout`` (``shutdown_timeout``).

        Evaluations still running get half of it; their spans then go out
        ``pending``. Exports the backend does not accept by the deadline are
        dropped and counted; an ``on_evaluation`` hook with a ``shutdown`` of its own
        (``PhoenixAnnotations``) gets what is left. An application's own providers stay up.
        """
        with self._lock:
            if self._shut:
                return
            self._shut = True
        _exit.clear_live(self)
        if self._replaced:
            return  # the live handle owns the providers and exporters now
        grace = self.settings.shutdown_timeout if timeout is None else max(0.0, timeout)
        end = time.monotonic() + grace
        self._deadline.start(grace)
        if self.processor is not None:
            self.processor.retire(timeout=grace / 2)
            if self.joined:
                self.processor.downstream.force_flush(int(max(0.0, end - time.monotonic()) * 1000))
        if self._span_processor is not None:
            self._span_processor.shutdown()
        # Traces first: their last evaluations still emit metrics and events; then the rest.
        for owned in self._owned:
            try:
                owned.shutdown()
            except Exception:
                _logger.debug("ragpulse: shutdown of %r failed", owned, exc_info=True)
            _retired.add(owned)
        for delivery in self._deliveries:
            delivery.shutdown(max(0.0, end - time.monotonic()))
        # A hook with a shutdown of its own (PhoenixAnnotations) gets what is left of the
        # grace: no evaluation calls it any more, and its thread has been sending all along,
        # so spans and metrics are not made to wait for it.
        shutdown_hook = getattr(self.on_evaluation, "shutdown", None)
        if callable(shutdown_hook):
            try:
                _call_with_timeout(shutdown_hook, max(0.0, end - time.monotonic()))
            except Exception:
                _logger.debug("ragpulse: shutdown of %r failed", self.on_evaluation, exc_info=True)

    def _hand_over(self, successor: Handle) -> None:
        """``successor`` takes this handle's providers and exporters; this one keeps none."""
        self._replaced = True
        self._owned = []
        self._deliveries = []
        self._span_processor = None
        successor.joined = self.joined


def _call_with_timeout(method: Callable[..., Any], timeout: float) -> Any:
    """Call a hook's ``flush`` or ``shutdown`` with ``timeout`` when it takes one."""
    try:
        inspect.signature(method).bind(timeout)
    except (TypeError, ValueError):  # takes no timeout, or has no signature to read
        return method()
    return method(timeout)


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


def _clear_processors(provider: TracerProvider) -> None:
    """Take every (stopped) processor out of a tracer provider ragpulse shut down."""
    multi = getattr(provider, "_active_span_processor", None)
    lock = getattr(multi, "_lock", None)
    if isinstance(getattr(multi, "_span_processors", None), tuple) and lock is not None:
        with lock:
            multi._span_processors = ()  # type: ignore[union-attr]


def _stop_evaluating(provider: TracerProvider) -> None:
    """Take our evaluating processor out of ``provider``; its downstream takes its place."""
    multi = getattr(provider, "_active_span_processor", None)
    existing = getattr(multi, "_span_processors", None)
    lock = getattr(multi, "_lock", None)
    if not isinstance(existing, tuple) or lock is None:
        return
    ours = [p for p in existing if isinstance(p, EvaluatingSpanProcessor)]
    with lock:
        multi._span_processors = tuple(  # type: ignore[union-attr]
            p.downstream if isinstance(p, EvaluatingSpanProcessor) else p for p in existing
        )
    for processor in ours:
        processor.retire()


@dataclass
class _Evaluation:
    """What a processor is made of besides its settings: objects, not values."""

    judge: Judge | None
    sampler: EvalSampler | None
    worker: EvalWorker | None
    on_evaluation: Callable[[RagRecord, Evaluation], None] | None

    def processor_factory(
        self,
        settings: Settings,
        service: str,
        meter_provider: metrics.MeterProvider,
        logger_provider: _logs.LoggerProvider,
    ) -> Callable[[SpanProcessor], EvaluatingSpanProcessor]:
        sampler = self.sampler or EvalSampler.from_settings(settings)

        def make(downstream: SpanProcessor) -> EvaluatingSpanProcessor:
            processor = EvaluatingSpanProcessor.from_settings(
                downstream,
                settings,
                judge=self.judge,
                sampler=sampler,
                worker=self.worker,
                service_name=service,
                meter_provider=meter_provider,
                logger_provider=logger_provider,
                on_evaluation=self.on_evaluation,
            )
            if isinstance(logger_provider, LoggerProvider):
                # The GenAI instrumentation may write a call's messages as log events on
                # this provider: they join their trace in the processor (inert once it closes).
                logger_provider.add_log_record_processor(processor.content_events)
            return processor

        return make


def configure(
    *,
    service_name: str | None = None,
    endpoint: str | None = None,
    output_file: str | Path | None = None,
    prometheus_port: int | None = None,
    evaluate: bool | None = None,
    judge: Judge | str | None = None,
    metrics: Collection[object] | str | None = None,
    sample_rate: float | None = None,
    thresholds: Mapping[str, float] | None = None,
    calibration: str | Path | None = None,
    capture_content: bool | None = None,
    on_evaluation: Callable[[RagRecord, Evaluation], None] | None = None,
    sampler: EvalSampler | None = None,
    worker: EvalWorker | None = None,
    export: ExportOptions | None = None,
    judging: JudgeOptions | None = None,
    sampling: SamplingOptions | None = None,
    bounds: BoundsOptions | None = None,
    content: ContentOptions | None = None,
    evaluation: EvaluationOptions | None = None,
) -> Handle:
    """Set up ragpulse for this process and return a ``Handle``.

    With an OTLP endpoint (``endpoint=`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``),
    traces, metrics and log events go there over ``http/protobuf`` or ``grpc``
    (``OTEL_EXPORTER_OTLP_PROTOCOL``), through exporters that retry and buffer
    while the backend restarts. Without one, they are appended as OTLP-JSON lines
    to ``output_file`` (default ``ragpulse-traces.jsonl``, with ``-logs`` and
    ``-metrics`` siblings). If the application already set a global SDK
    ``TracerProvider``, ragpulse joins it: its processors keep working and receive
    the evaluated spans. ``evaluate=False`` (or ``RAGPULSE_EVALUATE=false``) records
    spans only. Called again, the new evaluation settings replace the old ones and the
    exporters stay.

    ``judge=`` is a ``Judge``, or the name of a built-in one (``RAGPULSE_JUDGE``):
    ``"lexical"``, ``"openai"``, ``"nli"`` or ``"tokens"`` (a local ONNX model), or
    ``"cascade"``; ``judging=JudgeOptions(...)`` sets its model, device and how its work
    runs. ``metrics=`` names built-in metrics and your own (``@ragpulse.metric`` functions,
    ``RubricMetric`` objects). ``calibration=`` names a file from ``ragpulse calibrate``
    whose threshold sets its metric's pass/fail label.

    The rest comes in groups, each an options object whose fields are settings:
    ``export=ExportOptions(...)``, ``judging=JudgeOptions(...)``,
    ``sampling=SamplingOptions(...)``, ``bounds=BoundsOptions(...)``,
    ``content=ContentOptions(...)`` (with the ``redact`` hook) and
    ``evaluation=EvaluationOptions(...)``. Every setting also has a variable
    (``docs/settings.md``); a bad value is logged and replaced by its default, never raised.
    """
    groups = (export, judging, sampling, bounds, content, evaluation)
    keywords: dict[str, object] = option_settings(*groups)
    keywords.update(
        service_name=service_name,
        endpoint=endpoint,
        output_file=output_file,
        prometheus_port=prometheus_port,
        evaluate=evaluate,
        metrics=metrics,
        sample_rate=sample_rate,
        capture_content=capture_content,
        thresholds=calibrated_thresholds(calibration, thresholds),
    )
    if isinstance(judge, str):
        keywords["judge"], judge = judge, None
    if worker is not None:
        given = [spelling(name) for name in _WORKER_SETTINGS if keywords.get(name) is not None]
        if given:
            raise TypeError(f"configure(): pass worker= or {', '.join(given)}, not both")
    redact = content.redact if content is not None else None
    settings = Settings.load(keywords)
    parts = _Evaluation(judge, sampler, worker, on_evaluation)
    set_policy(settings.content_policy(redact))
    set_tool_roles(settings.tool_policy)
    previous = _exit.live()
    if isinstance(previous, Handle) and previous.tracer_provider is trace.get_tracer_provider():
        handle = _reconfigure(previous, settings, parts)
    else:
        handle = _build(settings, parts)
    _exit.set_live(handle, settings.shutdown_timeout)
    if settings.handle_sigterm:
        _exit.install_sigterm_handler()
    else:
        _exit.uninstall_sigterm_handler()
    return handle


def _reconfigure(previous: Handle, settings: Settings, parts: _Evaluation) -> Handle:
    """A second ``configure()``: new evaluation settings in front of the first call's exporters."""
    changed = [n for n in _EXPORT_SETTINGS if getattr(settings, n) != getattr(previous.settings, n)]
    if changed:
        _logger.warning(
            "ragpulse: configure() called again: %s keep the values of the first call "
            "(OpenTelemetry providers are set once per process)",
            ", ".join(changed),
        )
    service = str(previous.tracer_provider.resource.attributes.get(SERVICE_NAME, "unknown"))
    make = parts.processor_factory(
        settings, service, previous.meter_provider, previous.logger_provider
    )
    if settings.evaluate:
        processor = _join_tracer_provider(previous.tracer_provider, make)
    else:
        processor = None
        _stop_evaluating(previous.tracer_provider)
    handle = Handle(
        tracer_provider=previous.tracer_provider,
        processor=processor,
        meter_provider=previous.meter_provider,
        logger_provider=previous.logger_provider,
        endpoint=previous.endpoint,
        output_files=previous.output_files,
        prometheus_url=previous.prometheus_url,
        joined=previous.joined,
        on_evaluation=parts.on_evaluation,
        settings=settings,
        _owned=previous._owned,
        _push_readers=previous._push_readers,
        _span_processor=previous._span_processor,
        _deliveries=previous._deliveries,
        _deadline=previous._deadline,
    )
    previous._hand_over(handle)
    return handle


def _build(settings: Settings, parts: _Evaluation) -> Handle:
    """Providers, exporters and the evaluating processor for a first ``configure()``."""
    attributes: dict[str, Any] = {}
    if settings.service_name:
        attributes[SERVICE_NAME] = settings.service_name
    resource = Resource.create(attributes)
    service = str(resource.attributes.get(SERVICE_NAME, "unknown_service"))
    exporters = outputs.Exporters(settings)
    owned: list[Any] = []

    # --- metrics --------------------------------------------------------------
    prometheus_url = None
    push_readers: list[MetricReader] | None = None
    global_meter_provider = metrics.get_meter_provider()
    meter_retired = global_meter_provider in _retired
    if isinstance(global_meter_provider, MeterProvider) and not meter_retired:
        meter_provider: metrics.MeterProvider = global_meter_provider
        exporters.drops.bind(meter_provider)
    else:
        prometheus = None
        if settings.prometheus_port is not None:
            prometheus = outputs.prometheus_reader_or_none(
                settings.prometheus_host, settings.prometheus_port
            )
            if prometheus is not None:
                prometheus_url = outputs.prometheus_url(settings)
        sdk_meter_provider, push_readers = outputs.meter_provider(
            exporters, resource, prometheus=prometheus
        )
        if not meter_retired:  # the API refuses a second global; ours is passed explicitly
            metrics.set_meter_provider(sdk_meter_provider)
        owned.append(sdk_meter_provider)
        meter_provider = sdk_meter_provider

    # --- logs (evaluation events) ---------------------------------------------------
    not_written: set[str] = set()  # signals the application's own providers export
    global_logger_provider = _logs.get_logger_provider()
    logger_retired = global_logger_provider in _retired
    if isinstance(global_logger_provider, LoggerProvider) and not logger_retired:
        logger_provider: _logs.LoggerProvider = global_logger_provider
        not_written.add("logs")  # the application's own logger provider exports the events
    else:
        sdk_logger_provider = outputs.logger_provider(exporters, resource)
        if not logger_retired:
            _logs.set_logger_provider(sdk_logger_provider)
        owned.append(sdk_logger_provider)
        logger_provider = sdk_logger_provider
    if isinstance(global_meter_provider, MeterProvider) and not meter_retired:
        not_written.add("metrics")  # the application's own meter provider exports them

    make = parts.processor_factory(settings, service, meter_provider, logger_provider)
    span_processor: SpanProcessor | None = None

    def add_pipeline(provider: TracerProvider) -> EvaluatingSpanProcessor | None:
        """Our exporting processor, behind the evaluator when evaluation is on."""
        nonlocal span_processor
        span_processor = BatchSpanProcessor(
            exporters.spans(),
            max_queue_size=outputs.queue_size(OTEL_BSP_MAX_QUEUE_SIZE, settings.export_queue_size),
        )
        evaluating = make(span_processor) if settings.evaluate else None
        provider.add_span_processor(evaluating or span_processor)
        return evaluating

    # --- the tracer provider: join or build ---------------------------------------------
    existing = trace.get_tracer_provider()
    retired = isinstance(existing, TracerProvider) and existing in _retired
    joined = isinstance(existing, TracerProvider) and not retired
    processor: EvaluatingSpanProcessor | None = None
    if retired and isinstance(existing, TracerProvider):
        # Ours, shut down by a handle: its processors are stopped, so they go, and it gets
        # a fresh pipeline (its resource stays the first call's: a provider's is fixed).
        tracer_provider = existing
        _clear_processors(existing)
        processor = add_pipeline(existing)
        owned.insert(0, existing)
        _retired.discard(existing)
    elif isinstance(existing, TracerProvider):
        tracer_provider = existing
        processor = _join_tracer_provider(existing, make) if settings.evaluate else None
        if processor is not None:
            not_written.add("traces")  # the app's own processors export the scored spans
        elif settings.evaluate or "traces" not in exporters.files:
            # Unknown provider internals, or an endpoint to copy spans to: ours goes beside.
            processor = add_pipeline(existing)
        else:
            not_written.add("traces")
    else:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        processor = add_pipeline(tracer_provider)
        trace.set_tracer_provider(tracer_provider)
        owned.insert(0, tracer_provider)

    return Handle(
        tracer_provider=tracer_provider,
        processor=processor,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        endpoint=settings.endpoint or settings.traces_endpoint,
        output_files={k: v for k, v in exporters.files.items() if k not in not_written},
        prometheus_url=prometheus_url,
        joined=joined,
        on_evaluation=parts.on_evaluation,
        settings=settings,
        _owned=owned,
        _push_readers=push_readers,
        _span_processor=span_processor,
        _deliveries=exporters.deliveries,
        _deadline=exporters.deadline,
    )
