"""One ``Evaluation`` becomes three signals: span attributes, a histogram, log events.

Also the pipeline's own metrics (``ragpulse.evaluator.*``). Nothing here decides
or judges; it only writes. The attributes of each signal are made together, under
the content policy (``ragpulse.signals.make.make_signals``), as plain data (``Signals``,
``signals_of``); ``Emitter`` hands them to the SDK.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.trace import NonRecordingSpan, SpanContext

from ragpulse import semconv
from ragpulse._guard import Guard
from ragpulse._version import __version__
from ragpulse.errors import METRIC_FAILED
from ragpulse.evaluation.types import EvalStatus, Evaluation, RagRecord, Verdict
from ragpulse.metrics import _registry
from ragpulse.metrics._contexts import DocumentRow

_logger = logging.getLogger("ragpulse.signals.emit")
_guard = Guard("ragpulse.signals.emit")

SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _DeclaredThresholds(Mapping[str, float]):
    """Each metric's threshold as its module declares it (``ragpulse.metrics``), read live so
    a metric registered later (the user's own) has its threshold too."""

    def __getitem__(self, name: str) -> float:
        return _registry.default_thresholds()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_registry.default_thresholds())

    def __len__(self) -> int:
        return len(_registry.default_thresholds())


DEFAULT_THRESHOLDS: Mapping[str, float] = _DeclaredThresholds()
DEFAULT_MAX_CLAIMS_JSON = 16384
MAX_EXPLANATION = 1024


@dataclass(frozen=True)
class EmitOptions:
    """How results are written."""

    thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    inline_annotations: bool = False
    """Also write OpenInference ``annotations.N.annotation.*`` so Phoenix shows them."""
    max_claims_json: int = DEFAULT_MAX_CLAIMS_JSON
    service_name: str | None = None
    strict: bool = False
    """Count INFERRED claims as unfaithful (DeepEval's ``penalize_ambiguous_claims``)."""


def label_for(score: float | None, threshold: float | None) -> str | None:
    """``pass``/``fail`` against the metric's threshold; ``None`` when undefined."""
    if score is None or threshold is None:
        return None
    return semconv.LABEL_PASS if score >= threshold else semconv.LABEL_FAIL


def _claims_json(evaluation: Evaluation, limit: int) -> str:
    items: list[dict[str, Any]] = []
    for cv in evaluation.claims:
        evidence = cv.evidence
        item: dict[str, Any] = {
            "text": cv.claim.text,
            "verdict": cv.verdict.value,
            "context_index": evidence.context_index if evidence else None,
            "context_id": evidence.context_id if evidence else None,
            "start": evidence.start if evidence else None,
            "end": evidence.end if evidence else None,
        }
        if cv.cited:
            item[semconv.CLAIM_CITED] = list(cv.cited)
            item[semconv.CLAIM_CITATION_HOLDS] = cv.citation_holds
        if cv.confidence is not None:
            item[semconv.CLAIM_CONFIDENCE] = round(cv.confidence, 3)
        items.append(item)
    parts = [json.dumps(item, ensure_ascii=False) for item in items]
    text = "[" + ", ".join(parts) + "]"
    if len(text) <= limit:
        return text
    # Keep whole claims (valid JSON) and say how many were left out. One pass over the
    # serialised claims: re-serialising the list per dropped claim is quadratic, and this
    # runs on the worker thread, holding the GIL the request threads need.
    reserve = len(json.dumps({"truncated": len(parts)})) + 2  # the marker and its ", "
    size, kept = 2, 0  # the brackets
    for part in parts:
        if size + len(part) + 2 + reserve > limit:
            break
        size += len(part) + 2
        kept += 1
    return "[" + ", ".join([*parts[:kept], json.dumps({"truncated": len(parts) - kept})]) + "]"


def judge_model_attributes(evaluation: Evaluation) -> dict[str, Any]:
    """The judge's model and, where both families are known, whether it is the generator's."""
    attrs: dict[str, Any] = {}
    if evaluation.judge_model:
        attrs[semconv.EVAL_JUDGE_MODEL] = evaluation.judge_model
    if evaluation.same_family is not None:
        attrs[semconv.EVAL_JUDGE_SAME_FAMILY] = evaluation.same_family
    return attrs


