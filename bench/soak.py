"""Soak: a decorated app at ~2,000 requests/s while the judge manages 10 evaluations/s.

Every request is sampled (rate 1.0); the judge sleeps 0.1 s per evaluation with a
concurrency of 1, so about 10 evaluations/s get done and the rest must be refused
by the pipeline's bounds (the worker's queue, the held-span bounds, the hold
timeout) and counted, without memory growing and without losing a span.

Spans go to an in-process exporter that counts them (not the network), so the
run stays CPU-bound on a small machine; carrier spans (late results) are counted
apart from the app's spans. Memory is sampled every few seconds. Phase 1 runs at
the full rate and samples RSS; phase 2 repeats the load under tracemalloc for its
current and peak Python allocations (tracemalloc slows every allocation, so that
phase reaches a lower rate, which is printed).

    python bench/soak.py [--seconds 30] [--traced-seconds 10] [--rate 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import threading
import time
import tracemalloc
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.context import Context as OtelContext
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from rich.console import Console
from rich.table import Table

import ragpulse
from ragpulse import errors, semconv
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.settings.options import BoundsOptions, JudgeOptions

CARRIER = "ragpulse.evaluation"
PASSAGES = [
    "Support is open from 9am to 5pm on weekdays.",
    "The Larkspur L2 router costs $129 and was released in March 2024.",
    "Returns are accepted within 30 days with the receipt.",
]


class CountingExporter(SpanExporter):
    """Counts what is exported, by kind, and keeps nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.app_spans = 0
        self.carriers = 0
        self.by_status: dict[str, int] = {}

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            for span in spans:
                if span.name == CARRIER:
                    self.carriers += 1
                    continue
                self.app_spans += 1
                status = (span.attributes or {}).get(semconv.EVAL_STATUS)
                if status is not None:
                    key = str(status)
                    self.by_status[key] = self.by_status.get(key, 0) + 1
        return SpanExportResult.SUCCESS


class Counted(SpanProcessor):
    """Counts every span the app ended, then hands it to the pipeline."""

    def __init__(self) -> None:
        self.inner: SpanProcessor | None = None
        self.ended = 0  # incremented on the one request thread only

    def on_start(self, span: Span, parent_context: OtelContext | None = None) -> None:
        if self.inner is not None:
            self.inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.inner is not None:
            self.inner.on_end(span)
            self.ended += 1


ROUTER = Counted()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(ROUTER)
trace.set_tracer_provider(PROVIDER)


class TenPerSecondJudge:
    """Sleeps ``delay`` seconds, then judges like ``LexicalJudge``: with concurrency 1,
    at most 1/delay evaluations per second."""

    name = "ten-per-second"
    annotator_kind = "LLM"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._inner = LexicalJudge()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        await asyncio.sleep(self.delay)
        return await self._inner.evaluate(record, metrics)


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return PASSAGES


@ragpulse.generation(model="extractive")
def write(question: str, passages: list[str]) -> str:
    return passages[0]


@ragpulse.rag(name="support-bot")
def answer(question: str) -> str:
    return write(question, search(question))


# --- memory --------------------------------------------------------------------------------------


