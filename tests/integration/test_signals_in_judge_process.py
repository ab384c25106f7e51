"""A judge's process makes an evaluation's signals as the application would, under its policy.

``ProcessJudge`` asked for signals (``make_signals_for``) sends back, for an
evaluation with claims, the span attributes, outcome, score points and log-event
bodies made in the child under the application's content policy. They must be
exactly what the application makes from the same evaluation: with content, without
content (lengths and a keyed hash), and with ragpulse's own pattern redaction. A
``redact`` hook of the application is not run in the child: the whole evaluation
comes back and the application applies the hook itself. Through the whole pipeline, a
unit gets the same attributes and log events whether its judge has its own process or
runs on the worker thread.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Iterator
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import errors, semconv
from ragpulse.capture import ContentPolicy, get_policy, set_policy
from ragpulse.evaluation.types import Contexts, EvalStatus, Evaluation, RagRecord
from ragpulse.judges import Judge, LexicalJudge
from ragpulse.judging import ProcessJudge, ResilientJudge
from ragpulse.metrics import ALL_METRICS
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.serve._policy import PatternRedactor
from ragpulse.settings.options import EvaluationOptions
from ragpulse.signals.emit import EmitOptions, Signals
from ragpulse.signals.make import PreparedEvaluation, SignalSpec, make_signals

SSN = "078-05-1120"
RECORD = RagRecord(
    question="What is on file for Ann Lee?",
    contexts=Contexts([f"Customer file: Ann Lee, social security number {SSN}, since 2019."]),
    answer=f"Ann Lee's social security number is {SSN}. She became a customer in 2021.",
    name="privacy-bot",
    attributes={semconv.ATTR_SERVICE_NAME: "records"},
)
OPTIONS = EmitOptions(inline_annotations=True)


@pytest.fixture
def process_judge() -> Iterator[ProcessJudge]:
    judge = ProcessJudge(LexicalJudge(), timeout=120.0)
    try:
        yield judge
    finally:
        judge.close()


@pytest.fixture
def policy() -> Iterator[None]:
    before = get_policy()
    try:
        yield
    finally:
        set_policy(before)


def made_here(evaluation: Evaluation, spec: int) -> Signals:
    _, signals = make_signals(
        evaluation, name=RECORD.name, service="records", options=OPTIONS, spec=spec
    )
    return signals


def without_duration(signals: Signals) -> tuple[object, ...]:
    span = {k: v for k, v in signals.span.items() if k != semconv.EVAL_DURATION_MS}
    return (span, signals.outcome, signals.points, signals.events, signals.spec)


@pytest.mark.parametrize(
    "content_policy",
    [
        ContentPolicy(),
        ContentPolicy(capture_content=False, hash_key="deployment-secret"),
        ContentPolicy(redact=PatternRedactor([re.compile(r"\d{3}-\d{2}-\d{4}")])),
    ],
    ids=["content", "no-content-hashed", "pattern-redaction"],
)
def test_judge_process_makes_the_signals_the_application_would(
    process_judge: ProcessJudge, policy: None, content_policy: ContentPolicy
) -> None:
    set_policy(content_policy)
    spec = SignalSpec(OPTIONS)
    process_judge.make_signals_for(spec)
    got = asyncio.run(process_judge.evaluate(RECORD, ALL_METRICS))
    assert isinstance(got, PreparedEvaluation) and got.signals is not None
    assert got.claims == ()  # they stayed in the judge's process

    judged_here = asyncio.run(LexicalJudge().evaluate(RECORD, ALL_METRICS))
    assert without_duration(got.signals) == without_duration(made_here(judged_here, spec.serial))
    if content_policy.capture_content is False or content_policy.redact is not None:
        assert SSN not in repr(got.signals)


def test_application_redact_hook_is_applied_in_the_application(
    process_judge: ProcessJudge, policy: None
) -> None:
    set_policy(ContentPolicy(redact=lambda text: text.replace(SSN, "[SSN]")))
    spec = SignalSpec(OPTIONS)
    process_judge.make_signals_for(spec)
    got = asyncio.run(process_judge.evaluate(RECORD, ALL_METRICS))
    assert not isinstance(got, PreparedEvaluation)
    assert got.claims  # the whole evaluation came back
    signals = made_here(got, spec.serial)
    assert SSN not in repr(signals) and "[SSN]" in repr(signals)


def test_judge_process_not_asked_for_signals_returns_the_whole_evaluation(
    process_judge: ProcessJudge,
) -> None:
    got = asyncio.run(process_judge.evaluate(RECORD, ALL_METRICS))
    assert not isinstance(got, PreparedEvaluation)
    here = asyncio.run(LexicalJudge().evaluate(RECORD, ALL_METRICS))
    assert got == replace(here, duration_ms=got.duration_ms)


class OddJudge:
    """Returns an evaluation whose slice value is not text, as a careless judge might."""

    name = "odd"
    annotator_kind = "CODE"
    cpu_bound = True

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        return Evaluation(status=EvalStatus.NO_CLAIMS, metrics={}, slices={"sources": 3})  # type: ignore[dict-item]


def test_answer_the_application_cannot_read_is_recorded_as_an_error() -> None:
    judge = ProcessJudge(OddJudge(), timeout=120.0)
    try:
        got = asyncio.run(judge.evaluate(RECORD, ALL_METRICS))
    finally:
        judge.close()
    assert got.status is EvalStatus.ERROR
    assert got.error_type == errors.INVALID_RESULT


@ragpulse.retrieval
def lookup(question: str) -> list[str]:
    return list(RECORD.contexts.texts()) if isinstance(RECORD.contexts, Contexts) else []


@ragpulse.rag(name="privacy-bot")
def ask(question: str) -> str:
    lookup(question)
    return RECORD.answer or ""


def pipeline_output(route_spans: Any, judge: Judge) -> tuple[dict[str, object], list[object]]:
    """The unit's ``ragpulse.eval.*`` attributes (but its duration) and its log events' bodies."""
    spans = InMemorySpanExporter()
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(spans),
        judge=judge,
        sampler=EvalSampler(rate=1.0),
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
        logger_provider=logger_provider,
        evaluation=EvaluationOptions(inline_annotations=True),
    )
    route_spans(processor)
    ask(RECORD.question)
    assert processor.force_flush(120_000)
    (unit,) = [s for s in spans.get_finished_spans() if s.name == "privacy-bot"]
    attributes = {
        key: value
        for key, value in (unit.attributes or {}).items()
        if key.startswith(("ragpulse.eval.", "annotations.")) and key != semconv.EVAL_DURATION_MS
    }
    events = [dict(record.log_record.attributes or {}) for record in logs.get_finished_logs()]
    return attributes, events


@pytest.mark.parametrize(
    "content_policy",
    [ContentPolicy(), ContentPolicy(capture_content=False, hash_key="deployment-secret")],
    ids=["content", "no-content-hashed"],
)
def test_a_unit_gets_the_same_scores_and_events_whether_the_judge_has_its_own_process(
    route_spans: Any, policy: None, content_policy: ContentPolicy
) -> None:
    set_policy(content_policy)
    in_process = pipeline_output(route_spans, LexicalJudge())
    on_the_worker_thread = pipeline_output(
        route_spans, ResilientJudge(LexicalJudge(), isolate_cpu_bound=False)
    )
    assert in_process[0][semconv.EVAL_STATUS] == EvalStatus.OK.value
    assert in_process == on_the_worker_thread


def test_a_judge_given_wrapped_still_answers_its_other_callers_whole(route_spans: Any) -> None:
    judge = ResilientJudge(LexicalJudge())
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), judge=judge, sampler=EvalSampler(rate=1.0)
    )
    route_spans(processor)
    got = asyncio.run(judge.evaluate(RECORD, ALL_METRICS))
    assert not isinstance(got, PreparedEvaluation)
    assert got.claims
    judge.close()
