"""A pass/fail label is written only where the judge that made the score can decide it.

The offline judge declines groundedness's label (no threshold keeps the promise on answers
real LLMs wrote): the score is still written, but no ``.label`` attribute, no label in the
log event, no count in the label counter, no OpenInference label. A user's threshold brings
the label back. The judges' declarations are read through their wrappers.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.unit.test_emit import handle  # the same request: a grounded and an invented claim

import ragpulse
from ragpulse import semconv
from ragpulse.evaluation.types import FAITHFULNESS, GROUNDEDNESS
from ragpulse.judges._kinds import JUDGE_KINDS
from ragpulse.judges._labels import (
    MAX_FALSE_FAIL,
    MIN_SEPARATION,
    declined,
    judge_kind,
    kind_named,
    label_policy,
    label_thresholds,
)
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging._factory import build_judge
from ragpulse.metrics import METRICS
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler


class Run:
    """One request through an ``EvaluatingSpanProcessor`` on the real SDK, read back."""

    def __init__(self, route_spans: Any, thresholds: dict[str, float] | None = None) -> None:
        self.reader = InMemoryMetricReader()
        self.logs = InMemoryLogRecordExporter()
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        memory = InMemorySpanExporter()
        processor = EvaluatingSpanProcessor(
            SimpleSpanProcessor(memory),
            judge=LexicalJudge(),
            sampler=EvalSampler(rate=1.0),
            thresholds=thresholds,
            evaluation=ragpulse.EvaluationOptions(inline_annotations=True),
            meter_provider=MeterProvider(metric_readers=[self.reader]),
            logger_provider=logger_provider,
        )
        route_spans(processor)
        handle("When is support open?")
        assert processor.force_flush(20_000)
        (self.span,) = [s for s in memory.get_finished_spans() if s.name == "support-bot"]

    @property
    def attributes(self) -> dict[str, Any]:
        span: ReadableSpan = self.span
        return dict(span.attributes or {})

    def event(self, metric: str) -> dict[str, Any]:
        (found,) = [
            dict(r.log_record.attributes or {})
            for r in self.logs.get_finished_logs()
            if r.log_record.event_name == semconv.GEN_AI_EVALUATION_RESULT_EVENT
            and (r.log_record.attributes or {}).get(semconv.GEN_AI_EVALUATION_NAME) == metric
        ]
        return found

    def counted(self, metric: str) -> float:
        """Scores of ``metric`` in the label counter, pass and fail together."""
        total = 0.0
        data = self.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for series in scope_metrics.metrics:
                    if series.name != semconv.EVALUATION_LABELS_METRIC:
                        continue
                    for point in series.data.data_points:
                        attributes = point.attributes or {}
                        if attributes.get(semconv.GEN_AI_EVALUATION_NAME) == metric:
                            total += point.value  # type: ignore[union-attr]
        return total

    def inline_labels(self) -> dict[str, Any]:
        attributes = self.attributes
        names = {
            k.rsplit(".", 2)[0]: v
            for k, v in attributes.items()
            if k.startswith("annotations.") and k.endswith(".annotation.name")
        }
        return {
            str(name): attributes.get(f"{prefix}.annotation.label")
            for prefix, name in names.items()
        }


@pytest.fixture
def declined_run(route_spans: Any) -> Run:
    return Run(route_spans)


def test_the_offline_judge_writes_groundedness_score_without_its_label(declined_run: Run) -> None:
    attributes = declined_run.attributes
    assert attributes[semconv.eval_score(GROUNDEDNESS)] == 0.5
    assert semconv.eval_label(GROUNDEDNESS) not in attributes
    assert attributes[semconv.eval_label(FAITHFULNESS)] in ("pass", "fail")


def test_no_label_in_the_log_event_of_a_declined_metric(declined_run: Run) -> None:
    event = declined_run.event(GROUNDEDNESS)
    assert event[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 0.5
    assert semconv.GEN_AI_EVALUATION_SCORE_LABEL not in event
    assert semconv.GEN_AI_EVALUATION_SCORE_LABEL in declined_run.event(FAITHFULNESS)


def test_no_count_in_the_label_counter_for_a_declined_metric(declined_run: Run) -> None:
    assert declined_run.counted(GROUNDEDNESS) == 0
    assert declined_run.counted(FAITHFULNESS) == 1


def test_no_openinference_label_for_a_declined_metric(declined_run: Run) -> None:
    labels = declined_run.inline_labels()
    assert GROUNDEDNESS in labels and labels[GROUNDEDNESS] is None
    assert labels[FAITHFULNESS] in ("pass", "fail")


def test_a_users_threshold_brings_a_declined_label_back(route_spans: Any) -> None:
    run = Run(route_spans, thresholds={GROUNDEDNESS: 0.4})
    assert run.attributes[semconv.eval_label(GROUNDEDNESS)] == "pass"
    assert run.event(GROUNDEDNESS)[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "pass"
    assert run.counted(GROUNDEDNESS) == 1


def test_a_users_threshold_of_one_metric_leaves_the_judges_others() -> None:
    thresholds = label_thresholds("lexical", {"relevancy": 0.4})
    assert thresholds["relevancy"] == 0.4
    assert thresholds[FAITHFULNESS] == label_policy("lexical")[FAITHFULNESS].threshold
    assert GROUNDEDNESS not in thresholds


@pytest.mark.parametrize("kind", [*JUDGE_KINDS, None])
def test_every_judge_declares_every_built_in_metric(kind: str | None) -> None:
    assert set(label_policy(kind)) == set(METRICS)


def test_the_offline_judge_declines_groundedness_and_says_why() -> None:
    reason = declined("lexical")[GROUNDEDNESS]
    assert "no threshold keeps the promise" in reason
    assert GROUNDEDNESS in declined("cascade")
    assert declined("openai") == {}


def test_every_measured_label_the_offline_judge_writes_keeps_the_promise() -> None:
    for metric, label in label_policy("lexical").items():
        if label.labelled and label.false_fail is not None:
            assert label.keeps_promise, metric
            assert label.cv_false_fail is not None and label.cv_detection is not None
            assert label.cv_false_fail <= MAX_FALSE_FAIL, metric
            assert label.cv_detection >= MIN_SEPARATION * label.cv_false_fail, metric


def test_a_judges_kind_is_read_through_the_wrappers_that_run_it() -> None:
    assert judge_kind(build_judge("lexical")) == "lexical"
    assert judge_kind(build_judge("lexical", resilient=True)) == "lexical"
    assert judge_kind(object()) is None


def test_a_built_in_judges_kind_is_read_from_its_default_name() -> None:
    assert kind_named("lexical") == "lexical"
    assert kind_named("openai:gpt-4o-mini") == "openai"
    assert kind_named("my-judge") is None
    assert kind_named(None) is None
