"""Emission: one evaluation becomes span attributes, histogram points and log events.

Signals are read back with the SDK's own in-memory readers: an
``InMemoryMetricReader`` on a real ``MeterProvider`` and an in-memory log
exporter on a real ``LoggerProvider``. The first tests run the whole pipeline
(a decorated request, the processor, the real ``LexicalJudge``); the others hand
an ``Evaluation`` to the emitter directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, TraceFlags

import ragpulse
from ragpulse import semconv
from ragpulse.evaluation.types import (
    CORRECTNESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    Claim,
    ClaimVerdict,
    Context,
    EvalStatus,
    Evaluation,
    Evidence,
    MetricResult,
    RagRecord,
    Verdict,
)
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.signals.emit import (
    MAX_EXPLANATION,
    SCORE_BUCKETS,
    EmitOptions,
    Emitter,
    PipelineMetrics,
    label_for,
    span_attributes,
)

CONTEXTS = ["Support is open from 9am to 5pm on weekdays.", "The L2 router costs $129."]
TARGET = SpanContext(
    trace_id=0x5B8EFFF798038103D269B633813FC60C,
    span_id=0xEEE19B7EC3C1B174,
    is_remote=False,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
)


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return list(CONTEXTS)


@ragpulse.rag(name="support-bot")
def handle(question: str) -> str:
    search(question)
    return "Support is open from 9am to 5pm on weekdays. The router costs $99."


class Signals:
    """A real MeterProvider and LoggerProvider whose output the test reads back."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.logs = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def emitter(self, options: EmitOptions | None = None) -> Emitter:
        instruments = PipelineMetrics(self.meter_provider)
        return Emitter(options or EmitOptions(), instruments, self.logger_provider)

    def score_points(self) -> list[HistogramDataPoint]:
        found: list[HistogramDataPoint] = []
        data = self.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == semconv.EVALUATION_SCORE_METRIC:
                        assert metric.unit == "1"
                        found.extend(metric.data.data_points)  # type: ignore[arg-type]
        return found

    def counter(self, name: str) -> dict[frozenset[tuple[str, Any]], float]:
        found: dict[frozenset[tuple[str, Any]], float] = {}
        data = self.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            key = frozenset((point.attributes or {}).items())
                            found[key] = point.value  # type: ignore[union-attr]
        return found

    def events(self) -> list[ReadableLogRecord]:
        return [
            r
            for r in self.logs.get_finished_logs()
            if r.log_record.event_name == semconv.GEN_AI_EVALUATION_RESULT_EVENT
        ]


@pytest.fixture
def signals() -> Signals:
    return Signals()


def by_name(points: Sequence[HistogramDataPoint]) -> dict[str, HistogramDataPoint]:
    return {str(p.attributes[semconv.GEN_AI_EVALUATION_NAME]): p for p in points}


def record(answer: str = "Support is open from 9am to 5pm on weekdays.") -> RagRecord:
    return RagRecord(
        question="When is support open?",
        contexts=tuple(Context(text) for text in CONTEXTS),
        answer=answer,
        name="support-bot",
        span_context=TARGET,
    )


def evaluation(**scores: float | None) -> Evaluation:
    return Evaluation(
        status=EvalStatus.OK,
        metrics={
            name: MetricResult(name, score, explanation=f"{name} explained")
            for name, score in scores.items()
        },
        judge="scripted",
        annotator_kind="LLM",
    )


def evaluate(record_: RagRecord) -> Evaluation:
    return asyncio.run(LexicalJudge().evaluate(record_, (FAITHFULNESS, GROUNDEDNESS, CORRECTNESS)))


# --- the whole pipeline ---------------------------------------------------------------------


@pytest.fixture
def evaluated(route_spans: Any, signals: Signals) -> ReadableSpan:
    """One decorated request, evaluated; returns its forwarded unit span."""
    memory = InMemorySpanExporter()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(memory),
        judge=LexicalJudge(),
        sampler=EvalSampler(rate=1.0),
        service_name="support-service",
        meter_provider=signals.meter_provider,
        logger_provider=signals.logger_provider,
    )
    route_spans(processor)
    handle("When is support open?")
    assert processor.force_flush(20_000)
    (unit,) = [s for s in memory.get_finished_spans() if s.name == "support-bot"]
    return unit


