"""The caps an ``EvalSampler`` carries, enforced by the processor that uses it.

``max_evaluations_per_minute`` becomes an ``EvaluationBudget`` the processor asks
after the sampler said yes (forced units included: a cost cap); the refusal is
counted as ``over_budget`` and the span goes out at once, ``skipped`` with ``over_budget``.
``max_judge_tokens_per_hour`` limits what the judge spends: once spent, records
are ``skipped`` with ``over_budget`` (or go to a fallback judge) while requests are
still sampled. Spans go through the real SDK into an in-memory exporter; clocks
are moved by hand.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import errors, semconv
from ragpulse.evaluation.types import (
    GROUNDEDNESS,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Usage,
)
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.budget import EvaluationBudget
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import JudgeOptions

WAIT = 20.0
UNIT = "support-bot"


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return ["Support is open from 9am to 5pm on weekdays."]


@ragpulse.rag(name=UNIT)
def handle(question: str) -> str:
    search(question)
    return "Support is open from 9am to 5pm on weekdays."


@ragpulse.rag(name=UNIT)
def escalated(question: str) -> str:
    ragpulse.force_evaluation()
    search(question)
    return "Support is open from 9am to 5pm on weekdays."


class TokenSpendingJudge:
    """An LLM judge that reports ``tokens`` of usage per call."""

    name = "spender"
    annotator_kind = "LLM"

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.calls = 0

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        self.calls += 1
        return Evaluation(
            status=EvalStatus.OK,
            metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, 1.0)},
            judge=self.name,
            annotator_kind="LLM",
            usage=Usage(calls=1, prompt_tokens=self.tokens, completion_tokens=0),
        )


Build = Callable[..., tuple[EvaluatingSpanProcessor, InMemorySpanExporter]]


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def pipeline(route_spans: Any, reader: InMemoryMetricReader) -> Build:
    def build(**options: Any) -> tuple[EvaluatingSpanProcessor, InMemorySpanExporter]:
        memory = InMemorySpanExporter()
        processor = EvaluatingSpanProcessor(
            SimpleSpanProcessor(memory),
            meter_provider=MeterProvider(metric_readers=[reader]),
            **options,
            judging=JudgeOptions(concurrency=1),
        )
        route_spans(processor)
        return processor, memory

    return build


def decisions(reader: InMemoryMetricReader) -> dict[str, int]:
    found: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == semconv.METRIC_DECISIONS:
                    for point in metric.data.data_points:
                        reason = str((point.attributes or {})[semconv.ATTR_DECISION_REASON])
                        found[reason] = found.get(reason, 0) + int(point.value)  # type: ignore[union-attr]
    return found


def units(memory: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in memory.get_finished_spans() if s.name == UNIT]


def status_of(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get(semconv.EVAL_STATUS)


# --- EvaluationBudget ------------------------------------------------------------------


def test_budget_admits_the_minutes_cap_then_refuses() -> None:
    budget = EvaluationBudget(10, clock=ManualClock())
    assert [budget.admit() for _ in range(15)] == [True] * 10 + [False] * 5


def test_budget_admits_again_as_the_minute_passes() -> None:
    clock = ManualClock()
    budget = EvaluationBudget(60, clock=clock)
    assert all(budget.admit() for _ in range(60))
    assert not budget.admit()
    clock.now += 1.0
    assert budget.admit()
    assert not budget.admit()


def test_concurrent_requests_are_admitted_exactly_the_budget() -> None:
    budget = EvaluationBudget(600, clock=ManualClock())
    admitted = [0] * 6
    start = threading.Barrier(6)

    def ask(slot: int) -> None:
        start.wait()
        admitted[slot] = sum(budget.admit() for _ in range(300))

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(admitted) == 600


@pytest.mark.parametrize("cap", [0, -5, float("nan")])
def test_budget_of_nothing_is_refused(cap: float) -> None:
    with pytest.raises(ValueError):
        EvaluationBudget(cap)


# --- max_evaluations_per_minute through the processor ------------------------------------


def test_forced_units_skip_the_rate_but_not_the_evaluations_budget(
    pipeline: Build, reader: InMemoryMetricReader
) -> None:
    sampler = EvalSampler(0.0, max_evaluations_per_minute=2, clock=ManualClock())
    processor, memory = pipeline(sampler=sampler)
    for n in range(3):
        escalated(f"complaint {n}")
    assert processor.force_flush(int(WAIT * 1000))
    assert decisions(reader) == {errors.REASON_FORCED: 2, errors.REASON_OVER_BUDGET: 1}
    assert sorted(str(status_of(u)) for u in units(memory)) == ["ok", "ok", "skipped"]


def test_unsampled_units_do_not_spend_the_evaluations_budget(
    pipeline: Build, reader: InMemoryMetricReader
) -> None:
    sampler = EvalSampler(0.5, max_evaluations_per_minute=3, clock=ManualClock())
    processor, memory = pipeline(sampler=sampler)
    for n in range(40):
        handle(f"question {n}")
    assert processor.force_flush(int(WAIT * 1000))
    rate_alone = EvalSampler(0.5)
    in_sample = sum(rate_alone.should_evaluate(u.context.trace_id).evaluate for u in units(memory))
    assert in_sample >= 3  # 40 coin flips
    assert decisions(reader) == {
        errors.REASON_NOT_SAMPLED: 40 - in_sample,
        errors.REASON_EVALUATED: 3,
        errors.REASON_OVER_BUDGET: in_sample - 3,
    }


def test_evaluations_budget_refills_on_the_samplers_clock(
    pipeline: Build, reader: InMemoryMetricReader
) -> None:
    clock = ManualClock()
    processor, _ = pipeline(sampler=EvalSampler(1.0, max_evaluations_per_minute=60, clock=clock))
    for n in range(61):
        handle(f"question {n}")
    # Units are read, and admitted, on the worker thread: these 61 before the clock moves.
    assert processor.force_flush(int(WAIT * 1000))
    clock.now += 1.0
    handle("one more second")
    assert processor.force_flush(int(WAIT * 1000))
    assert decisions(reader) == {errors.REASON_EVALUATED: 61, errors.REASON_OVER_BUDGET: 1}


# --- max_judge_tokens_per_hour through the processor ---------------------------------------


def test_judge_is_not_called_once_the_hours_tokens_are_spent(pipeline: Build) -> None:
    judge = TokenSpendingJudge(tokens=2000)
    sampler = EvalSampler(1.0, max_judge_tokens_per_hour=3600, clock=ManualClock())
    processor, memory = pipeline(judge=judge, sampler=sampler)
    for n in range(3):
        handle(f"question {n}")
        assert processor.force_flush(int(WAIT * 1000))
    assert judge.calls == 2  # 2000 left 1600; 4000 spent it
    first, second, third = units(memory)
    assert [status_of(first), status_of(second)] == [EvalStatus.OK, EvalStatus.OK]
    assert status_of(third) == EvalStatus.SKIPPED
    assert third.attributes[semconv.EVAL_ERROR_TYPE] == errors.REASON_OVER_BUDGET


def test_spent_judge_tokens_refuse_no_request_and_come_back_as_the_hour_passes(
    pipeline: Build, reader: InMemoryMetricReader
) -> None:
    clock = ManualClock()
    judge = TokenSpendingJudge(tokens=4000)
    sampler = EvalSampler(1.0, max_judge_tokens_per_hour=3600, clock=clock)
    processor, memory = pipeline(judge=judge, sampler=sampler)
    handle("spends it all")
    assert processor.force_flush(int(WAIT * 1000))
    clock.now += 400.0  # 400 tokens back: still 0 in debt
    handle("while spent")
    assert processor.force_flush(int(WAIT * 1000))
    clock.now += 1.0
    handle("after the debt")
    assert processor.force_flush(int(WAIT * 1000))
    assert judge.calls == 2
    assert [status_of(u) for u in units(memory)] == [
        EvalStatus.OK,
        EvalStatus.SKIPPED,
        EvalStatus.OK,
    ]
    assert decisions(reader) == {errors.REASON_EVALUATED: 3}