def span_attributes(evaluation: Evaluation, options: EmitOptions) -> dict[str, Any]:
    """The flat ``ragpulse.eval.*`` attributes for the evaluated span."""
    attrs: dict[str, Any] = {
        semconv.EVAL_STATUS: evaluation.status.value,
        semconv.EVAL_JUDGE: evaluation.judge,
        semconv.EVAL_ANNOTATOR_KIND: evaluation.annotator_kind,
        semconv.EVAL_DURATION_MS: round(evaluation.duration_ms, 3),
    }
    if evaluation.error_type:
        attrs[semconv.EVAL_ERROR_TYPE] = evaluation.error_type
    if evaluation.disagreement is not None:
        attrs[semconv.EVAL_DISAGREEMENT] = evaluation.disagreement
    if evaluation.escalated is not None:
        attrs[semconv.EVAL_CASCADE_ESCALATED] = evaluation.escalated
    attrs.update(judge_model_attributes(evaluation))
    attrs.update(answerability_attributes(evaluation))
    for name, result in evaluation.metrics.items():
        if result.score is not None:
            attrs[semconv.eval_score(name)] = float(result.score)
            label = label_for(result.score, options.thresholds.get(name))
            if label is not None:
                attrs[semconv.eval_label(name)] = label
        if result.explanation:
            attrs[semconv.eval_explanation(name)] = result.explanation[:MAX_EXPLANATION]
        metric = _registry.get(name)
        if metric is not None and metric.span_attributes is not None:
            attrs.update(metric.span_attributes(evaluation))
    if evaluation.diagnosis_reason:
        attrs[semconv.EVAL_DIAGNOSIS_EXPLANATION] = evaluation.diagnosis_reason[:MAX_EXPLANATION]
    if evaluation.status in (EvalStatus.OK, EvalStatus.NO_CLAIMS):
        counts = dict.fromkeys(Verdict, 0)
        for cv in evaluation.claims:
            counts[cv.verdict] += 1
        attrs[semconv.EVAL_CLAIMS_TOTAL] = len(evaluation.claims)
        attrs[semconv.EVAL_CLAIMS_SUPPORTED] = counts[Verdict.SUPPORTED]
        attrs[semconv.EVAL_CLAIMS_INFERRED] = counts[Verdict.INFERRED]
        attrs[semconv.EVAL_CLAIMS_NOT_FOUND] = counts[Verdict.NOT_FOUND]
        attrs[semconv.EVAL_CLAIMS_CONTRADICTED] = counts[Verdict.CONTRADICTED]
        attrs[semconv.EVAL_CLAIMS] = _claims_json(evaluation, options.max_claims_json)
    if options.inline_annotations:
        index = 0
        for name, result in evaluation.metrics.items():
            if result.score is None:
                continue
            attrs[semconv.oi_annotation(index, "name")] = name
            attrs[semconv.oi_annotation(index, "score")] = float(result.score)
            label = label_for(result.score, options.thresholds.get(name))
            if label is not None:
                attrs[semconv.oi_annotation(index, "label")] = label
            if result.explanation:
                attrs[semconv.oi_annotation(index, "explanation")] = result.explanation[
                    :MAX_EXPLANATION
                ]
            attrs[semconv.oi_annotation(index, "annotator_kind")] = evaluation.annotator_kind
            index += 1
    return attrs


def answerability_attributes(evaluation: Evaluation) -> dict[str, Any]:
    """``ragpulse.eval.abstained``/``answerable`` and the ``ragpulse.eval.slice.*`` cuts.

    Low-cardinality: the span, every histogram point and every log event carry them.
    """
    attrs: dict[str, Any] = {}
    if evaluation.diagnosis is not None:
        attrs[semconv.EVAL_DIAGNOSIS] = evaluation.diagnosis
    if evaluation.abstained is not None:
        attrs[semconv.EVAL_ABSTAINED] = evaluation.abstained
    if evaluation.answerable is not None:
        attrs[semconv.EVAL_ANSWERABLE] = evaluation.answerable
    for name, value in evaluation.slices.items():
        attrs[semconv.eval_slice(name)] = value
    return attrs