def test_score_points_carry_exemplars_that_point_at_the_evaluated_span(
    evaluated: ReadableSpan, signals: Signals
) -> None:
    points = by_name(signals.score_points())
    assert set(points) == {FAITHFULNESS, GROUNDEDNESS}  # no reference: no correctness
    for point in points.values():
        assert point.count == 1
        (exemplar,) = point.exemplars
        assert exemplar.trace_id == evaluated.context.trace_id
        assert exemplar.span_id == evaluated.context.span_id
        assert exemplar.value == point.sum


def test_score_points_match_the_scores_written_on_the_span(
    evaluated: ReadableSpan, signals: Signals
) -> None:
    points = by_name(signals.score_points())
    attributes = evaluated.attributes or {}
    for name, point in points.items():
        assert point.sum == attributes[semconv.eval_score(name)]
    assert points[GROUNDEDNESS].sum == 0.5  # one of two sentences is in the contexts


def test_score_histogram_has_explicit_buckets_from_a_tenth_to_one(
    evaluated: ReadableSpan, signals: Signals
) -> None:
    for point in signals.score_points():
        assert tuple(point.explicit_bounds) == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
        assert tuple(point.explicit_bounds) == SCORE_BUCKETS


def test_score_points_have_the_metric_name_service_rag_name_and_slices_only(
    evaluated: ReadableSpan, signals: Signals
) -> None:
    low_cardinality = {semconv.EVAL_ABSTAINED, semconv.EVAL_ANSWERABLE, semconv.EVAL_DIAGNOSIS}
    for name, point in by_name(signals.score_points()).items():
        attributes = dict(point.attributes or {})
        cuts = {
            k: v
            for k, v in attributes.items()
            if k.startswith(semconv.EVAL_SLICE_PREFIX) or k in low_cardinality
        }
        assert {k: v for k, v in attributes.items() if k not in cuts} == {
            semconv.GEN_AI_EVALUATION_NAME: name,
            semconv.ATTR_SERVICE_NAME: "support-service",
            semconv.RAG_NAME: "support-bot",
        }
        assert cuts[semconv.EVAL_SLICE_ABSTAINED] == "false"


def test_one_result_event_per_metric_with_the_evaluated_span_context(
    evaluated: ReadableSpan, signals: Signals
) -> None:
    events = signals.events()
    names = sorted(str(e.log_record.attributes[semconv.GEN_AI_EVALUATION_NAME]) for e in events)
    assert names == [FAITHFULNESS, GROUNDEDNESS]
    attributes = evaluated.attributes or {}
    for event in events:
        log = event.log_record
        assert log.trace_id == evaluated.context.trace_id
        assert log.span_id == evaluated.context.span_id
        name = str(log.attributes[semconv.GEN_AI_EVALUATION_NAME])
        assert (
            log.attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE]
            == attributes[semconv.eval_score(name)]
        )
        # The same label, or none in both where the judge declines one.
        assert log.attributes.get(semconv.GEN_AI_EVALUATION_SCORE_LABEL) == attributes.get(
            semconv.eval_label(name)
        )
        assert (
            log.attributes[semconv.GEN_AI_EVALUATION_EXPLANATION]
            == attributes[semconv.eval_explanation(name)]
        )


# --- the emitter on its own ----------------------------------------------------------------------


def test_event_attributes_name_score_label_and_explanation(signals: Signals) -> None:
    signals.emitter().emit(record(), evaluation(groundedness=0.75), TARGET)
    (event,) = signals.events()
    log = event.log_record
    assert (log.trace_id, log.span_id) == (TARGET.trace_id, TARGET.span_id)
    assert log.attributes[semconv.GEN_AI_EVALUATION_NAME] == GROUNDEDNESS
    assert log.attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 0.75
    assert log.attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == semconv.LABEL_PASS
    assert log.attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] == "groundedness explained"


