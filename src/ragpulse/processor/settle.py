"""``EvaluationSink``: where one returned ``Evaluation`` becomes its signals.

In order, on the worker thread: the scores on the unit's span (the held span
rebuilt with them, or a carrier span when the span already went out), each
held retrieval span with its documents' scores (``document_attributes``), the
score histogram and log events (``ragpulse.signals.emit``), the sampler's feedback
(groundedness for the adaptive boost) and the user's ``on_evaluation`` hook.
What each signal carries is made once, under the content policy, by
``ragpulse.signals.make.make_signals``: in the judge's process when the judge runs in
one and no hook needs the whole evaluation here, else here.
Each step is guarded on its own, so a failing one costs no other signal and
never the span. Judge calls are counted per attempt through ``judge_call``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from ragpulse import errors, semconv
from ragpulse._guard import Guard
from ragpulse._version import __version__
from ragpulse.adapters._common import with_attributes
from ragpulse.evaluation.families import model_family
from ragpulse.evaluation.types import GROUNDEDNESS, EvalStatus, Evaluation, RagRecord
from ragpulse.judges.base import generator_model
from ragpulse.metrics._contexts import document_attributes
from ragpulse.processor.held import Held
from ragpulse.sampling.coverage import Coverage
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.signals.emit import EmitOptions, Emitter, response_id_of
from ragpulse.signals.make import PreparedEvaluation, Signals, SignalSpec, make_signals

__all__ = ["CARRIER_SPAN_NAME", "EvaluationSink", "OnEvaluation", "carrier_span", "rebuild"]

_guard = Guard("ragpulse.processor.settle")
_logger = logging.getLogger("ragpulse.processor.settle")

CARRIER_SPAN_NAME = "ragpulse.evaluation"
"""The name of a carrier span: a late result as its own span."""
_SCOPE = InstrumentationScope("ragpulse", __version__)
_ids = RandomIdGenerator()

OnEvaluation = Callable[[RagRecord, Evaluation], None]
"""The user's hook, called with each ``(record, evaluation)`` on the worker thread."""


def rebuild(span: ReadableSpan, extra: Mapping[str, Any]) -> ReadableSpan:
    """A copy of an ended span with ``extra`` attributes merged in; everything else kept.

    A span class that makes such a copy itself (``rebuild(extra)``: serve's received
    spans, which keep the message they came in) makes it.
    """
    own = getattr(span, "rebuild", None)
    if own is not None:
        rebuilt: ReadableSpan = own(extra)
        return rebuilt
    return with_attributes(span, extra)


def carrier_span(
    target: SpanContext, attributes: Mapping[str, Any], evaluation: Evaluation, resource: Resource
) -> ReadableSpan:
    """A late result as its own span (OpenInference post-hoc form).

    Kind EVALUATOR, same trace, child of and linked to the target, with the
    target's resource; it spans the evaluation's duration, ending now.
    """
    end = time.time_ns()
    start = end - int(evaluation.duration_ms * 1_000_000)
    carried = dict(attributes)
    carried[semconv.OPENINFERENCE_SPAN_KIND] = semconv.OI_KIND_EVALUATOR
    carried[semconv.EVAL_TARGET_TRACE_ID] = format(target.trace_id, "032x")
    carried[semconv.EVAL_TARGET_SPAN_ID] = format(target.span_id, "016x")
    context = SpanContext(
        trace_id=target.trace_id,
        span_id=_ids.generate_span_id(),
        is_remote=False,
        trace_flags=target.trace_flags,
        trace_state=target.trace_state,
    )
    failed = evaluation.status is EvalStatus.ERROR
    return ReadableSpan(
        name=CARRIER_SPAN_NAME,
        context=context,
        parent=target,
        resource=resource,
        attributes=carried,
        links=[Link(target)],
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.ERROR if failed else StatusCode.OK),
        start_time=start,
        end_time=end,
        instrumentation_scope=_SCOPE,
    )


_same_family_warned: set[tuple[str | None, str | None]] = set()


def warn_same_family(judge: str | None, generator: str | None) -> None:
    """Warn once per (judge, generator) pair that the judge is of the generator's family."""
    if (judge, generator) in _same_family_warned:
        return
    _same_family_warned.add((judge, generator))
    _logger.warning(
        "ragpulse: the judge's model %s is of the same family as the generator %s (%s): it "
        "tends to rate its own family's answers higher, so faithfulness and correctness may "
        "be inflated together; judge with a model of another family "
        "(ragpulse.eval.judge.same_family=true marks these evaluations)",
        judge,
        generator,
        model_family(judge),
    )


