"""The worker's byte bound is visible: ``ragpulse.evaluator.queue.bytes`` while records wait."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Collection, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import semconv
from ragpulse.evaluation.types import EvalStatus, Evaluation, RagRecord
from ragpulse.settings.options import JudgeOptions

WAIT = 30.0
PASSAGE = "Support is open from 9am to 5pm on weekdays. " * 200


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return [PASSAGE]


@ragpulse.rag(name="support-bot")
def handle(question: str) -> str:
    search(question)
    return "Support is open from 9am to 5pm on weekdays."


class GatedJudge:
    """Holds every evaluation until the test opens the gate."""

    name = "gated"
    annotator_kind = "LLM"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        self.started.set()
        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        return Evaluation(status=EvalStatus.OK, metrics={}, judge=self.name)


@pytest.fixture
def gated(route_spans: Any) -> Iterator[GatedJudge]:
    judge = GatedJudge()
    yield judge
    judge.gate.set()  # before route_spans shuts the processor down


def gauge(reader: InMemoryMetricReader, name: str) -> float | None:
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for instrument in scope_metrics.metrics:
                if instrument.name == name:
                    (point,) = instrument.data.data_points
                    return float(point.value)  # type: ignore[union-attr]
    return None


def test_queue_bytes_gauge_shows_what_waiting_records_hold_and_falls_to_zero(
    route_spans: Any, gated: GatedJudge
) -> None:
    reader = InMemoryMetricReader()
    processor = ragpulse.EvaluatingSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()),
        judge=gated,
        sampler=ragpulse.EvalSampler(rate=1.0),
        meter_provider=MeterProvider(metric_readers=[reader]),
        judging=JudgeOptions(concurrency=1),
    )
    route_spans(processor)
    handle("first")
    assert gated.started.wait(WAIT)
    handle("second")
    # The second unit is queued once the worker thread has read it.
    deadline = time.monotonic() + WAIT
    while (waiting := gauge(reader, semconv.METRIC_QUEUE_BYTES) or 0.0) <= 2 * len(PASSAGE):
        assert time.monotonic() < deadline, f"the queue held {waiting} bytes"
        time.sleep(0.01)
    gated.gate.set()
    assert processor.force_flush(int(WAIT * 1000))
    assert gauge(reader, semconv.METRIC_QUEUE_BYTES) == 0