def test_no_claims_gives_no_score_attribute_and_no_histogram_point(signals: Signals) -> None:
    result = evaluate(record(answer=""))
    assert result.status is EvalStatus.NO_CLAIMS
    attributes = span_attributes(result, EmitOptions())
    assert attributes[semconv.EVAL_STATUS] == EvalStatus.NO_CLAIMS
    assert attributes[semconv.EVAL_CLAIMS_TOTAL] == 0
    assert not any(key.endswith(".score") or key.endswith(".label") for key in attributes)

    signals.emitter().emit(record(answer=""), result, TARGET)
    assert signals.score_points() == []
    events = signals.events()
    assert events  # the outcome is still reported, without a score
    for event in events:
        assert semconv.GEN_AI_EVALUATION_SCORE_VALUE not in (event.log_record.attributes or {})
        assert event.log_record.attributes[semconv.EVAL_STATUS] == EvalStatus.NO_CLAIMS


def test_scores_are_labelled_pass_at_or_above_the_threshold_and_fail_below() -> None:
    options = EmitOptions(thresholds={GROUNDEDNESS: 0.7, FAITHFULNESS: 0.9})
    attributes = span_attributes(evaluation(groundedness=0.7, faithfulness=0.89), options)
    assert attributes[semconv.eval_label(GROUNDEDNESS)] == semconv.LABEL_PASS
    assert attributes[semconv.eval_label(FAITHFULNESS)] == semconv.LABEL_FAIL
    assert label_for(None, 0.7) is None


def test_metric_without_a_threshold_gets_a_score_but_no_label() -> None:
    options = EmitOptions(thresholds={GROUNDEDNESS: 0.7})
    attributes = span_attributes(evaluation(groundedness=0.2, correctness=0.4), options)
    assert attributes[semconv.eval_score(CORRECTNESS)] == 0.4
    assert semconv.eval_label(CORRECTNESS) not in attributes
    assert attributes[semconv.eval_label(GROUNDEDNESS)] == semconv.LABEL_FAIL


def test_each_metric_is_its_own_flat_attribute() -> None:
    attributes = span_attributes(evaluation(groundedness=0.5, faithfulness=1.0), EmitOptions())
    assert attributes[semconv.eval_score(GROUNDEDNESS)] == 0.5
    assert attributes[semconv.eval_score(FAITHFULNESS)] == 1.0
    assert attributes[semconv.EVAL_JUDGE] == "scripted"
    assert attributes[semconv.EVAL_ANNOTATOR_KIND] == "LLM"


def _claims(count: int, text: str) -> tuple[ClaimVerdict, ...]:
    return tuple(
        ClaimVerdict(
            Claim(f"{text} {n}"),
            Verdict.SUPPORTED,
            Evidence(context_index=0, start=0, end=10, text="Support is", context_id="doc-0"),
        )
        for n in range(count)
    )


def test_claims_json_lists_each_claim_with_verdict_and_evidence() -> None:
    result = Evaluation(
        status=EvalStatus.OK,
        metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, 1.0)},
        claims=_claims(2, "Support opens at 9am"),
    )
    claims = json.loads(span_attributes(result, EmitOptions())[semconv.EVAL_CLAIMS])
    assert claims[0] == {
        "text": "Support opens at 9am 0",
        "verdict": "SUPPORTED",
        "context_index": 0,
        "context_id": "doc-0",
        "start": 0,
        "end": 10,
    }
    assert len(claims) == 2


def test_claims_json_carries_each_verdicts_confidence_rounded_where_the_judge_gives_one() -> None:
    sure = ClaimVerdict(Claim("Support opens at 9am"), Verdict.SUPPORTED, confidence=0.87654)
    silent = ClaimVerdict(Claim("Support closes at 5pm"), Verdict.NOT_FOUND)
    result = Evaluation(
        status=EvalStatus.OK,
        metrics={FAITHFULNESS: MetricResult(FAITHFULNESS, 0.5)},
        claims=(sure, silent),
    )
    claims = json.loads(span_attributes(result, EmitOptions())[semconv.EVAL_CLAIMS])
    assert claims[0][semconv.CLAIM_CONFIDENCE] == 0.877
    assert semconv.CLAIM_CONFIDENCE not in claims[1]