class EvaluationSink:
    """Turns each returned evaluation into the span, metrics, log events, feedback and hook.

    Args:
        downstream: receives the scored span or the carrier span.
        emitter: writes the histogram points, log events and judge-call metrics.
        sampler: gets each groundedness score for its adaptive boost.
        on_evaluation: the user's hook, if any.
        coverage: told of each evaluation that came back (it steers the sampler's throttle).
    """

    def __init__(
        self,
        downstream: SpanProcessor,
        emitter: Emitter,
        sampler: EvalSampler,
        on_evaluation: OnEvaluation | None = None,
        *,
        coverage: Coverage | None = None,
    ) -> None:
        self._downstream = downstream
        self._coverage = coverage
        self._emitter = emitter
        self._options: EmitOptions = emitter.options
        self._spec = SignalSpec(emitter.options)
        self._metrics = emitter.metrics
        self._sampler = sampler
        self._on_evaluation = on_evaluation

    @property
    def spec(self) -> SignalSpec:
        """How this sink writes signals, for a judge's process to make them to (see
        ``ragpulse.signals.make``)."""
        return self._spec

    def write(self, record: RagRecord, evaluation: Evaluation, entry: Held | Resource) -> None:
        """All signals of one evaluation; ``entry`` is what ``HeldSpans.settle`` returned."""
        target = record.span_context
        # The one place an evaluation becomes signals: the span or carrier, the metrics, the
        # log events and the hook all get it as the content policy lets it leave.
        exported, signals = self._signals(record, evaluation)
        if evaluation.same_family:
            warn_same_family(evaluation.judge_model, generator_model(record))
        try:
            self._write_span(target, exported, signals, entry)
        finally:
            # The unit's retrieval spans go on whatever became of it.
            if isinstance(entry, Held) and entry.retrievals:
                self._write_retrievals(record, signals, entry.retrievals)
        with _guard("ragpulse: could not emit evaluation metrics and events"):
            self._emitter.write(signals, target)
        with _guard("ragpulse: sampler feedback failed"):
            self._sampler.record_score(exported.score(GROUNDEDNESS))
            if self._coverage is not None:
                if evaluation.error_type == errors.NO_EVIDENCE:
                    # Asked for and not judged: coverage shows the agent answers it misses.
                    self._coverage.dropped(errors.NO_EVIDENCE)
                else:
                    self._coverage.completed()
        if self._on_evaluation is not None:
            with _guard("ragpulse: on_evaluation callback failed"):
                self._on_evaluation(record, exported)

    def _write_retrievals(
        self, record: RagRecord, signals: Signals, spans: tuple[ReadableSpan, ...]
    ) -> None:
        """The unit's retrieval spans, each with its documents' scores (unchanged when it has
        none: an evaluation that failed, a span whose documents were not judged)."""
        scored: dict[int, dict[str, Any]] = {}
        with _guard("ragpulse: could not write per-document scores"):
            scored = document_attributes(signals.documents, record.sources)
        for span in spans:
            extra = scored.get(span.context.span_id) if span.context is not None else None
            out = span
            if extra:
                with _guard("ragpulse: could not write per-document scores"):
                    out = rebuild(span, extra)
            self._downstream.on_end(out)

    def judge_call(self, evaluation: Evaluation) -> None:
        """Count one judge attempt (retries and fallbacks too): calls, tokens, latency, errors."""
        with _guard("ragpulse: could not record a judge call"):
            self._emitter.judge_call(evaluation)

    def _signals(self, record: RagRecord, evaluation: Evaluation) -> tuple[Evaluation, Signals]:
        """The evaluation as it may leave and its signals: made in the judge's process for
        this sink, or here."""
        if isinstance(evaluation, PreparedEvaluation):
            signals = evaluation.signals
            if signals is None or signals.spec != self._spec.serial:
                # Its claims stayed in the judge's process: it cannot be written here.
                _guard.warning("ragpulse: an evaluation prepared for another sink; not written")
                evaluation = Evaluation.failed(
                    errors.INVALID_RESULT,
                    judge=evaluation.judge,
                    annotator_kind=evaluation.annotator_kind,
                    usage=evaluation.usage,
                    duration_ms=evaluation.duration_ms,
                )
            else:
                if signals.duration_ms != evaluation.duration_ms:
                    # A fallback's result carries the failed primary's time too.
                    span = {
                        **signals.span,
                        semconv.EVAL_DURATION_MS: round(evaluation.duration_ms, 3),
                    }
                    signals = replace(signals, span=span, duration_ms=evaluation.duration_ms)
                return evaluation, signals
        service = record.attributes.get(semconv.ATTR_SERVICE_NAME)
        return make_signals(
            evaluation,
            name=record.name,
            service=service if isinstance(service, str) else None,
            options=self._options,
            conversation=record.conversation_id,
            response_id=response_id_of(record),
            attributes=record.attributes,
        )

    def _write_span(
        self,
        target: SpanContext | None,
        evaluation: Evaluation,
        signals: Signals,
        entry: Held | Resource,
    ) -> None:
        # The span first: nothing after it (metrics) may cost it.
        if isinstance(entry, Held):
            self._downstream.on_end(rebuild(entry.span, signals.span))
            with _guard("ragpulse: could not record a hold time"):
                self._metrics.hold_time.record(time.monotonic() - entry.held_at)
        elif target is not None:
            self._downstream.on_end(carrier_span(target, signals.span, evaluation, entry))
            with _guard("ragpulse: could not count a late result"):
                self._metrics.late_results.add(1)
