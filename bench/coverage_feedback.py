"""A judge slower than the traffic: how the coverage feedback spreads the sample over time.

Sends requests at a steady pace (``--pace`` seconds apart) for ``--seconds`` through an
``EvaluatingSpanProcessor`` whose judge (``tests/servers/fixed_latency_judge.py``) takes
``--latency`` seconds, one at a time behind a queue of two, at sample rate 1. Prints, every
two seconds, the effective rate, the ``ragpulse.evaluator.coverage`` value and the decisions;
then the ``queue_full`` drops of the first two seconds (before and while the feedback acts)
against those a second afterwards, and the evaluations a second against what the judge can do.

Usage: PYTHONPATH=src:. python bench/coverage_feedback.py [--seconds 20] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import time

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.servers.fixed_latency_judge import FixedLatencyJudge

import ragpulse
from ragpulse import errors, semconv
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import BoundsOptions, JudgeOptions


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return ["Support is open from 9am to 5pm on weekdays."]


@ragpulse.rag(name="support-bot")
def handle(question: str) -> str:
    search(question)
    return "Support is open from 9am to 5pm on weekdays."


def decisions(reader: InMemoryMetricReader) -> dict[str, int]:
    found: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == semconv.METRIC_DECISIONS:
                    for point in metric.data.data_points:
                        reason = str((point.attributes or {})[semconv.ATTR_DECISION_REASON])
                        found[reason] = int(point.value)  # type: ignore[union-attr]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--pace", type=float, default=0.004)
    args = parser.parse_args()

    reader = InMemoryMetricReader()
    sampler = EvalSampler(1.0)
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()),
        judge=FixedLatencyJudge(latency=args.latency),
        sampler=sampler,
        meter_provider=MeterProvider(metric_readers=[reader]),
        judging=JudgeOptions(concurrency=1),
        bounds=BoundsOptions(max_queue_size=2),
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)

    start = time.monotonic()
    report_at = start + 2.0
    early_drops = 0
    sent = 0
    while (now := time.monotonic()) - start < args.seconds:
        handle(f"when is support open? ({sent})")
        sent += 1
        if now >= report_at:
            report_at += 2.0
            counts = decisions(reader)
            if early_drops == 0:
                early_drops = counts.get(errors.REASON_QUEUE_FULL, 0)
            print(
                f"t={now - start:5.1f}s effective_rate={sampler.effective_rate:.3f} "
                f"coverage={processor.coverage.value() or 0.0:.3f} decisions={counts}"
            )
        time.sleep(args.pace)
    elapsed = time.monotonic() - start
    counts = decisions(reader)
    provider.shutdown()
    later = (counts.get(errors.REASON_QUEUE_FULL, 0) - early_drops) / max(elapsed - 2.0, 1e-9)
    evaluated = counts.get(errors.REASON_EVALUATED, 0)
    print(
        f"RESULT sent={sent} queue_full_first_2s={early_drops} "
        f"queue_full_per_second_after={later:.2f} "
        f"judge_use={evaluated / elapsed * args.latency:.2f} "
        f"effective_rate={sampler.effective_rate:.3f}"
    )


if __name__ == "__main__":
    main()