def test_claims_json_stays_valid_json_within_its_cap_and_counts_what_it_left_out() -> None:
    result = Evaluation(
        status=EvalStatus.OK,
        metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, 1.0)},
        claims=_claims(200, "A fairly long claim about the support hours of the shop"),
    )
    text = span_attributes(result, EmitOptions(max_claims_json=2000))[semconv.EVAL_CLAIMS]
    assert len(text) <= 2000
    claims = json.loads(text)
    kept = [c for c in claims if "text" in c]
    assert 0 < len(kept) < 200
    assert claims[-1] == {"truncated": 200 - len(kept)}
    assert [c["text"] for c in kept] == [c.claim.text for c in result.claims[: len(kept)]]


def test_capped_claims_json_keeps_non_ascii_text_as_written() -> None:
    result = Evaluation(
        status=EvalStatus.OK,
        metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, 1.0)},
        claims=_claims(50, "Le support ouvre à 9 h à Zürich"),
    )
    text = span_attributes(result, EmitOptions(max_claims_json=600))[semconv.EVAL_CLAIMS]
    claims = json.loads(text)
    assert "truncated" in claims[-1]
    assert "Zürich" in text  # not escaped as \u00fc, which would spend the cap on escapes


def test_claims_count_by_verdict() -> None:
    verdicts = (Verdict.SUPPORTED, Verdict.INFERRED, Verdict.NOT_FOUND, Verdict.CONTRADICTED)
    result = Evaluation(
        status=EvalStatus.OK,
        metrics={FAITHFULNESS: MetricResult(FAITHFULNESS, 0.5)},
        claims=tuple(ClaimVerdict(Claim(f"claim {v.value}"), v) for v in verdicts),
    )
    attributes = span_attributes(result, EmitOptions())
    assert attributes[semconv.EVAL_CLAIMS_TOTAL] == 4
    for key in (
        semconv.EVAL_CLAIMS_SUPPORTED,
        semconv.EVAL_CLAIMS_INFERRED,
        semconv.EVAL_CLAIMS_NOT_FOUND,
        semconv.EVAL_CLAIMS_CONTRADICTED,
    ):
        assert attributes[key] == 1


def test_explanations_are_capped() -> None:
    result = Evaluation(
        status=EvalStatus.OK,
        metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, 0.5, explanation="why " * 1000)},
    )
    attributes = span_attributes(result, EmitOptions())
    assert len(attributes[semconv.eval_explanation(GROUNDEDNESS)]) == MAX_EXPLANATION


def test_inline_annotations_follow_the_openinference_form() -> None:
    options = EmitOptions(inline_annotations=True)
    attributes = span_attributes(evaluation(groundedness=0.9, correctness=None), options)
    assert attributes[semconv.oi_annotation(0, "name")] == GROUNDEDNESS
    assert attributes[semconv.oi_annotation(0, "score")] == 0.9
    assert attributes[semconv.oi_annotation(0, "label")] == semconv.LABEL_PASS
    assert attributes[semconv.oi_annotation(0, "annotator_kind")] == "LLM"
    assert semconv.oi_annotation(1, "name") not in attributes  # undefined scores are skipped


def test_failed_evaluation_is_an_error_event_with_error_type_and_is_counted(
    signals: Signals,
) -> None:
    failed = Evaluation.failed("rate_limited", judge="openai:gpt-4o-mini", annotator_kind="LLM")
    attributes = span_attributes(failed, EmitOptions())
    assert attributes[semconv.EVAL_STATUS] == EvalStatus.ERROR
    assert attributes[semconv.EVAL_ERROR_TYPE] == "rate_limited"
    assert semconv.EVAL_CLAIMS not in attributes

    emitter = signals.emitter()
    emitter.emit(record(), failed, TARGET)
    emitter.judge_call(failed)  # the worker reports each attempt
    (event,) = signals.events()
    assert event.log_record.attributes[semconv.ERROR_TYPE] == "rate_limited"
    assert event.log_record.severity_number is not None
    assert event.log_record.severity_number.name == "WARN"
    assert signals.score_points() == []
    errors = signals.counter(semconv.METRIC_ERRORS)
    assert errors == {
        frozenset(
            {(semconv.EVAL_JUDGE, "openai:gpt-4o-mini"), (semconv.ERROR_TYPE, "rate_limited")}
        ): 1
    }


