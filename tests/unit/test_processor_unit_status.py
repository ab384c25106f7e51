"""Every unit span the sample chooses leaves with ``ragpulse.eval.status``, whatever the load.

A unit is evaluated (its scores), still under evaluation when it has to go (``pending``), or
refused by the pipeline: then ``skipped``, with ``ragpulse.eval.error.type`` saying why
(``queue_full``, ``throttled``, ``over_budget``, ``shutdown``). Only a unit the sample rate
leaves out goes on as it is. Spans go through the real SDK into an in-memory exporter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import errors, semconv
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.processor.span_processor import MAX_ENDED_UNREAD, EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler

WAIT = 60.0  # upper bound of every wait: a hang fails the test, slowness does not
UNIT = "support-bot"


@ragpulse.rag(name=UNIT)
def handle(question: str) -> str:
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."


Build = Callable[..., tuple[EvaluatingSpanProcessor, InMemorySpanExporter]]


@pytest.fixture
def pipeline(route_spans: Any) -> Build:
    def build(**options: Any) -> tuple[EvaluatingSpanProcessor, InMemorySpanExporter]:
        memory = InMemorySpanExporter()
        options.setdefault("sampler", EvalSampler(rate=1.0))
        options.setdefault("meter_provider", MeterProvider(metric_readers=[InMemoryMetricReader()]))
        processor = EvaluatingSpanProcessor(SimpleSpanProcessor(memory), **options)
        route_spans(processor)
        return processor, memory

    return build


def outcome(span: ReadableSpan) -> tuple[Any, Any]:
    attributes = span.attributes or {}
    return attributes.get(semconv.EVAL_STATUS), attributes.get(semconv.EVAL_ERROR_TYPE)


def units(memory: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in memory.get_finished_spans() if s.name == UNIT]


def test_a_unit_ending_after_shutdown_goes_out_skipped_shutdown(pipeline: Build) -> None:
    processor, memory = pipeline()
    processor.retire()  # as configure()'s shutdown does: downstream still exports
    handle("When is support open?")
    assert [outcome(u) for u in units(memory)] == [(EvalStatus.SKIPPED, errors.SHUTDOWN)]


def test_a_unit_the_rate_leaves_out_ending_after_shutdown_goes_out_unchanged(
    pipeline: Build,
) -> None:
    processor, memory = pipeline(sampler=EvalSampler(rate=0.0))
    processor.retire()
    handle("When is support open?")
    assert [outcome(u) for u in units(memory)] == [(None, None)]


def test_a_unit_the_throttle_leaves_out_goes_out_skipped_throttled(pipeline: Build) -> None:
    sampler = EvalSampler(rate=1.0)
    sampler.set_throttle(0.01)  # the judge sustained a hundredth of the sample
    processor, memory = pipeline(sampler=sampler)
    for n in range(20):
        handle(f"question {n}")
    assert processor.force_flush(int(WAIT * 1000))
    kept = sum(sampler.should_evaluate(u.context.trace_id).evaluate for u in units(memory))
    outcomes = [outcome(u) for u in units(memory)]
    assert outcomes.count((EvalStatus.SKIPPED, errors.THROTTLED)) == 20 - kept
    assert all(status is not None for status, _ in outcomes)


def test_a_unit_over_the_evaluations_budget_goes_out_skipped_over_budget(pipeline: Build) -> None:
    processor, memory = pipeline(sampler=EvalSampler(rate=1.0, max_evaluations_per_minute=1))
    handle("first")
    handle("second")
    assert processor.force_flush(int(WAIT * 1000))
    assert sorted(outcome(u) for u in units(memory)) == [
        (EvalStatus.OK, None),
        (EvalStatus.SKIPPED, errors.OVER_BUDGET),
    ]


class HeldHook:
    """An ``on_evaluation`` hook that keeps the worker thread until the test lets it go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        self.entered.set()
        self.release.wait(WAIT)


def test_units_ending_while_the_worker_thread_is_far_behind_go_out_skipped_queue_full(
    pipeline: Build,
) -> None:
    hook = HeldHook()
    processor, memory = pipeline(on_evaluation=hook)
    try:
        handle("first")
        assert hook.entered.wait(WAIT), "the first evaluation never came back"
        # The worker thread reads no ended span now: past the bound they go on at once.
        over = 10
        for n in range(MAX_ENDED_UNREAD + over):
            handle(f"question {n}")
        gone = [outcome(u) for u in units(memory)]
        assert gone == [(EvalStatus.OK, None)] + [(EvalStatus.SKIPPED, errors.QUEUE_FULL)] * over
    finally:
        hook.release.set()
    processor.force_flush(int(WAIT * 1000))
    every = units(memory)
    assert len(every) == MAX_ENDED_UNREAD + over + 1
    assert all(outcome(u)[0] is not None for u in every)
