"""``EvaluatingSpanProcessor``: holds a sampled unit's span until its evaluation returns.

Wraps any downstream ``SpanProcessor`` and adds one concern, evaluation; the
parts live in their own modules and this one connects them:

- which units: ``EvalSampler`` decides (rate, rules, boost, throttle), an
  ``EvaluationBudget`` caps evaluations per minute, ``Coverage`` (``ragpulse.sampling.coverage``)
  counts what was asked for, dropped and completed and lowers the sampler's rate to
  what the judge sustains while evaluations are dropped;
- holding: ``HeldSpans`` (``ragpulse.processor.held``) keeps each submitted unit's span,
  bounded by time, count and bytes, and remembers where late results go;
- evaluating: ``EvalWorker`` runs the judge off the request's thread;
- signals: ``EvaluationSink`` (``ragpulse.processor.settle``) writes a result onto its span
  (or a carrier span), metrics, log events, the sampler's feedback and the hook.

Retrieval spans of a trace the sampler's trace-id rate selects wait for their unit
(in ``HeldSpans``, within the same bounds): an evaluated unit takes the ones its
record's contexts came from (``RagRecord.sources``), and they leave with its result,
each rebuilt with its documents' scores (``ragpulse.eval.context_relevance.documents.N.*``);
a unit not evaluated, or forwarded without its result, lets them go on unchanged, as
does its trace's local root ending, or ``hold_timeout`` passing, for any left.

The request's thread only hands over: ``on_end`` appends a span it may have to read
(a unit, with the record its ``@rag`` call left; a retrieval span; a trace's local
root) to a deque bounded by ``MAX_ENDED_UNREAD``, in O(1), and the worker thread reads
it at its next look (within ``LINGER``): sampling, holding, building an adapter's
record, submitting. Ended spans are immutable, so nothing is lost by reading them
later; they are read in the order they ended. A span ending while that deque is full
goes on at once (a unit the sampler chooses ``skipped``, counted as ``queue_full``).

Other spans that are not sampled units go downstream at once. Past a bound a held span
goes on as it is with ``ragpulse.eval.status = "pending"`` and its result follows
as a carrier span linked to it. Every unit the sampler chooses leaves with a status,
whatever the load: its scores, ``pending``, or ``skipped`` with the reason evaluation
refused it (``queue_full``, ``throttled``, ``over_budget``, ``shutdown`` for one that
ends once evaluation stopped); only a unit the sample rate leaves out goes on unchanged.
``force_flush`` waits for evaluations in flight within its timeout and says False when
any did not finish; ``shutdown`` (and an interpreter exit without one) waits at most
``shutdown_timeout`` seconds for them, then forwards every span still held, pending. No
span is ever lost or held past its bound.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import os
import threading
import time
import weakref
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from opentelemetry import _logs
from opentelemetry import metrics as metrics_api
from opentelemetry._logs import LogRecord
from opentelemetry.context import Context as OtelContext
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ragpulse import errors, semconv
from ragpulse._bucket import TokenBucket
from ragpulse._guard import Guard
from ragpulse.adapters import (
    TraceBuffer,
    estimate_bytes,
    is_buffered,
    is_evidence_span,
    is_local_root,
    is_unit_record,
    may_answer,
    records_from_trace,
)
from ragpulse.adapters._common import attributes_of
from ragpulse.adapters._content_events import from_log_record
from ragpulse.adapters._provenance import SeenResults, result_digest
from ragpulse.adapters._tools import is_tool
from ragpulse.capture._record import handoff
from ragpulse.evaluation.types import EvalStatus, Evaluation, RagRecord
from ragpulse.judges._labels import judge_kind, label_thresholds
from ragpulse.judges.base import Judge
from ragpulse.judging.custom_metrics import with_custom_metrics
from ragpulse.judging.process import close_in_background
from ragpulse.judging.resilient import ResilientJudge
from ragpulse.processor.held import Held, HeldSpans, Waiting
from ragpulse.processor.log_intake import ContentEventIntake
from ragpulse.processor.settle import EvaluationSink, OnEvaluation, rebuild
from ragpulse.sampling.budget import EvaluationBudget
from ragpulse.sampling.coverage import Coverage
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings import Settings
from ragpulse.settings.options import (
    BoundsOptions,
    EvaluationOptions,
    JudgeOptions,
    SamplingOptions,
    option_settings,
)
from ragpulse.signals.dimensions import with_unit_attributes
from ragpulse.signals.emit import EmitOptions, Emitter, PipelineMetrics, pending_attributes
from ragpulse.worker import EvalWorker, record_size

__all__ = [
    "EvaluatingSpanProcessor",
    "OnEvaluation",
    "rebuild",
]

_guard = Guard("ragpulse.processor")

MAX_ENDED_UNREAD = 4 * Settings.max_held_spans
"""Ended spans handed over by request threads and not yet read by the worker thread, at
most; past it a span goes on as it is (a unit unevaluated, counted as ``queue_full``)."""


class EvaluatingSpanProcessor(SpanProcessor):
    """Evaluates sampled RAG requests and writes the scores onto their own spans.

    Every value not given is read as ``configure()`` reads it: its ``RAGPULSE_*``
    variable, else its default (``docs/settings.md``).

    Args:
        downstream: the processor that exports (usually a ``BatchSpanProcessor``).
        judge: what evaluates; default the judge ``RAGPULSE_JUDGE`` names, else the
            offline ``LexicalJudge`` (no network).
        sampler: which requests to evaluate; default one built from ``RAGPULSE_SAMPLE_RATE``
            and ``sampling``. Its ``max_evaluations_per_minute`` and
            ``max_judge_tokens_per_hour`` are enforced here.
        worker: a worker built by the caller, instead of one built from ``judge``; when
            its judge is a ``ResilientJudge`` its attempts are counted here too.
        metrics: which metrics to compute (names, or your own metric objects).
        thresholds: per-metric pass/fail thresholds for ``.label``.
        judging: how the judge's work runs (``concurrency``, ``evaluation_timeout``,
            ``nice``), when ``worker`` is not given.
        sampling: forced evaluations and the caps on them, when ``sampler`` is not given.
        bounds: how long a span waits for its scores, what may be held and queued.
        evaluation: ``strict``, ``inline_annotations``, which tools' results are evidence.
        on_evaluation: called with each ``(record, evaluation)`` on the worker thread.
        adapters: evaluate traces instrumented by OpenInference, the GenAI
            conventions or OpenLLMetry at their local root.
        settings: all settings at once, read already (``from_settings``), in place of
            ``metrics``, ``thresholds`` and the groups.
    """

    def __init__(
        self,
        downstream: SpanProcessor,
        *,
        judge: Judge | None = None,
        sampler: EvalSampler | None = None,
        worker: EvalWorker | None = None,
        metrics: Collection[object] | str | None = None,
        thresholds: Mapping[str, float] | None = None,
        judging: JudgeOptions | None = None,
        sampling: SamplingOptions | None = None,
        bounds: BoundsOptions | None = None,
        evaluation: EvaluationOptions | None = None,
        service_name: str | None = None,
        meter_provider: metrics_api.MeterProvider | None = None,
        logger_provider: _logs.LoggerProvider | None = None,
        on_evaluation: OnEvaluation | None = None,
        adapters: bool = True,
        trace_buffer: TraceBuffer | None = None,
        settings: Settings | None = None,
    ) -> None:
        given = option_settings(judging, sampling, bounds, evaluation)
        if settings is None:
            settings = Settings.load({"metrics": metrics, "thresholds": thresholds, **given})
        elif given or metrics is not None or thresholds is not None:
            raise TypeError(
                "EvaluatingSpanProcessor: pass settings= or the groups, metrics= and thresholds="
            )
        # A worker given is used as it is (the worker's bounds in settings are then not
        # applied). Without a judge, the one settings.judge names (default: the offline
        # judge), scoring correctness in settings.correctness_mode.
        if judge is None and worker is None:
            from ragpulse.judging._factory import judge_from_settings

            judge = judge_from_settings(settings)
        if worker is None:
            settings.check_judge_cost(judge)
        sampler = sampler or EvalSampler.from_settings(settings)
        hold_timeout = settings.hold_timeout
        thresholds = settings.thresholds
        self._downstream = downstream
        self._sampler = sampler
        limit = self._sampler.max_evaluations_per_minute
        self._budget = None if limit is None else EvaluationBudget(limit, clock=self._sampler.clock)
        self._coverage = Coverage(self._sampler)
        self._shutdown_timeout = settings.shutdown_timeout
        self._adapters = adapters
        self._tools = settings.tool_policy
        self._buffer = trace_buffer or TraceBuffer()
        # Tool results seen per conversation: what vouches for a later turn's history.
        self._seen = SeenResults()
        # GenAI content written as log events joins its trace in the buffer: handed over
        # on the request's thread as spans are, held by the worker thread.
        self._content_events = ContentEventIntake(self._hand_over_event)
        self._held = HeldSpans(
            hold_timeout=hold_timeout,
            max_spans=settings.max_held_spans,
            max_bytes=settings.max_held_bytes,
            on_expired=lambda expired, stale: self._forward_pending(expired, "hold_timeout", stale),
        )
        self._metrics = PipelineMetrics(
            meter_provider,
            queue_size=lambda: self._worker.queue_size,
            queue_bytes=lambda: self._worker.queue_bytes,
            held=lambda: (self._held.count, self._held.bytes),
            breaker_open=lambda: (
                isinstance(self._worker.judge, ResilientJudge) and self._worker.judge.breaker_open
            ),
            coverage=self._coverage.value,
            content_events_dropped=lambda: self._buffer.events_dropped,
        )
        # Labels are read against the user's thresholds, else the judge's own declaration
        # (a metric it cannot decide on real answers gets none), else the metric's.
        deciding = judge if worker is None else worker.judge
        options = EmitOptions(
            thresholds=label_thresholds(judge_kind(deciding), thresholds),
            inline_annotations=settings.inline_annotations,
            service_name=service_name,
            strict=settings.strict,
            metric_attributes=settings.metric_attributes,
            metric_attributes_limit=settings.metric_attributes_limit,
        )
        self._metric_attributes = settings.metric_attributes
        emitter = Emitter(options, self._metrics, logger_provider)
        self._sink = EvaluationSink(
            downstream, emitter, self._sampler, on_evaluation, coverage=self._coverage
        )
        self._own_judge: ResilientJudge | None = None
        self._worker = worker or self._build_worker(judge, settings)
        if isinstance(self._worker.judge, ResilientJudge):
            self._observe(self._worker.judge)
        # Ended spans handed over by request threads, read on the worker thread; one reader
        # at a time (the worker, or a flush or close), so they are read in order.
        self._ended: collections.deque[tuple[ReadableSpan | LogRecord, RagRecord | None]] = (
            collections.deque()
        )
        self._max_ended = MAX_ENDED_UNREAD
        self._reading = threading.Lock()
        self._worker.add_intake(self._read_ended)
        if hasattr(os, "register_at_fork"):
            fork_ref = weakref.WeakMethod(self._after_fork_in_child)
            os.register_at_fork(after_in_child=lambda: (m := fork_ref()) is not None and m())
        if on_evaluation is None and self._own_judge is not None:
            # Nothing here needs an evaluation's claims: a judge in its own processes makes
            # the signals there, under the content policy, and sends only them back. Only
            # with the judge wrapped here: a judge or worker given may be called elsewhere
            # too, where its evaluations must stay whole.
            self._own_judge.make_signals_for(self._sink.spec)

        # Set once, under the lock, by whoever closes first (shutdown, retire or exit);
        # on_end reads it without the lock: a span that races the close is still
        # forwarded, by one path or the other.
        self._lock = threading.Lock()
        self._closed = False
        self._retired = False
        handoff.add_consumer()
        self._release_handoff = weakref.finalize(self, handoff.remove_consumer)
        # An exit without shutdown() still forwards what is held, within the grace. Weak,
        # so a discarded processor is not kept alive by the interpreter's exit hooks.
        ref = weakref.WeakMethod(self._at_exit)
        self._exit_hook = lambda: (m := ref()) is not None and m()
        atexit.register(self._exit_hook)

    @classmethod
    def from_settings(
        cls,
        downstream: SpanProcessor,
        settings: Settings,
        *,
        judge: Judge | None = None,
        sampler: EvalSampler | None = None,
        worker: EvalWorker | None = None,
        service_name: str | None = None,
        meter_provider: metrics_api.MeterProvider | None = None,
        logger_provider: _logs.LoggerProvider | None = None,
        on_evaluation: OnEvaluation | None = None,
    ) -> EvaluatingSpanProcessor:
        """The processor ``settings`` describe, in front of ``downstream``.

        ``configure()`` and ``ragpulse serve`` build theirs here, so a setting means the
        same in and out of the application's process.
        """
        return cls(
            downstream,
            judge=judge,
            sampler=sampler,
            worker=worker,
            service_name=service_name,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            on_evaluation=on_evaluation,
            settings=settings,
        )

    def _build_worker(self, judge: Judge | None, settings: Settings) -> EvalWorker:
        if judge is None:
            from ragpulse.judges.lexical.judge import LexicalJudge

            judge = LexicalJudge()
        # Retries, the breaker, the fallback and the token budget are the judge's.
        # evaluation_timeout bounds all of an evaluation (the worker's timeout); the judge
        # fits its attempts, backoff and fallback into it.
        if not isinstance(judge, ResilientJudge):
            # The user's metrics are measured where the judge runs (its processes too).
            judge = with_custom_metrics(judge, settings.metrics)
            judge = ResilientJudge(judge, processes=settings.concurrency, nice=settings.judge_nice)
            # Ours, so its judge processes end with this processor.
            self._own_judge = judge
        return EvalWorker(judge, settings=settings)

    def _observe(self, judge: ResilientJudge) -> None:
        """Give the judge the sampler's token cap (unless it has a budget) and count every
        attempt it makes, retries and fallbacks included, through the sink."""
        tokens_per_hour = self._sampler.max_judge_tokens_per_hour
        if judge.budget is None and tokens_per_hour is not None:
            clock = self._sampler.clock
            judge.budget = TokenBucket.per_period(tokens_per_hour, 3600.0, clock=clock)
        judge.add_observer(self._sink.judge_call)

    # --- SpanProcessor -------------------------------------------------------

    def on_start(self, span: Span, parent_context: OtelContext | None = None) -> None:
        self._downstream.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self._closed:
            self._downstream.on_end(self._after_close(span))
            return
        handed_over = False
        try:
            handed_over = self._hand_over(span)
        except Exception:
            # Never let evaluation plumbing cost the user a span.
            _guard.exception("ragpulse: evaluation skipped for span %s", span.name)
        if not handed_over:
            self._downstream.on_end(span)

    def on_end_with_record(self, span: ReadableSpan, record: RagRecord | None) -> None:
        """``on_end`` for a unit whose record the caller read from its trace (``ragpulse
        serve`` assembles traces itself); ``None``: the span goes on unevaluated."""
        self.on_end_with_records(span, () if record is None else (record,))

    def on_end_with_records(self, span: ReadableSpan, records: Sequence[RagRecord]) -> None:
        """``on_end_with_record`` for a trace's root with one record per final answer
        (``adapters.records_from_trace``): the root's own, and those of earlier answers,
        whose LLM spans came through ``on_end_retrieval``; none: the span goes on
        unevaluated."""
        taken = False
        if self._closed and records:
            span = self._after_close(span, unit=True)
        elif records:
            try:
                taken = self._consider_units(span, records)
            except Exception:
                _guard.exception("ragpulse: evaluation skipped for span %s", span.name)
        if not taken:
            self._downstream.on_end(span)
        if span.context is not None and is_local_root(span):
            # Spans arrive in any order: an answer's LLM span coming after its root is
            # read has no unit to wait for.
            self._held.root_ended(span.context.trace_id)
        if self._held.waiting:
            self._unit_ended(span, record_read=taken, unit=True)

    def on_end_retrieval(self, span: ReadableSpan) -> None:
        """``on_end`` for a retrieval span, or an LLM call's, whose unit comes later through
        ``on_end_with_records`` (``ragpulse serve``): it waits for the unit when its trace
        may be evaluated, else goes on now."""
        taken = False
        if not self._closed:
            try:
                taken = self._wait_for_unit(span)
            except Exception:
                _guard.exception("ragpulse: could not hold retrieval span %s", span.name)
        if not taken:
            self._downstream.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait for evaluations in flight, forward what is still held, flush downstream.

        False when anything was not flushed within the timeout: an evaluation still
        running (its span goes out pending now, its result later as a carrier span)
        or a downstream flush that did not finish.
        """
        deadline = time.monotonic() + timeout_millis / 1000.0
        self._read_ended()  # spans that ended before this call are submitted first
        # Once closed, what the worker abandoned went out pending and can never be flushed:
        # only downstream is left to flush (a retired processor still passes spans on).
        evaluated = self._closed or self._worker.flush(max(0.0, deadline - time.monotonic()))
        released, waiting = self._held.release_all()
        self._forward_pending(released, "flush", waiting)
        remaining = max(0, int((deadline - time.monotonic()) * 1000))
        flushed = self._downstream.force_flush(remaining)
        return evaluated and flushed

    def shutdown(self) -> None:
        """Wait at most ``shutdown_timeout`` for evaluations, forward every held span,
        then shut downstream down (unless it was handed on by ``retire``)."""
        self._close(self._shutdown_timeout)
        if not self._retired:
            self._downstream.shutdown()

    def retire(self, timeout: float = Settings.shutdown_timeout) -> bool:
        """Stop evaluating: drain within ``timeout``, forward what is held; downstream runs on.

        For a processor replaced in front of the same downstream: later spans pass
        straight through, and a later ``shutdown`` leaves downstream alone. Returns
        False when evaluation had already stopped.
        """
        self._retired = True
        return self._close(timeout)

    # --- introspection ---------------------------------------------------------

    @property
    def held_spans(self) -> int:
        """Spans held right now."""
        return self._held.count

    @property
    def held_bytes(self) -> int:
        """Estimated bytes held right now."""
        return self._held.bytes

    @property
    def content_events(self) -> ContentEventIntake:
        """The log record processor that reads the GenAI instrumentation's content events
        (its messages written as log events) into this processor's traces: ``configure()``
        adds it to the logger provider it builds or joins; add it to yours
        (``logger_provider.add_log_record_processor(processor.content_events)``) when you
        build the processor yourself."""
        return self._content_events

    @property
    def downstream(self) -> SpanProcessor:
        """The processor that receives every span, evaluated or not."""
        return self._downstream

    @property
    def coverage(self) -> Coverage:
        """Evaluations asked for, dropped and completed; what steers the sampler's throttle."""
        return self._coverage

    @property
    def worker(self) -> EvalWorker:
        """The evaluation worker (for its counters)."""
        return self._worker

    # --- the request path: hand over -------------------------------------------------

    def _hand_over(self, span: ReadableSpan) -> bool:
        """Whether ``span`` is now the worker thread's to read (and ours to forward). On
        the request's thread, for every span that ends: a few dict lookups, and an append
        for a span that has to be read (or that ends while others wait to be)."""
        attributes = attributes_of(span)
        record = None
        if attributes.get(semconv.RAG_UNIT):
            # The record its @rag call left lives only while the span ends: taken now.
            record = handoff.take(span.context)
        elif not self._ended and not self._to_read(span, attributes):
            return False
        if len(self._ended) >= self._max_ended:
            # The worker thread is this far behind: the span goes on now, a unit the sampler
            # chose saying that it was not evaluated.
            if record is not None:
                self._downstream.on_end(self._refused(span, record.name, errors.QUEUE_FULL))
                return True
            return False
        self._ended.append((span, record))
        if self._closed:
            self._read_ended()  # the close read the deque before this append: read it here
        else:
            self._worker.nudge()
        return True

    def _hand_over_event(self, record: LogRecord) -> None:
        """A GenAI content log record (``ContentEventIntake`` checked its name) goes to the
        worker thread in the order it was emitted, before the spans that end after it (its
        chat span, the trace's root): held with its trace when they are read."""
        if self._closed or not self._adapters:
            return
        if len(self._ended) >= self._max_ended:
            self._buffer.drop_event("bounds")
            return
        self._ended.append((record, None))
        self._worker.nudge()

    def _to_read(self, span: ReadableSpan, attributes: Mapping[str, Any]) -> bool:
        """A span other than a unit that the worker thread must read: one of our retrieval
        spans of a trace the rate selects, or ``@tool`` spans, a trace's local root (where an
        adapter reads its record, and retrieval spans no unit took go on), a part an adapter
        reads."""
        scope = span.instrumentation_scope
        if scope is not None and scope.name == "ragpulse":
            if self._adapters and is_tool(attributes):
                return True
            context = span.context
            return (
                attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_RETRIEVAL
                and context is not None
                and self._sampler.in_sample(context.trace_id)
            )
        if self._adapters and is_buffered(span):
            return True
        # A local root ends a trace: adapters read its record from the spans held for it,
        # and retrieval spans no unit took go on.
        return is_local_root(span) and bool(
            self._held.waiting or (self._adapters and self._buffer.traces)
        )

    # --- the worker thread: read what was handed over -----------------------------------

    def _read_ended(self) -> None:
        """Read the spans handed over, in the order they ended (worker thread, or a flush)."""
        with self._reading:
            ended = self._ended
            while ended:
                span, record = ended[0]  # left in the deque while read: later spans queue
                try:
                    self._read(span, record)
                finally:
                    ended.popleft()

    def _read(self, span: ReadableSpan | LogRecord, record: RagRecord | None) -> None:
        if not isinstance(span, ReadableSpan):
            with _guard("ragpulse: could not hold a GenAI content event"):
                event = from_log_record(span)
                if event is not None:
                    self._buffer.add_event(event)
            return
        taken = False
        try:
            taken = self._take(span, record)
        except Exception:
            _guard.exception("ragpulse: evaluation skipped for span %s", span.name)
        if not taken:
            self._downstream.on_end(span)
        if self._held.waiting:
            self._unit_ended(span, record_read=taken)

    def _after_fork_in_child(self) -> None:
        # The parent's spans are the parent's to read; its reader may have held the lock.
        self._ended = collections.deque()
        self._reading = threading.Lock()

    def _vouch(self, record: RagRecord) -> RagRecord:
        """A ``@rag`` unit's record with its history's provenance read (worker thread).

        The tool results ``@generation`` was given from earlier turns count only where a
        tool result this process saw in the conversation vouches for them (as for an
        instrumented agent, ``adapters._provenance``); this turn's own tool results vouch for
        the turns after it.
        """
        given = record.attributes.get(semconv.RAG_ADAPTER_HISTORY_GIVEN)
        history = set(given) if isinstance(given, tuple) else set()
        conversation = record.conversation_id
        unvouched = (
            ()
            if self._tools.trust_history
            else tuple(
                i
                for i in sorted(history)
                if not self._seen.vouches(conversation, result_digest(record.contexts[i].text))
            )
        )
        own = [
            result_digest(context.text)
            for i, context in enumerate(record.contexts)
            if i not in history and context.tool is not None
        ]
        if own:
            self._seen.note(conversation, own)
        if given is None:
            return record
        attributes = {
            key: value
            for key, value in record.attributes.items()
            if key != semconv.RAG_ADAPTER_HISTORY_GIVEN
        }
        if unvouched:
            attributes[semconv.RAG_ADAPTER_HISTORY_UNVOUCHED] = unvouched
        return dataclasses.replace(record, attributes=attributes)

    def _take(self, span: ReadableSpan, record: RagRecord | None) -> bool:
        """Whether ``span`` is now ours to forward: a unit held for its evaluation, or a
        retrieval span waiting for its unit. ``record``: a unit's, taken as it ended."""
        attributes = attributes_of(span)
        if attributes.get(semconv.RAG_UNIT):
            if self._adapters and span.context is not None and is_local_root(span):
                # Tool spans buffered under it reported through its record.
                self._buffer.pop_trace(span.context.trace_id)
            return record is not None and self._consider(span, self._vouch(record))
        scope = span.instrumentation_scope
        if scope is not None and scope.name == "ragpulse":
            if self._adapters and is_tool(attributes):
                # A @tool span: evidence for whatever unit its trace has, a third-party
                # agent's root too, and where its result's scores go.
                self._buffer.add(span)
                return not is_local_root(span) and self._wait_for_unit(span, retrieval=True)
            # Our own retrieval and generation spans report through the record; a retrieval
            # span waits for its unit's per-document scores.
            return attributes.get(
                semconv.GEN_AI_OPERATION_NAME
            ) == semconv.GEN_AI_OPERATION_RETRIEVAL and self._wait_for_unit(span, retrieval=True)
        if not self._adapters:
            return False
        local_root = is_local_root(span)
        if is_buffered(span):
            self._buffer.add(span)
            if not local_root:
                return self._wait_for_unit(span)
        if not local_root or span.context is None:
            return False
        spans, refused = self._buffer.take(span.context.trace_id)
        if not spans and not refused:
            return False
        records = records_from_trace(
            span, spans, tools=self._tools, refused=refused, seen=self._seen
        )
        # An agent's answer without evidence, or a trace read in part, is a unit too: the
        # worker records why it is skipped, rather than nothing at all being written.
        units = [record for record in records if is_unit_record(record)]
        return bool(units) and self._consider_units(span, units)

    def _wait_for_unit(self, span: ReadableSpan, *, retrieval: bool | None = None) -> bool:
        """Keep a retrieval or tool span (``retrieval``: already known to be one), or an LLM
        call whose output may be a final answer, of a trace the rate selects until its unit
        ends; True when it is now ours to forward. The trace id is read first: an unsampled
        trace's spans cost one comparison."""
        context = span.context
        if context is None or not self._sampler.in_sample(context.trace_id):
            return False
        answer = False
        if retrieval is None:
            # An answer's span is known to be a unit only when its trace's root ends.
            answer = not is_evidence_span(span)
            if answer and not may_answer(span):
                return False
        elif not retrieval:
            return False
        key = (context.trace_id, context.span_id)
        return self._held.wait(key, span, estimate_bytes(span), answer=answer)

    def _unit_ended(self, span: ReadableSpan, *, record_read: bool, unit: bool = False) -> None:
        """Retrieval spans no unit will take go on unchanged: a trace's local root ended, or
        a ``@rag`` unit (``unit``: any unit) ended without being evaluated (``record_read``
        False), which leaves its children to nobody."""
        context = span.context
        if context is None:
            return
        left: list[Waiting] = []
        if is_local_root(span):
            left = self._held.claim_trace(context.trace_id)
        elif not record_read and (unit or attributes_of(span).get(semconv.RAG_UNIT)):
            left = self._held.claim_trace(context.trace_id, context.span_id)
        self._forward_retrievals(left)

    def _forward_retrievals(self, spans: list[Waiting]) -> None:
        for waiting in spans:
            self._downstream.on_end(waiting.span)

    def _consider_units(self, root: ReadableSpan, records: Sequence[RagRecord]) -> bool:
        """Each final answer of the trace ``root`` ends: earlier answers on the LLM spans
        that gave them (waiting as ``answer``), the root's own last; True when ``root`` is
        now ours to forward."""
        taken = False
        for record in records:
            target = record.span_context
            if target is None or root.context is None:
                continue
            if target.span_id == root.context.span_id:
                taken = self._consider(root, record)
                continue
            waiting = self._held.claim_answer(target.trace_id, target.span_id)
            if waiting is None:
                # The call's span went on already (a holding bound): the result follows as a
                # carrier span, with the resource the root shares with it.
                self._consider(root, record, gone=True)
            elif not self._consider(waiting.span, record, decide_on=root):
                self._downstream.on_end(waiting.span)
        return taken

    def _consider(
        self,
        span: ReadableSpan,
        record: RagRecord,
        *,
        decide_on: ReadableSpan | None = None,
        gone: bool = False,
    ) -> bool:
        """Sample, hold and submit; True when the span is now ours to forward.

        ``decide_on``: the span the sampler's rules read (an earlier answer's root); ``gone``:
        the record's unit span already went out, ``span`` is its root, and the result
        follows as a carrier span.
        """
        context = record.span_context if gone else span.context
        if context is None:
            return False
        decide_on = span if gone else (decide_on or span)
        # The retrieval spans this record's contexts came from leave with the unit: held
        # with it when it is evaluated, otherwise forwarded now, before it (also when
        # anything below fails: they are out of the table and only this call has them).
        retrievals = (
            self._held.claim(context.trace_id, (source[0] for source in record.sources))
            if self._held.waiting and record.sources
            else []
        )
        handed_on = False
        try:
            decision = self._sampler.should_evaluate(
                context.trace_id, name=record.name, attributes=decide_on.attributes
            )
            if not decision.evaluate:
                self._metrics.count_decision(decision.reason)
                if decision.reason != errors.REASON_THROTTLED:
                    return False
                self._coverage.asked()
                self._coverage.dropped(errors.REASON_THROTTLED)
                return self._skip(span, errors.THROTTLED, gone)
            self._coverage.asked()
            if self._budget is not None and not self._budget.admit():
                self._metrics.count_decision(errors.REASON_OVER_BUDGET)
                self._coverage.dropped(errors.REASON_OVER_BUDGET)
                return self._skip(span, errors.OVER_BUDGET, gone)
            # The entry exists before the worker can answer, so even an instant result finds
            # the span, or the resource of the span that already went out. The record's texts
            # are what a held span costs (the span itself carries capped copies of them).
            _, size = record_size(record)
            key = (context.trace_id, context.span_id)
            if gone:
                self._held.enter_late(key, span.resource)
                held = False
            else:
                held = self._held.hold(key, span, size, retrievals)
            handed_on = True
            if not held:
                self._forward_retrievals(retrievals)
            if self._metric_attributes:
                # Read now, while the span is at hand: the result may come back after it left.
                record = with_unit_attributes(record, span, self._metric_attributes)
            if not self._worker.submit(record, self._on_result):
                self._metrics.count_decision(errors.REASON_QUEUE_FULL)
                self._coverage.dropped(errors.REASON_QUEUE_FULL)
                entry = self._held.forget(key)
                if gone:
                    return False  # nothing of this unit is left to forward
                if entry is not None or not held:
                    if entry is not None:
                        for retrieval in entry.retrievals:
                            self._downstream.on_end(retrieval)
                    self._downstream.on_end(rebuild(span, _skipped(errors.QUEUE_FULL)))
                # else: the hold timeout already sent it on, pending.
                return True
            self._metrics.count_decision(decision.reason)
            if gone:
                return False
            if not held:
                # Over a holding bound: export now; the result follows as a carrier span.
                self._downstream.on_end(rebuild(span, pending_attributes()))
                with _guard("ragpulse: could not count a forced export"):
                    self._metrics.forced_exports.add(1, {"reason": "max_held"})
            return True
        finally:
            if not handed_on:
                self._forward_retrievals(retrievals)

    # --- results, and spans that go out without them --------------------------------

    def _skip(self, span: ReadableSpan, error_type: str, gone: bool) -> bool:
        """A unit the sampler chose and evaluation refused goes on now, ``skipped`` with
        ``error_type``; True (it is forwarded) unless it went out already (``gone``)."""
        if gone:
            return False
        self._downstream.on_end(rebuild(span, _skipped(error_type)))
        return True

    def _refused(self, span: ReadableSpan, name: str | None, error_type: str) -> ReadableSpan:
        """``span`` as it goes on unread (the worker is far behind, or evaluation stopped):
        ``skipped`` with ``error_type`` when the sampler chooses it, so that every unit the
        sample holds says what became of its evaluation; else unchanged. Counted as
        ``error_type`` (or as the sampler's reason) either way."""
        context = span.context
        if context is None:
            return span
        decision = self._sampler.should_evaluate(
            context.trace_id, name=name, attributes=attributes_of(span)
        )
        if not (decision.evaluate or decision.reason == errors.REASON_THROTTLED):
            self._metrics.count_decision(decision.reason)
            return span
        self._metrics.count_decision(error_type)
        self._coverage.asked()
        self._coverage.dropped(error_type)
        return rebuild(span, _skipped(error_type))

    def _after_close(self, span: ReadableSpan, *, unit: bool = False) -> ReadableSpan:
        """A span ending once evaluation stopped: a unit (``unit``: known to be one) the
        sampler chooses goes on ``skipped`` (``shutdown``), any other span unchanged."""
        attributes = attributes_of(span)
        if not (unit or attributes.get(semconv.RAG_UNIT)) or semconv.EVAL_STATUS in attributes:
            return span
        record = handoff.take(span.context)  # never read now: let it go at once
        name = record.name if record is not None else span.name
        return self._refused(span, name, errors.SHUTDOWN)

    def _on_result(self, record: RagRecord, evaluation: Evaluation) -> None:
        """Worker thread: the held span with its scores, or a carrier; then the other signals."""
        target = record.span_context
        if target is None:
            return
        self._sink.write(record, evaluation, self._held.settle((target.trace_id, target.span_id)))

    def _forward_pending(
        self, released: list[Held], reason: str, waiting: list[ReadableSpan] | None = None
    ) -> None:
        """Units without their result go on pending, their retrieval spans (and those still
        waiting for a unit) unchanged: the carrier span will hold the scores."""
        for span in waiting or ():
            self._downstream.on_end(span)
        now = time.monotonic()
        for held in released:
            for retrieval in held.retrievals:
                self._downstream.on_end(retrieval)
            self._downstream.on_end(rebuild(held.span, pending_attributes()))
            with _guard("ragpulse: could not count a forced export"):
                self._metrics.forced_exports.add(1, {"reason": reason})
                self._metrics.hold_time.record(now - held.held_at)

    # --- closing -----------------------------------------------------------------------

    def _close(self, timeout: float) -> bool:
        """Stop evaluating: let the worker finish within ``timeout``, forward what is held.

        False when it was already closed. Spans ending from now on pass straight through (a
        unit the sampler chooses ``skipped``, ``shutdown``).
        """
        with self._lock:
            if self._closed:
                return False
            self._closed = True
        atexit.unregister(self._exit_hook)
        try:
            # Spans handed over before the close are read now; later ones pass straight on.
            with _guard("ragpulse: could not read the spans that ended before the close"):
                self._read_ended()
            self._worker.remove_intake(self._read_ended)
            with _guard("ragpulse: the evaluation worker failed to shut down"):
                self._worker.shutdown(timeout=timeout)
        finally:
            # Held spans go on whatever the worker or the judge's processes did: ending a
            # judge process whose evaluation was abandoned can fail, and must cost no span.
            released, waiting = self._held.close()
            self._forward_pending(released, "shutdown", waiting)
            self._release_handoff()
        if self._own_judge is not None:
            close_in_background(self._own_judge.close)
        return True

    def _at_exit(self) -> None:
        # The interpreter is exiting and nobody called shutdown(): the provider's own exit
        # hook may not exist (shutdown_on_exit=False) or may come later. Forward what is
        # held within the grace and flush downstream; shutting it down stays its owner's.
        with _guard("ragpulse: could not forward held spans at exit"):
            if self._close(self._shutdown_timeout):
                self._downstream.force_flush(int(self._shutdown_timeout * 1000))


def _skipped(error_type: str) -> dict[str, Any]:
    """Attributes of a unit that was not evaluated, saying why."""
    return {semconv.EVAL_STATUS: EvalStatus.SKIPPED.value, semconv.EVAL_ERROR_TYPE: error_type}