def test_judge_usage_is_counted_as_calls_and_tokens(signals: Signals) -> None:
    from ragpulse.evaluation.types import Usage

    used = Evaluation(
        status=EvalStatus.OK,
        metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, 1.0)},
        judge="openai:gpt-4o-mini",
        annotator_kind="LLM",
        usage=Usage(calls=2, prompt_tokens=300, completion_tokens=40),
    )
    signals.emitter().judge_call(used)
    assert sum(signals.counter(semconv.METRIC_JUDGE_CALLS).values()) == 2
    tokens = {
        dict(key)["gen_ai.token.type"]: value
        for key, value in signals.counter(semconv.METRIC_JUDGE_TOKENS).items()
    }
    assert tokens == {"input": 300, "output": 40}


def test_a_failed_metric_is_counted_by_name_and_the_rest_is_recorded(signals: Signals) -> None:
    failing = Evaluation(
        status=EvalStatus.OK,
        metrics={
            "faithfulness": MetricResult("faithfulness", 1.0),
            "shouting": MetricResult("shouting", None, "shouting failed", EvalStatus.ERROR),
        },
        judge="lexical",
        annotator_kind="CODE",
    )
    signals.emitter().emit(RagRecord("q", (), "a"), failing, None)
    errors = signals.counter(semconv.METRIC_ERRORS)
    assert errors == {
        frozenset(
            {
                semconv.EVAL_JUDGE: "lexical",
                semconv.ERROR_TYPE: "metric_failed",
                semconv.GEN_AI_EVALUATION_NAME: "shouting",
            }.items()
        ): 1
    }
    assert [p.attributes[semconv.GEN_AI_EVALUATION_NAME] for p in signals.score_points()] == [
        "faithfulness"
    ]


def _labels(signals: Signals) -> dict[tuple[str, str], float]:
    counted = signals.counter(semconv.EVALUATION_LABELS_METRIC)
    return {
        (
            dict(key)[semconv.GEN_AI_EVALUATION_NAME],
            dict(key)[semconv.GEN_AI_EVALUATION_SCORE_LABEL],
        ): value
        for key, value in counted.items()
    }


def test_each_labelled_score_is_counted_by_its_label_a_score_at_the_threshold_as_pass(
    signals: Signals,
) -> None:
    options = EmitOptions(thresholds={GROUNDEDNESS: 0.7, CORRECTNESS: 0.5}, service_name="bot")
    emitter = signals.emitter(options)
    emitter.emit(record(), evaluation(groundedness=0.7, correctness=0.49999), TARGET)
    emitter.emit(record(), evaluation(groundedness=0.69999, correctness=0.5), TARGET)
    emitter.emit(record(), evaluation(groundedness=1.0, faithfulness=0.1), TARGET)
    assert _labels(signals) == {
        (GROUNDEDNESS, semconv.LABEL_PASS): 2,
        (GROUNDEDNESS, semconv.LABEL_FAIL): 1,
        (CORRECTNESS, semconv.LABEL_PASS): 1,
        (CORRECTNESS, semconv.LABEL_FAIL): 1,
    }  # faithfulness has no threshold in these options: no label, not counted
    keys = signals.counter(semconv.EVALUATION_LABELS_METRIC)
    # Few attributes, whatever the slices: service, unit, metric and label only.
    assert {k for key in keys for k, _ in key} == {
        semconv.ATTR_SERVICE_NAME,
        semconv.RAG_NAME,
        semconv.GEN_AI_EVALUATION_NAME,
        semconv.GEN_AI_EVALUATION_SCORE_LABEL,
    }


def test_a_metrics_first_label_starts_the_other_labels_series_at_zero(signals: Signals) -> None:
    # A rate misses the first count of a series that appears with it: the fail series must
    # exist before the first fail, or a service's first failing score would be lost.
    signals.emitter(EmitOptions(thresholds={GROUNDEDNESS: 0.7})).emit(
        record(), evaluation(groundedness=1.0), TARGET
    )
    assert _labels(signals) == {
        (GROUNDEDNESS, semconv.LABEL_PASS): 1,
        (GROUNDEDNESS, semconv.LABEL_FAIL): 0,
    }