def pending_attributes() -> dict[str, Any]:
    """Attributes of a unit forwarded before its evaluation returned."""
    return {semconv.EVAL_STATUS: EvalStatus.PENDING.value}


Attributes = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Signals:
    """What one evaluation writes, ready to hand to the SDK.

    ``span``: the ``ragpulse.eval.*`` attributes of its span (or carrier span);
    ``outcome``: the attributes of its point of ``ragpulse.evaluator.evaluations``;
    ``points``: each score histogram point, ``(value, attributes)``; ``events``: each
    log event, ``(severity number, attributes)``; ``labels``: the attributes of each point
    of ``ragpulse.evaluation.labels``, one per score its metric's threshold labels.
    ``duration_ms`` is the evaluation's duration the span attributes were made with;
    ``spec`` the ``SignalSpec.serial`` they were made under (0: made by the sink itself).
    ``documents``: each judged
    passage as ``(context index, relevance, relevant, used)``, numbers and flags only,
    for its retrieval span (``ragpulse.metrics._contexts.document_attributes``).
    """

    span: Attributes
    outcome: Attributes
    points: tuple[tuple[float, Attributes], ...]
    events: tuple[tuple[int, Attributes], ...]
    duration_ms: float
    spec: int = 0
    documents: tuple[DocumentRow, ...] = ()
    labels: tuple[Attributes, ...] = ()


def signals_of(
    evaluation: Evaluation,
    *,
    name: str | None,
    service: str | None,
    options: EmitOptions,
    spec: int = 0,
    conversation: str | None = None,
) -> Signals:
    """Every signal of an evaluation already as it may leave (``export_evaluation``'s).

    ``name`` is the unit's name, ``service`` the evaluated trace's own service (used
    when ``options`` names none), ``conversation`` the conversation the unit is a turn of
    (``gen_ai.conversation.id`` on the span and each log event; never on metric points,
    where it would make a series per conversation). Never raises: span attributes that
    cannot be made give the status that says so; metric points and events that cannot be
    made are left out (and logged).
    """
    try:
        span = span_attributes(evaluation, options)
    except Exception as exc:
        # The span must still go out: unscored, with the status that says so.
        _guard.exception("ragpulse: could not write the evaluation's span attributes")
        span = {
            semconv.EVAL_STATUS: EvalStatus.ERROR.value,
            semconv.EVAL_ERROR_TYPE: type(exc).__name__,
        }
    try:
        outcome, points, events, labels = _metrics_and_events(evaluation, name, service, options)
    except Exception:
        _guard.exception("ragpulse: could not make evaluation metrics and events")
        outcome, points, events, labels = {}, (), (), ()
    if conversation:
        span = {**span, semconv.GEN_AI_CONVERSATION_ID: conversation}
        events = tuple(
            (severity, {**attributes, semconv.GEN_AI_CONVERSATION_ID: conversation})
            for severity, attributes in events
        )
    documents = tuple(
        (
            judged.index,
            None if judged.relevance is None else round(float(judged.relevance), 3),
            judged.relevant,
            bool(judged.used),
        )
        for judged in evaluation.contexts
    )
    return Signals(span, outcome, points, events, evaluation.duration_ms, spec, documents, labels)


def _metrics_and_events(
    evaluation: Evaluation, name: str | None, service: str | None, options: EmitOptions
) -> tuple[
    Attributes,
    tuple[tuple[float, Attributes], ...],
    tuple[tuple[int, Attributes], ...],
    tuple[Attributes, ...],
]:
    base: Attributes = {}
    # The process's service; else the evaluated trace's own (one ragpulse serve, many apps).
    service = options.service_name or service
    if service:
        base[semconv.ATTR_SERVICE_NAME] = service
    if name:
        base[semconv.RAG_NAME] = name
    # Few attributes (service, unit, metric, label): two series per metric, whatever the
    # slices; the label is the span's own, made by the same function with the same thresholds.
    labels = tuple(
        {
            **base,
            semconv.GEN_AI_EVALUATION_NAME: metric,
            semconv.GEN_AI_EVALUATION_SCORE_LABEL: label,
        }
        for metric, result in evaluation.metrics.items()
        if (label := label_for(result.score, options.thresholds.get(metric))) is not None
    )
    outcome = {**base, semconv.EVAL_STATUS: evaluation.status.value}
    if evaluation.diagnosis is not None:
        outcome[semconv.EVAL_DIAGNOSIS] = evaluation.diagnosis
    if evaluation.error_type:
        outcome[semconv.ERROR_TYPE] = evaluation.error_type
    answerability = answerability_attributes(evaluation)
    base.update(answerability)
    points = tuple(
        (float(result.score), {**base, semconv.GEN_AI_EVALUATION_NAME: metric})
        for metric, result in evaluation.metrics.items()
        if result.score is not None
    )
    return outcome, points, _events(evaluation, name, answerability, options.thresholds), labels