def rss_mb() -> float:
    """Resident set size now (Linux ``/proc``), else the peak from ``getrusage``."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


@dataclass
class Sample:
    at: float
    requests: int
    rss_mb: float
    traced_mb: float
    traced_peak_mb: float
    held: int
    queued: int


def sample(started: float, requests: int, processor: ragpulse.EvaluatingSpanProcessor) -> Sample:
    current, peak = tracemalloc.get_traced_memory() if tracemalloc.is_tracing() else (0, 0)
    return Sample(
        time.perf_counter() - started,
        requests,
        rss_mb(),
        current / 1e6,
        peak / 1e6,
        processor.held_spans,
        processor.worker.queue_size,
    )


def counter_points(reader: InMemoryMetricReader, name: str, key: str) -> dict[str, int]:
    found: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    label = str((point.attributes or {}).get(key, "-"))
                    found[label] = found.get(label, 0) + int(point.value)  # type: ignore[union-attr]
    return found


# --- the run --------------------------------------------------------------------------------------


@dataclass
class Phase:
    """What one soak phase measured."""

    name: str
    traced: bool
    elapsed: float
    requests: int
    samples: list[Sample]
    decisions: dict[str, int]
    forced: dict[str, int]
    late: int
    completed: int
    carriers: int
    by_status: dict[str, int]
    ended: int
    exported: int

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed

    @property
    def lost(self) -> int:
        return self.ended - self.exported


def build(
    args: argparse.Namespace, judge_delay: float | None = None
) -> tuple[ragpulse.EvaluatingSpanProcessor, CountingExporter, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    exporter = CountingExporter()
    # The SDK's own queue bound is raised so that what this run measures is ragpulse.
    downstream = BatchSpanProcessor(exporter, max_queue_size=200_000, max_export_batch_size=2048)
    processor = ragpulse.EvaluatingSpanProcessor(
        downstream,
        judge=TenPerSecondJudge(args.judge_delay if judge_delay is None else judge_delay),
        sampler=ragpulse.EvalSampler(rate=1.0),
        meter_provider=MeterProvider(metric_readers=[reader]),
        judging=JudgeOptions(concurrency=1),
        bounds=BoundsOptions(max_queue_size=args.max_queue_size, hold_timeout=args.hold_timeout),
    )
    return processor, exporter, reader


def run_phase(name: str, args: argparse.Namespace, seconds: float, traced: bool) -> Phase:
    """Drive the app at ``args.rate`` for ``seconds`` through a fresh pipeline."""
    processor, exporter, reader = build(args)
    ROUTER.inner = processor
    ROUTER.ended = 0
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    samples = [sample(started, 0, processor)]
    interval = 1.0 / args.rate
    next_sample = args.sample_every
    requests = 0
    while True:
        now = time.perf_counter() - started
        if now >= seconds:
            break
        due = requests * interval
        if due > now:
            time.sleep(due - now)
        answer(f"When is support open? ({requests})")
        requests += 1
        if now >= next_sample:
            samples.append(sample(started, requests, processor))
            next_sample += args.sample_every
    elapsed = time.perf_counter() - started
    samples.append(sample(started, requests, processor))

    # Drain: a short flush, then shutdown forwards whatever is still held.
    processor.force_flush(2_000)
    processor.shutdown()
    ROUTER.inner = None
    if traced:
        tracemalloc.stop()
    return Phase(
        name=name,
        traced=traced,
        elapsed=elapsed,
        requests=requests,
        samples=samples,
        decisions=counter_points(reader, semconv.METRIC_DECISIONS, semconv.ATTR_DECISION_REASON),
        forced=counter_points(reader, semconv.METRIC_FORCED_EXPORTS, "reason"),
        late=sum(counter_points(reader, semconv.METRIC_LATE_RESULTS, "-").values()),
        completed=processor.worker.stats.completed,
        carriers=exporter.carriers,
        by_status=dict(exporter.by_status),
        ended=ROUTER.ended,
        exported=exporter.app_spans,
    )


def print_phase(console: Console, phase: Phase) -> None:
    table = Table(title=f"{phase.name}: memory and bounds over the run")
    columns = ["t (s)", "requests", "RSS MB", "held", "queued"]
    if phase.traced:
        columns[3:3] = ["traced MB", "traced peak MB"]
    for column in columns:
        table.add_column(column, justify="right")
    for s in phase.samples:
        row = [f"{s.at:.1f}", str(s.requests), f"{s.rss_mb:.1f}", str(s.held), str(s.queued)]
        if phase.traced:
            row[3:3] = [f"{s.traced_mb:.2f}", f"{s.traced_peak_mb:.2f}"]
        table.add_row(*row)
    console.print(table)

    counts = Table(title=f"{phase.name}: what happened")
    counts.add_column("count")
    counts.add_column("value", justify="right")
    rows: list[tuple[str, object]] = [
        ("requests", phase.requests),
        ("achieved requests/s", f"{phase.rate:.0f}"),
        *((f"decision: {reason}", n) for reason, n in sorted(phase.decisions.items())),
        ("evaluations completed", phase.completed),
        *((f"forwarded unevaluated: {reason}", n) for reason, n in sorted(phase.forced.items())),
        ("late results (carrier spans made)", phase.late),
        ("carrier spans exported", phase.carriers),
        *((f"units exported with status {k}", n) for k, n in sorted(phase.by_status.items())),
        ("app spans ended", phase.ended),
        ("app spans exported", phase.exported),
        ("app spans lost", phase.lost),
    ]
    for name, value in rows:
        counts.add_row(name, str(value))
    console.print(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=2000.0, help="requests per second")
    parser.add_argument("--judge-delay", type=float, default=0.1, help="seconds per evaluation")
    parser.add_argument("--hold-timeout", type=float, default=5.0)
    parser.add_argument("--max-queue-size", type=int, default=1000)
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds")
    parser.add_argument(
        "--traced-seconds",
        type=float,
        default=10.0,
        help="length of the second phase, under tracemalloc (0: skip it)",
    )
    args = parser.parse_args()
    console = Console(width=120)

    # Warm up code paths and caches through a throw-away pipeline.
    warm, _, _ = build(args, judge_delay=0.0)
    ROUTER.inner = warm
    for n in range(500):
        answer(f"warm-up {n}")
    ROUTER.inner = None
    warm.force_flush(1)
    warm.shutdown()

    console.print(
        f"[bold]soak[/]: {args.rate:g} requests/s (3 spans each) for {args.seconds:g} s, "
        f"sample rate 1.0, judge {1 / args.judge_delay:g} evaluations/s (concurrency 1), "
        f"hold_timeout {args.hold_timeout:g} s, worker queue {args.max_queue_size}.\n"
        "Spans go to an in-process counting exporter, not the network, to keep the run "
        "CPU-bound. Phase 1 samples RSS at full rate; phase 2 repeats the load under "
        "tracemalloc (which slows allocation: its achieved rate is printed)."
    )
    phases = [run_phase("phase 1 (RSS)", args, args.seconds, traced=False)]
    if args.traced_seconds > 0:
        phases.append(run_phase("phase 2 (tracemalloc)", args, args.traced_seconds, traced=True))
    for phase in phases:
        print_phase(console, phase)

    main_phase = phases[0]
    samples = main_phase.samples
    middle, end = samples[len(samples) // 2], samples[-1]
    fields = [
        f"seconds={main_phase.elapsed:.1f}",
        f"requests={main_phase.requests}",
        f"rate={main_phase.rate:.0f}",
        f"evaluated={main_phase.decisions.get(errors.REASON_EVALUATED, 0)}",
        f"completed={main_phase.completed}",
        f"queue_full={main_phase.decisions.get(errors.REASON_QUEUE_FULL, 0)}",
        f"over_budget={main_phase.decisions.get(errors.REASON_OVER_BUDGET, 0)}",
        f"hold_timeout_exports={main_phase.forced.get('hold_timeout', 0)}",
        f"max_held_exports={main_phase.forced.get('max_held', 0)}",
        f"carriers={main_phase.carriers}",
        f"ended={main_phase.ended}",
        f"exported={main_phase.exported}",
        f"lost={main_phase.lost}",
        f"rss_start_mb={samples[0].rss_mb:.1f}",
        f"rss_middle_mb={middle.rss_mb:.1f}",
        f"rss_end_mb={end.rss_mb:.1f}",
    ]
    if len(phases) > 1:
        traced = phases[1]
        t_middle = traced.samples[len(traced.samples) // 2]
        fields += [
            f"traced_rate={traced.rate:.0f}",
            f"traced_lost={traced.lost}",
            f"traced_middle_mb={t_middle.traced_mb:.2f}",
            f"traced_end_mb={traced.samples[-1].traced_mb:.2f}",
            f"traced_peak_mb={max(s.traced_peak_mb for s in traced.samples):.2f}",
        ]
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
