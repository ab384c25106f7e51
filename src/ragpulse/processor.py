"""``EvaluatingSpanProcessor``: holds a sampled unit's span until its evaluation returns.

Wraps any downstream ``SpanProcessor``. Spans that are not sampled evaluation
units go downstream at once. A sampled unit's ``ReadableSpan`` is held (bounded
by time, count and bytes) while the worker evaluates it; the result is merged
into a rebuilt ``ReadableSpan`` with the same ids, times, events, links, status,
resource and scope, and that goes downstream. Past a bound the span goes on as
it is with ``ragpulse.eval.status = "pending"`` and the late result follows as a
carrier span linked to it. No span is ever lost or held past its bound.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import _logs, metrics
from opentelemetry.context import Context as OtelContext
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from ragpulse import semconv
from ragpulse._version import __version__
from ragpulse.adapters import TraceBuffer, is_buffered, record_from_trace
from ragpulse.capture._record import handoff
from ragpulse.emit import EmitOptions, Emitter, PipelineMetrics, pending_attributes, span_attributes
from ragpulse.evaluation.types import (
    ALL_METRICS,
    GROUNDEDNESS,
    EvalStatus,
    Evaluation,
    RagRecord,
)
from ragpulse.judges.base import Judge
from ragpulse.sampling import EvalSampler
from ragpulse.worker import EvalWorker

_logger = logging.getLogger("ragpulse.processor")

DEFAULT_HOLD_TIMEOUT = 30.0
DEFAULT_MAX_HELD_SPANS = 2048
DEFAULT_MAX_HELD_BYTES = 64 * 1024 * 1024
_MAX_LATE_TARGETS = 4096
_SCOPE = InstrumentationScope("ragpulse", __version__)
_ids = RandomIdGenerator()

OnEvaluation = Callable[[RagRecord, Evaluation], None]


@dataclass
class _Held:
    span: ReadableSpan
    held_at: float
    deadline: float
    size: int


def rebuild(span: ReadableSpan, extra: Mapping[str, Any]) -> ReadableSpan:
    """A copy of an ended span with ``extra`` attributes merged in; everything else kept."""
    attributes = dict(span.attributes or {})
    attributes.update(extra)
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _estimate_size(record: RagRecord) -> int:
    # The record's texts dominate what is held (the span carries capped copies of
    # them); counting those is enough for a memory bound and costs no attribute walk.
    size = 1024 + len(record.answer or "") + len(record.question or "")
    size += len(record.reference or "")
    for context in record.contexts:
        size += len(context.text)
    return size * 2


def _is_local_root(span: ReadableSpan) -> bool:
    return span.parent is None or span.parent.is_remote


class EvaluatingSpanProcessor(SpanProcessor):
    """Evaluates sampled RAG requests and writes the scores onto their own spans.

    Args:
        downstream: the processor that exports (usually a ``BatchSpanProcessor``).
        judge: what evaluates; default ``LexicalJudge()`` (offline, no network).
        sampler: which requests to evaluate; default ``EvalSampler.from_env()``.
        metrics: which metrics to compute.
        hold_timeout: seconds a span may wait for its evaluation before it is
            forwarded with status ``pending``.
        max_held_spans, max_held_bytes: bounds on what is held at once.
        thresholds: per-metric pass/fail thresholds for ``.label``.
        inline_annotations: also write OpenInference ``annotations.N.annotation.*``.
        adapters: evaluate traces instrumented by OpenInference, the GenAI
            conventions or OpenLLMetry at their local root.
        on_evaluation: called with each ``(record, evaluation)`` on the worker thread.
    """

    def __init__(
        self,
        downstream: SpanProcessor,
        *,
        judge: Judge | None = None,
        sampler: EvalSampler | None = None,
        metrics: Collection[str] = ALL_METRICS,
        hold_timeout: float = DEFAULT_HOLD_TIMEOUT,
        max_held_spans: int = DEFAULT_MAX_HELD_SPANS,
        max_held_bytes: int = DEFAULT_MAX_HELD_BYTES,
        thresholds: Mapping[str, float] | None = None,
        inline_annotations: bool = False,
        service_name: str | None = None,
        adapters: bool = True,
        trace_buffer: TraceBuffer | None = None,
        max_queue_size: int = 1000,
        concurrency: int = 4,
        evaluation_timeout: float = 60.0,
        worker: EvalWorker | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        logger_provider: _logs.LoggerProvider | None = None,
        on_evaluation: OnEvaluation | None = None,
    ) -> None:
        if judge is None:
            from ragpulse.judges.lexical import LexicalJudge

            judge = LexicalJudge()
        self._downstream = downstream
        self._sampler = sampler or EvalSampler.from_env()
        self._hold_timeout = hold_timeout
        self._max_held_spans = max_held_spans
        self._max_held_bytes = max_held_bytes
        self._adapters = adapters
        self._buffer = trace_buffer or TraceBuffer()
        self._on_evaluation = on_evaluation
        # Our own worker reports every judge attempt (retries included); a worker passed in
        # may not, so then the final evaluation is what gets counted.
        self._counts_attempts = worker is None
        self._worker = worker or EvalWorker(
            judge,
            max_queue_size=max_queue_size,
            concurrency=concurrency,
            timeout=evaluation_timeout,
            judge_budget_available=self._sampler.judge_budget_available,
            metrics=metrics,
            on_judge_call=self._on_judge_call,
        )
        options = EmitOptions(
            thresholds=dict(thresholds) if thresholds is not None else EmitOptions().thresholds,
            inline_annotations=inline_annotations,
            service_name=service_name,
        )
        self._metrics = PipelineMetrics(
            meter_provider,
            queue_size=lambda: self._worker.queue_size,
            held=lambda: (len(self._held), self._held_bytes),
            breaker_open=lambda: self._worker.breaker_open,
        )
        self._emitter = Emitter(options, self._metrics, logger_provider)
        self._options = options

        # One lock guards the held spans and their byte count. It is never held
        # while calling downstream, the judge or user callbacks: whoever pops a
        # span under the lock forwards it after releasing it, exactly once.
        self._lock = threading.Lock()
        self._held: OrderedDict[int, _Held] = OrderedDict()
        self._held_bytes = 0
        # Resources of units forwarded before their result, for the carrier span.
        self._late_targets: OrderedDict[int, Resource] = OrderedDict()
        self._wake = threading.Condition(self._lock)
        self._shutdown = False
        self._reaper: threading.Thread | None = None
        self._start_reaper()
        handoff.add_consumer()
        self._finalizer = weakref.finalize(self, handoff.remove_consumer)
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._after_fork_in_child)
            os.register_at_fork(after_in_child=lambda: (m := ref()) is not None and m())

    # --- SpanProcessor -------------------------------------------------------

    def on_start(self, span: Span, parent_context: OtelContext | None = None) -> None:
        self._downstream.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self._shutdown:
            self._downstream.on_end(span)
            return
        try:
            record = self._record_for(span)
            if record is not None and self._consider(span, record):
                return
        except Exception:
            # Never let evaluation plumbing cost the user a span.
            _logger.exception("ragpulse: evaluation skipped for span %s", span.name)
        self._downstream.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait for in-flight evaluations, then forward whatever is still held."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        self._worker.flush(max(0.0, deadline - time.monotonic()))
        self._forward_all_held("flush")
        remaining = max(0, int((deadline - time.monotonic()) * 1000))
        return self._downstream.force_flush(remaining)

    def shutdown(self) -> None:
        """Drain within the worker's bound, forward everything held, shut downstream down."""
        if self.retire(timeout=self._hold_timeout):
            self._downstream.shutdown()

    def retire(self, timeout: float = 5.0) -> bool:
        """Stop evaluating: drain within ``timeout``, forward what is held; downstream runs on.

        Later spans pass straight through. Returns False when already retired.
        """
        with self._lock:
            if self._shutdown:
                return False
            self._shutdown = True
            self._wake.notify_all()
        self._worker.shutdown(timeout=timeout)
        self._forward_all_held("shutdown")
        self._finalizer()
        return True

    # --- introspection ---------------------------------------------------------

    @property
    def held_spans(self) -> int:
        """Spans held right now."""
        return len(self._held)

    @property
    def held_bytes(self) -> int:
        """Estimated bytes held right now."""
        return self._held_bytes

    @property
    def downstream(self) -> SpanProcessor:
        """The processor that receives every span, evaluated or not."""
        return self._downstream

    @property
    def worker(self) -> EvalWorker:
        """The evaluation worker (for its counters)."""
        return self._worker

    # --- internals ---------------------------------------------------------------

    def _record_for(self, span: ReadableSpan) -> RagRecord | None:
        attributes = span.attributes or {}
        if attributes.get(semconv.RAG_UNIT):
            return handoff.take(span.context)
        if not self._adapters:
            return None
        scope = span.instrumentation_scope
        if scope is not None and scope.name == "ragpulse":
            return None  # our own retrieval/generation spans report through the record
        if is_buffered(span):
            self._buffer.add(span)
        if not _is_local_root(span) or span.context is None:
            return None
        spans = self._buffer.pop_trace(span.context.trace_id)
        if not spans:
            return None
        record = record_from_trace(span, spans)
        if record is None or not record.contexts or record.answer is None:
            return None
        return record

    def _consider(self, span: ReadableSpan, record: RagRecord) -> bool:
        """Sample, hold and submit; True when the span is now ours to forward."""
        context = span.context
        if context is None:
            return False
        decision = self._sampler.should_evaluate(
            context.trace_id, name=record.name, attributes=span.attributes
        )
        if not decision.evaluate:
            self._metrics.count_decision(decision.reason)
            return False
        size = _estimate_size(record)
        now = time.monotonic()
        with self._lock:
            fits = (
                not self._shutdown
                and len(self._held) < self._max_held_spans
                and self._held_bytes + size <= self._max_held_bytes
            )
            if fits:
                self._held[context.span_id] = _Held(span, now, now + self._hold_timeout, size)
                self._held_bytes += size
                if len(self._held) == 1:
                    self._wake.notify()
        if not self._worker.submit(record, self._on_result):
            self._metrics.count_decision(semconv.REASON_QUEUE_FULL)
            held = self._pop(context.span_id)
            skipped = {
                semconv.EVAL_STATUS: EvalStatus.SKIPPED.value,
                semconv.EVAL_ERROR_TYPE: semconv.REASON_QUEUE_FULL,
            }
            self._downstream.on_end(rebuild(held.span if held else span, skipped))
            return True
        self._metrics.count_decision(decision.reason)
        if not fits:
            # Over a holding bound: export now; the result follows as a carrier span.
            self._remember_late(context.span_id, span.resource)
            self._metrics.forced_exports.add(1, {"reason": "max_held"})
            self._downstream.on_end(rebuild(span, pending_attributes()))
        return True

    def _pop(self, span_id: int) -> _Held | None:
        with self._lock:
            held = self._held.pop(span_id, None)
            if held is not None:
                self._held_bytes -= held.size
            return held

    def _remember_late(self, span_id: int, resource: Resource) -> None:
        with self._lock:
            self._late_targets[span_id] = resource
            while len(self._late_targets) > _MAX_LATE_TARGETS:
                self._late_targets.popitem(last=False)

    def _on_result(self, record: RagRecord, evaluation: Evaluation) -> None:
        """Worker thread: forward the held span with its scores, or send a carrier."""
        target = record.span_context
        held = self._pop(target.span_id) if target is not None else None
        if held is not None:
            self._metrics.hold_time.record(time.monotonic() - held.held_at)
            self._downstream.on_end(rebuild(held.span, span_attributes(evaluation, self._options)))
        elif target is not None:
            self._metrics.late_results.add(1)
            with self._lock:
                resource = self._late_targets.pop(target.span_id, None)
            self._downstream.on_end(self._carrier(target, evaluation, resource))
        try:
            if not self._counts_attempts:
                self._on_judge_call(evaluation)
            self._emitter.emit(record, evaluation, target)
            self._sampler.record_score(evaluation.score(GROUNDEDNESS))
        except Exception:
            _logger.exception("ragpulse: could not emit evaluation signals")
        if self._on_evaluation is not None:
            try:
                self._on_evaluation(record, evaluation)
            except Exception:
                _logger.exception("ragpulse: on_evaluation callback failed")

    def _on_judge_call(self, evaluation: Evaluation) -> None:
        """Worker thread, after every judge attempt: count it and spend its tokens."""
        try:
            self._emitter.judge_call(evaluation)
            tokens = evaluation.usage.prompt_tokens + evaluation.usage.completion_tokens
            if tokens:
                self._sampler.record_tokens(tokens)
        except Exception:
            _logger.exception("ragpulse: could not record a judge call")

    def _carrier(
        self, target: SpanContext, evaluation: Evaluation, resource: Resource | None
    ) -> ReadableSpan:
        """A late result as its own span: EVALUATOR kind, same trace, linked to the target."""
        end = time.time_ns()
        start = end - int(evaluation.duration_ms * 1_000_000)
        attributes = span_attributes(evaluation, self._options)
        attributes[semconv.OPENINFERENCE_SPAN_KIND] = semconv.OI_KIND_EVALUATOR
        attributes[semconv.EVAL_TARGET_TRACE_ID] = format(target.trace_id, "032x")
        attributes[semconv.EVAL_TARGET_SPAN_ID] = format(target.span_id, "016x")
        context = SpanContext(
            trace_id=target.trace_id,
            span_id=_ids.generate_span_id(),
            is_remote=False,
            trace_flags=target.trace_flags,
            trace_state=target.trace_state,
        )
        return ReadableSpan(
            name="ragpulse.evaluation",
            context=context,
            parent=target,
            resource=resource or Resource.create({}),
            attributes=attributes,
            links=[Link(target)],
            kind=SpanKind.INTERNAL,
            status=Status(
                StatusCode.ERROR if evaluation.status is EvalStatus.ERROR else StatusCode.OK
            ),
            start_time=start,
            end_time=end,
            instrumentation_scope=_SCOPE,
        )

    def _forward_all_held(self, reason: str) -> None:
        with self._lock:
            items = list(self._held.items())
            self._held.clear()
            self._held_bytes = 0
        for span_id, held in items:
            self._forward_pending(span_id, held, reason)

    def _forward_pending(self, span_id: int, held: _Held, reason: str) -> None:
        self._remember_late(span_id, held.span.resource)
        self._metrics.forced_exports.add(1, {"reason": reason})
        self._metrics.hold_time.record(time.monotonic() - held.held_at)
        self._downstream.on_end(rebuild(held.span, pending_attributes()))

    # --- the hold-timeout reaper ---------------------------------------------------

    def _start_reaper(self) -> None:
        self._reaper = threading.Thread(
            target=self._reap_forever, name="ragpulse-hold-reaper", daemon=True
        )
        self._reaper.start()

    def _reap_forever(self) -> None:
        while True:
            expired: list[tuple[int, _Held]] = []
            with self._lock:
                if self._shutdown:
                    return
                now = time.monotonic()
                # Every span is held for the same timeout, so insertion order is
                # deadline order: only the front needs looking at.
                while self._held:
                    span_id, held = next(iter(self._held.items()))
                    if held.deadline > now:
                        break
                    self._held.popitem(last=False)
                    self._held_bytes -= held.size
                    expired.append((span_id, held))
                if not expired:
                    wait = None
                    if self._held:
                        wait = next(iter(self._held.values())).deadline - now
                    self._wake.wait(timeout=wait)
                    continue
            for span_id, held in expired:
                self._forward_pending(span_id, held, "hold_timeout")

    def _after_fork_in_child(self) -> None:
        # The parent still holds (and will forward) these spans; the child must not.
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._held.clear()
        self._held_bytes = 0
        self._late_targets.clear()
        if not self._shutdown:
            self._start_reaper()