def _events(
    evaluation: Evaluation,
    name: str | None,
    answerability: Attributes,
    thresholds: Mapping[str, float],
) -> tuple[tuple[int, Attributes], ...]:
    severity = (
        SeverityNumber.WARN if evaluation.status is EvalStatus.ERROR else SeverityNumber.INFO
    ).value
    events = []
    for metric in list(evaluation.metrics) or ["evaluation"]:
        result = evaluation.metrics.get(metric)
        attrs: Attributes = {
            semconv.GEN_AI_EVALUATION_NAME: metric,
            semconv.EVAL_STATUS: evaluation.status.value,
            semconv.EVAL_JUDGE: evaluation.judge,
        }
        if result is not None and result.score is not None:
            attrs[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = float(result.score)
            label = label_for(result.score, thresholds.get(metric))
            if label is not None:
                attrs[semconv.GEN_AI_EVALUATION_SCORE_LABEL] = label
        explanation = (result.explanation if result else None) or evaluation.explanation
        if explanation:
            attrs[semconv.GEN_AI_EVALUATION_EXPLANATION] = explanation[:MAX_EXPLANATION]
        if evaluation.error_type:
            attrs[semconv.ERROR_TYPE] = evaluation.error_type
        elif result is not None and result.status is EvalStatus.ERROR:
            attrs[semconv.ERROR_TYPE] = METRIC_FAILED  # this metric failed, not the evaluation
        if evaluation.escalated is not None:
            attrs[semconv.EVAL_CASCADE_ESCALATED] = evaluation.escalated
        attrs.update(judge_model_attributes(evaluation))
        if name:
            attrs[semconv.RAG_NAME] = name
        attrs.update(answerability)
        events.append((severity, attrs))
    return tuple(events)


class PipelineMetrics:
    """The instruments ragpulse records: scores and the evaluator's own health."""

    def __init__(
        self,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        queue_size: Callable[[], int] | None = None,
        queue_bytes: Callable[[], int] | None = None,
        held: Callable[[], tuple[int, int]] | None = None,
        breaker_open: Callable[[], bool] | None = None,
        coverage: Callable[[], float | None] | None = None,
        content_events_dropped: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter("ragpulse", __version__)
        self.score = meter.create_histogram(
            semconv.GEN_AI_EVALUATION_SCORE_METRIC,
            unit="1",
            description="Evaluation scores of RAG answers, one series per metric.",
            explicit_bucket_boundaries_advisory=list(SCORE_BUCKETS),
        )
        self.labels = meter.create_counter(
            semconv.EVALUATION_LABELS_METRIC,
            unit="{score}",
            description=(
                "Scores by pass/fail label against their metric's threshold (a score at the "
                "threshold passes), one series per metric and label: what alerts compare."
            ),
        )
        # Decisions happen on the request's thread, once per evaluation unit: they are
        # tallied in plain integers there and read by the metric reader's collection.
        self._decision_lock = threading.Lock()
        self._decision_counts: dict[str, int] = {}
        meter.create_observable_counter(
            semconv.METRIC_DECISIONS,
            callbacks=[self._observe_decisions],
            unit="{decision}",
            description="Sampling decisions by reason.",
        )
        self.hold_time = meter.create_histogram(
            semconv.METRIC_HOLD_TIME,
            unit="s",
            description="How long evaluated spans were held before export.",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS),
        )
        self.forced_exports = meter.create_counter(
            semconv.METRIC_FORCED_EXPORTS,
            unit="{span}",
            description="Spans forwarded without their evaluation (a bound, flush or shutdown).",
        )
        self.late_results = meter.create_counter(
            semconv.METRIC_LATE_RESULTS,
            unit="{evaluation}",
            description="Evaluations that returned after their span was forwarded.",
        )
        self.judge_calls = meter.create_counter(
            semconv.METRIC_JUDGE_CALLS, unit="{call}", description="Calls made to judges."
        )
        self.judge_tokens = meter.create_counter(
            semconv.METRIC_JUDGE_TOKENS, unit="{token}", description="Tokens spent by judges."
        )
        self.judge_latency = meter.create_histogram(
            semconv.METRIC_JUDGE_LATENCY,
            unit="s",
            description="Duration of one evaluation by the judge.",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS),
        )
        self.errors = meter.create_counter(
            semconv.METRIC_ERRORS,
            unit="{error}",
            description="Failed judge attempts (retries and fallbacks too) by error type.",
        )
        self.evaluations = meter.create_counter(
            semconv.METRIC_EVALUATIONS,
            unit="{evaluation}",
            description=(
                "Evaluations that came back, by status and error type: also those no judge "
                "attempt made (too_large, breaker_open, over_budget, a whole-evaluation timeout)."
            ),
        )
        if content_events_dropped is not None:
            dropped_events = content_events_dropped

            def observe_dropped_events(_: CallbackOptions) -> list[Observation]:
                return [
                    Observation(count, {"reason": reason})
                    for reason, count in dropped_events().items()
                ]

            meter.create_observable_counter(
                semconv.METRIC_CONTENT_EVENTS_DROPPED,
                callbacks=[observe_dropped_events],
                unit="{event}",
                description=(
                    "GenAI content log events not read with their trace, by reason: bounds "
                    "(the trace buffer's), late (the trace was already read)."
                ),
            )
        if queue_size is not None:
            meter.create_observable_gauge(
                semconv.METRIC_QUEUE_SIZE,
                callbacks=[_gauge(lambda: queue_size())],
                unit="{evaluation}",
                description="Evaluations waiting in the worker's queue.",
            )
        if queue_bytes is not None:
            meter.create_observable_gauge(
                semconv.METRIC_QUEUE_BYTES,
                callbacks=[_gauge(lambda: queue_bytes())],
                unit="By",
                description="Bytes of the records accepted by the worker and not yet evaluated.",
            )
        if held is not None:
            meter.create_observable_gauge(
                semconv.METRIC_HELD_SPANS,
                callbacks=[_gauge(lambda: held()[0])],
                unit="{span}",
                description="Spans held while their evaluation runs.",
            )
            meter.create_observable_gauge(
                semconv.METRIC_HELD_BYTES,
                callbacks=[_gauge(lambda: held()[1])],
                unit="By",
                description="Estimated bytes of the spans held.",
            )
        if breaker_open is not None:
            meter.create_observable_gauge(
                semconv.METRIC_BREAKER_STATE,
                callbacks=[_gauge(lambda: int(breaker_open()))],
                unit="1",
                description="1 while the judge's circuit breaker is open.",
            )
        if coverage is not None:
            meter.create_observable_gauge(
                semconv.METRIC_COVERAGE,
                callbacks=[_ratio_gauge(coverage)],
                unit="1",
                description=(
                    "Evaluations completed / evaluations the sample rate and rules asked for, "
                    "over the last minute."
                ),
            )

    def count_decision(self, reason: str) -> None:
        """Tally one sampling decision (cheap: no metrics SDK call on the request path)."""
        with self._decision_lock:
            self._decision_counts[reason] = self._decision_counts.get(reason, 0) + 1

    def _observe_decisions(self, options: CallbackOptions) -> list[Observation]:
        with self._decision_lock:
            counts = dict(self._decision_counts)
        return [
            Observation(count, {semconv.ATTR_DECISION_REASON: reason})
            for reason, count in counts.items()
        ]


