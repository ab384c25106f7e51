"""A judge slower than the traffic: the coverage gauge falls below the sample rate and the
sampler's effective rate comes down to what the judge sustains.

The judge is ``tests/servers/fixed_latency_judge.py`` (it waits without holding the GIL),
one evaluation at a time behind a queue of two, so most sampled units are refused
``queue_full``. Spans go through the real SDK; the gauge is read by a real metric reader.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.servers.fixed_latency_judge import FixedLatencyJudge

import ragpulse
from ragpulse import semconv
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import BoundsOptions, JudgeOptions

DEADLINE = 120.0
RATE = 1.0


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return ["Support is open from 9am to 5pm on weekdays."]


@ragpulse.rag(name="support-bot")
def handle(question: str) -> str:
    search(question)
    return "Support is open from 9am to 5pm on weekdays."


def coverage_gauge(reader: InMemoryMetricReader) -> float | None:
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == semconv.METRIC_COVERAGE:
                    for point in metric.data.data_points:
                        return float(point.value)  # type: ignore[union-attr]
    return None


def test_saturated_judge_lowers_coverage_and_effective_rate(route_spans: Any) -> None:
    reader = InMemoryMetricReader()
    sampler = EvalSampler(RATE)
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()),
        judge=FixedLatencyJudge(latency=0.1),
        sampler=sampler,
        meter_provider=MeterProvider(metric_readers=[reader]),
        judging=JudgeOptions(concurrency=1),
        bounds=BoundsOptions(max_queue_size=2),
    )
    route_spans(processor)

    # Traffic at well over the judge's 10 evaluations a second, until both signals show
    # (checked every 50 requests) or the deadline passes.
    deadline = time.monotonic() + DEADLINE
    coverage = None
    sent = 0
    while time.monotonic() < deadline:
        handle(f"when is support open? ({sent})")
        sent += 1
        if sent % 50 == 0:
            coverage = coverage_gauge(reader)
            if coverage is not None and coverage < RATE and sampler.effective_rate < RATE:
                break
        time.sleep(0.002)

    assert coverage is not None and coverage < RATE
    assert sampler.effective_rate < RATE
    assert processor.coverage.main_reason() is not None