def _gauge(read: Callable[[], int]) -> Callable[[CallbackOptions], list[Observation]]:
    def callback(options: CallbackOptions) -> list[Observation]:
        try:
            return [Observation(read())]
        except Exception:
            return []

    return callback


def _ratio_gauge(
    read: Callable[[], float | None],
) -> Callable[[CallbackOptions], list[Observation]]:
    def callback(options: CallbackOptions) -> list[Observation]:
        try:
            value = read()
        except Exception:
            return []
        return [] if value is None else [Observation(value)]

    return callback


class Emitter:
    """Writes one evaluation's histogram points, log events and judge metrics."""

    def __init__(
        self,
        options: EmitOptions,
        instruments: PipelineMetrics,
        logger_provider: _logs.LoggerProvider | None = None,
    ) -> None:
        self.options = options
        self.metrics = instruments
        provider = logger_provider or _logs.get_logger_provider()
        self._logger = provider.get_logger("ragpulse", __version__)

    def emit(self, record: RagRecord, evaluation: Evaluation, target: SpanContext | None) -> None:
        """Record the scores (with exemplars to ``target``) and emit one log event per metric
        of an evaluation already as it may leave the process."""
        service = record.attributes.get(semconv.ATTR_SERVICE_NAME)
        signals = signals_of(
            evaluation,
            name=record.name,
            service=service if isinstance(service, str) else None,
            options=self.options,
            conversation=record.conversation_id,
        )
        self.write(signals, target)

    def write(self, signals: Signals, target: SpanContext | None) -> None:
        """Record an evaluation's outcome and scores (with exemplars to ``target``) and emit
        its log events, as ``signals_of`` made them.

        Judge calls, tokens, latency and errors are recorded per attempt by ``judge_call``.
        """
        context = trace.set_span_in_context(NonRecordingSpan(target)) if target else None
        if signals.outcome:
            self.metrics.evaluations.add(1, signals.outcome)
        for value, attributes in signals.points:
            self.metrics.score.record(value, attributes, context=context)
        for attributes in signals.labels:
            self.metrics.labels.add(1, attributes)
            # The other label's series starts at 0 beside it: a rate over a series that first
            # appears with its first count misses that count, so a first `fail` would be lost.
            label = attributes.get(semconv.GEN_AI_EVALUATION_SCORE_LABEL)
            other = semconv.LABEL_FAIL if label == semconv.LABEL_PASS else semconv.LABEL_PASS
            self.metrics.labels.add(0, {**attributes, semconv.GEN_AI_EVALUATION_SCORE_LABEL: other})
        for severity, attributes in signals.events:
            if attributes.get(semconv.ERROR_TYPE) == METRIC_FAILED:
                # One metric failed (a user's metric raised or left [0, 1]): counted by name.
                failed = {
                    key: attributes[key]
                    for key in (
                        semconv.EVAL_JUDGE,
                        semconv.ERROR_TYPE,
                        semconv.GEN_AI_EVALUATION_NAME,
                    )
                }
                self.metrics.errors.add(1, failed)
            try:
                self._logger.emit(
                    LogRecord(
                        context=context,
                        severity_number=SeverityNumber(severity),
                        event_name=semconv.GEN_AI_EVALUATION_RESULT_EVENT,
                        attributes=attributes,
                    )
                )
            except Exception:
                _logger.debug("ragpulse: could not emit evaluation event", exc_info=True)

    def judge_call(self, evaluation: Evaluation) -> None:
        """Record one judge attempt (retries and fallbacks too): calls, tokens, latency, errors."""
        judge_attrs = {semconv.EVAL_JUDGE: evaluation.judge}
        if evaluation.usage.calls:
            self.metrics.judge_calls.add(evaluation.usage.calls, judge_attrs)
        if evaluation.usage.prompt_tokens:
            self.metrics.judge_tokens.add(
                evaluation.usage.prompt_tokens, {**judge_attrs, "gen_ai.token.type": "input"}
            )
        if evaluation.usage.completion_tokens:
            self.metrics.judge_tokens.add(
                evaluation.usage.completion_tokens, {**judge_attrs, "gen_ai.token.type": "output"}
            )
        self.metrics.judge_latency.record(evaluation.duration_ms / 1000.0, judge_attrs)
        if evaluation.status is EvalStatus.ERROR:
            self.metrics.errors.add(
                1, {**judge_attrs, semconv.ERROR_TYPE: evaluation.error_type or "unknown"}
            )
