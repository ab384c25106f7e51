"""Request latency of a decorated RAG app with every request evaluated by a 1 s judge.

The app is the demo's kind of support bot: ``@rag`` around a BM25 ``@retrieval``
over the demo corpus and an extractive ``@generation`` (``--model-ms`` adds a
simulated model call, default 0: the harshest case, where ragpulse's own work is
the largest share of the request). Two pipelines behind the same global
TracerProvider, both ending in a ``BatchSpanProcessor`` with a counting
exporter (no network):

- off: the ``BatchSpanProcessor`` alone;
- on:  ``EvaluatingSpanProcessor`` in front of it, sample rate 1.0, and a judge
  that waits 1 s (``asyncio.sleep``) and then runs ``LexicalJudge``, the way an
  LLM judge waits for its server and then parses and verifies the reply.

Requests are paced at ``--rate`` per second from one thread. Rounds alternate
off/on in one process so machine noise hits both alike; each "on" round is
drained (all evaluations finished and exported) outside the timed region. The
figures are the per-request wall times of the app's call.

The saturated case (``--saturated-requests``, 0 skips it) has no pacing: the
app's threads (``--app-threads``) call it back to back, every request sampled
for the offline ``LexicalJudge``, which is CPU-bound. It compares the wall time
per request of three pipelines in alternating rounds: evaluation off; the judge
in its own process (ragpulse's default for a judge declaring ``cpu_bound``);
and the judge on the worker thread of the app's process (``isolate_cpu_bound
=False``), where it competes with the app for the GIL. The target is the
process mode within 1.5x of evaluation off.

The lean case (``--lean-rounds``, 0 skips it) measures what one evaluation costs
the application's process: requests paced at ``--lean-rate`` (100/s), every one
sampled for the offline ``LexicalJudge`` in its own process (the default for a
CPU-bound judge), against the same app with evaluation off, in alternating rounds.
It reports the app process's CPU per evaluation (process CPU, which leaves out the
judge's child processes, of an "on" round minus that of an "off" round, each
through its drain, over the evaluations made; and the evaluation worker thread's
own CPU) and p50/p99 latency on/off. Targets: at most 0.3 ms of app CPU per
evaluation, p99 within 1.3x of evaluation off.

    python bench/pipeline_latency.py [--rate 200] [--requests 400] [--rounds 4] [--model-ms 0,20]
        [--saturated-requests 1500] [--saturated-rounds 10] [--app-threads 2]
        [--lean-rate 100] [--lean-requests 600] [--lean-rounds 4] [--request-rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.context import Context as OtelContext
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from rich.console import Console
from rich.table import Table

import ragpulse
from ragpulse import semconv
from ragpulse.demo.generator import split_sentences
from ragpulse.demo.questions import QUESTIONS
from ragpulse.demo.retriever import Bm25Retriever, tokenize
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.judges import Judge
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging import ResilientJudge
from ragpulse.settings.options import BoundsOptions, JudgeOptions

TARGET_RATIO = 1.05
SATURATED_TARGET_RATIO = 1.5
LEAN_TARGET_CPU_MS = 0.3
LEAN_TARGET_P99_RATIO = 1.3
REQUEST_TARGET_CPU_RATIO = 1.05
REQUEST_TARGET_P99_RATIO = 1.2


# --- where spans go --------------------------------------------------------------------------


class CountingExporter(SpanExporter):
    """Counts exported spans (and evaluated units) and drops them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans = 0
        self.evaluated = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = sum((s.attributes or {}).get(semconv.EVAL_STATUS) == EvalStatus.OK for s in spans)
        with self._lock:
            self.spans += len(spans)
            self.evaluated += ok
        return SpanExportResult.SUCCESS


class Router(SpanProcessor):
    """The global provider's one processor; each round installs its pipeline here."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: OtelContext | None = None) -> None:
        if self.target is not None:
            self.target.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.target is not None:
            self.target.on_end(span)


ROUTER = Router()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(ROUTER)
trace.set_tracer_provider(PROVIDER)


# --- the judge: 1 s of waiting, then real work ----------------------------------------------------


class OneSecondJudge:
    """Waits ``delay`` seconds, as for an LLM's reply, then judges like ``LexicalJudge``."""

    name = "one-second"
    annotator_kind = "LLM"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._inner = LexicalJudge()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        await asyncio.sleep(self.delay)
        return await self._inner.evaluate(record, metrics)


# --- the app ---------------------------------------------------------------------------------

RETRIEVER = Bm25Retriever()
MODEL_SECONDS = 0.0


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": p.document.id, "content": p.text} for p in RETRIEVER.search(query, k=3)]


@ragpulse.generation(model="extractive")
def write(question: str, passages: list[dict[str, str]]) -> str:
    if MODEL_SECONDS:
        time.sleep(MODEL_SECONDS)
    words = set(tokenize(question))
    sentences = [s for p in passages for s in split_sentences(p["content"])]
    return max(sentences, key=lambda s: len(words & set(tokenize(s))), default="I don't know.")


@ragpulse.rag(name="support-bot")
def answer(question: str) -> str:
    return write(question, search(question))


PASSAGE_CHARS = 500


@ragpulse.retrieval
def fetch_five(query: str) -> list[dict[str, str]]:
    passages = []
    for p in RETRIEVER.search(query, k=5):
        text = p.text
        while len(text) < PASSAGE_CHARS:
            text = f"{text} {p.text}"
        passages.append({"id": p.document.id, "content": text[:PASSAGE_CHARS]})
    return passages


@ragpulse.rag(name="five-passages")
def answer_five(question: str) -> str:
    return write(question, fetch_five(question))


# --- measuring ---------------------------------------------------------------------------------


def run_round(count: int, rate: float, offset: int) -> list[float]:
    """Call the app ``count`` times at ``rate`` per second; the latency of each call in ms."""
    latencies: list[float] = []
    interval = 1.0 / rate
    start = time.perf_counter()
    for n in range(count):
        due = start + n * interval
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        question = QUESTIONS[(offset + n) % len(QUESTIONS)].text
        began = time.perf_counter()
        answer(question)
        latencies.append((time.perf_counter() - began) * 1000.0)
    return latencies


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


@dataclass
class Outcome:
    """One scenario's latencies by mode, and how many requests were evaluated."""

    model_ms: float
    rate: float
    latencies: dict[str, list[float]]
    round_medians: dict[str, list[float]]
    evaluated: int
    expected: int
    held_peak: int

    def p(self, mode: str, q: float) -> float:
        return percentile(self.latencies[mode], q)

    def ratio(self, q: float) -> float:
        return self.p("on", q) / self.p("off", q)


def run_scenario(args: argparse.Namespace, model_ms: float) -> Outcome:
    """Alternate off/on rounds of the app with a ``model_ms`` model call."""
    global MODEL_SECONDS
    MODEL_SECONDS = model_ms / 1000.0
    # One thread sends the requests: keep the pace below what it can sustain.
    rate = min(args.rate, 0.8 / MODEL_SECONDS) if MODEL_SECONDS else args.rate
    outcome = Outcome(model_ms, rate, {"off": [], "on": []}, {"off": [], "on": []}, 0, 0, 0)
    for number in range(args.rounds):
        for mode in ("off", "on") if number % 2 == 0 else ("on", "off"):
            exporter = CountingExporter()
            downstream = BatchSpanProcessor(exporter, max_queue_size=100_000)
            processor: SpanProcessor = downstream
            evaluating: ragpulse.EvaluatingSpanProcessor | None = None
            if mode == "on":
                # Enough concurrency and room that every request is evaluated at this rate.
                in_flight = int(rate * args.judge_seconds * 2) + 16
                evaluating = ragpulse.EvaluatingSpanProcessor(
                    downstream,
                    judge=OneSecondJudge(args.judge_seconds),
                    sampler=ragpulse.EvalSampler(rate=1.0),
                    judging=JudgeOptions(concurrency=in_flight),
                    bounds=BoundsOptions(
                        max_queue_size=in_flight * 4,
                        max_held_spans=in_flight * 4,
                        hold_timeout=args.judge_seconds * 30,
                    ),
                )
                processor = evaluating
            ROUTER.target = processor
            done = run_round(args.requests, rate, number * args.requests)
            if evaluating is not None:
                outcome.held_peak = max(outcome.held_peak, evaluating.held_spans)
            ROUTER.target = None
            # Drain outside the timed region: evaluations finish, spans are exported.
            processor.force_flush(int(args.judge_seconds * 30_000))
            processor.shutdown()
            outcome.latencies[mode].extend(done)
            outcome.round_medians[mode].append(statistics.median(done))
            if mode == "on":
                outcome.evaluated += exporter.evaluated
                outcome.expected += args.requests
    return outcome


# --- the saturated app -----------------------------------------------------------------------

SATURATED_MODES = ("off", "process", "thread")


@dataclass
class SaturatedOutcome:
    """Per-request wall (ms) of each saturated round by mode, and evaluations made."""

    walls: dict[str, list[float]]
    evaluated: dict[str, int]
    requests: int

    def ratio(self, mode: str) -> float:
        """The mode's median wall over the rounds against that of evaluation off.

        Medians of many short alternating rounds: on a shared machine one round can be
        several times slower than the next for reasons of its own.
        """
        return statistics.median(self.walls[mode]) / statistics.median(self.walls["off"])


def saturated_judge(mode: str) -> Judge:
    if mode == "process":
        return LexicalJudge()  # cpu_bound: the worker's judge runs it in a child process
    return ResilientJudge(LexicalJudge(), isolate_cpu_bound=False)


def run_saturated_round(requests: int, threads: int, offset: int) -> float:
    """``requests`` calls of the app, back to back from ``threads`` threads; wall in seconds."""
    per_thread = requests // threads

    def calls(index: int) -> None:
        for n in range(per_thread):
            answer(QUESTIONS[(offset + index * per_thread + n) % len(QUESTIONS)].text)

    workers = [threading.Thread(target=calls, args=(i,)) for i in range(threads)]
    began = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - began


def run_saturated(args: argparse.Namespace) -> SaturatedOutcome:
    """Alternate the three modes for ``args.rounds`` rounds of a saturated app."""
    global MODEL_SECONDS
    MODEL_SECONDS = 0.0
    requests = args.saturated_requests - args.saturated_requests % args.app_threads
    outcome = SaturatedOutcome(
        {m: [] for m in SATURATED_MODES}, dict.fromkeys(SATURATED_MODES, 0), requests
    )
    for number in range(args.saturated_rounds):
        order = SATURATED_MODES if number % 2 == 0 else tuple(reversed(SATURATED_MODES))
        for mode in order:
            exporter = CountingExporter()
            downstream = BatchSpanProcessor(exporter, max_queue_size=100_000)
            processor: SpanProcessor = downstream
            if mode != "off":
                processor = ragpulse.EvaluatingSpanProcessor(
                    downstream,
                    judge=saturated_judge(mode),
                    sampler=ragpulse.EvalSampler(rate=1.0),
                    bounds=BoundsOptions(
                        max_queue_size=1000, max_held_spans=4096, hold_timeout=120.0
                    ),
                )
                # Start the judge's processes outside the timed region, as a server would
                # have done long before its busy minute: a short burst of the same load.
                ROUTER.target = processor
                run_saturated_round(min(requests, 400), args.app_threads, 0)
                processor.force_flush(60_000)
            ROUTER.target = processor
            wall = run_saturated_round(requests, args.app_threads, number * requests)
            ROUTER.target = None
            processor.force_flush(120_000)
            processor.shutdown()
            outcome.walls[mode].append(wall / requests * 1000.0)
            outcome.evaluated[mode] += exporter.evaluated
    return outcome


# --- the lean case: what one evaluation costs the app's process ------------------------------


@dataclass
class LeanOutcome:
    """Latencies, CPU and evaluations of the lean case's rounds, by mode."""

    latencies: dict[str, list[float]]
    cpu_ms: dict[str, list[float]]
    worker_cpu_ms: list[float]
    evaluated: list[int]
    requests: int

    def ratio(self, q: float) -> float:
        return percentile(self.latencies["on"], q) / percentile(self.latencies["off"], q)

    @property
    def cpu_per_evaluation(self) -> float:
        """App-process CPU (ms) an evaluation adds: on minus off, paired round by round."""
        added = sum(on - off for on, off in zip(self.cpu_ms["on"], self.cpu_ms["off"], strict=True))
        return added / max(1, sum(self.evaluated))

    @property
    def worker_cpu_per_evaluation(self) -> float:
        return sum(self.worker_cpu_ms) / max(1, sum(self.evaluated))


def worker_thread_cpu_ms() -> float:
    """CPU (ms) of the evaluation worker's thread so far; 0 when there is none."""
    for thread in threading.enumerate():
        if thread.name == "ragpulse-eval-worker" and thread.ident is not None:
            clock = time.pthread_getcpuclockid(thread.ident)
            return time.clock_gettime(clock) * 1000.0
    return 0.0


def run_lean(args: argparse.Namespace) -> LeanOutcome:
    """Alternate off/on rounds at ``args.lean_rate``, every request evaluated in a process."""
    global MODEL_SECONDS
    MODEL_SECONDS = 0.0
    outcome = LeanOutcome({"off": [], "on": []}, {"off": [], "on": []}, [], [], args.lean_requests)
    for number in range(args.lean_rounds):
        for mode in ("off", "on") if number % 2 == 0 else ("on", "off"):
            exporter = CountingExporter()
            downstream = BatchSpanProcessor(exporter, max_queue_size=100_000)
            processor: SpanProcessor = downstream
            if mode == "on":
                processor = ragpulse.EvaluatingSpanProcessor(
                    downstream,
                    judge=LexicalJudge(),
                    sampler=ragpulse.EvalSampler(rate=1.0),
                    bounds=BoundsOptions(hold_timeout=120.0),
                )
                # The judge's processes start outside the timed region, as a server's
                # would long before: a short burst of the same load.
                ROUTER.target = processor
                run_round(50, args.lean_rate, 0)
                processor.force_flush(120_000)
                exporter.evaluated = 0
            ROUTER.target = processor
            worker_before = worker_thread_cpu_ms()
            cpu_before = time.process_time()
            done = run_round(args.lean_requests, args.lean_rate, number * args.lean_requests)
            processor.force_flush(120_000)  # the evaluations' own work counts, drained too
            cpu = (time.process_time() - cpu_before) * 1000.0
            worker = worker_thread_cpu_ms() - worker_before
            ROUTER.target = None
            processor.shutdown()
            outcome.latencies[mode].extend(done)
            outcome.cpu_ms[mode].append(cpu)
            if mode == "on":
                outcome.worker_cpu_ms.append(worker)
                outcome.evaluated.append(exporter.evaluated)
    return outcome


@dataclass
class RequestOutcome:
    """Per-request calling-thread CPU and wall time (ms) by mode, and evaluations made."""

    cpu: dict[str, list[float]]
    wall: dict[str, list[float]]
    evaluated: int
    expected: int

    def cpu_ratio(self) -> float:
        return statistics.median(self.cpu["on"]) / statistics.median(self.cpu["off"])

    def wall_ratio(self, q: float) -> float:
        return percentile(self.wall["on"], q) / percentile(self.wall["off"], q)


def run_request_round(count: int, rate: float, offset: int) -> tuple[list[float], list[float]]:
    """``answer_five`` ``count`` times at ``rate``/s: each call's thread CPU and wall (ms)."""
    cpu: list[float] = []
    wall: list[float] = []
    interval = 1.0 / rate
    start = time.perf_counter()
    for n in range(count):
        wait = start + n * interval - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        question = QUESTIONS[(offset + n) % len(QUESTIONS)].text
        cpu_began = time.thread_time()
        began = time.perf_counter()
        answer_five(question)
        wall.append((time.perf_counter() - began) * 1000.0)
        cpu.append((time.thread_time() - cpu_began) * 1000.0)
    return cpu, wall


def run_requests(args: argparse.Namespace) -> RequestOutcome:
    """Alternate off/on rounds of the five-passage request at ``args.lean_rate``."""
    global MODEL_SECONDS
    MODEL_SECONDS = 0.0
    outcome = RequestOutcome({"off": [], "on": []}, {"off": [], "on": []}, 0, 0)
    for number in range(args.request_rounds):
        for mode in ("off", "on") if number % 2 == 0 else ("on", "off"):
            exporter = CountingExporter()
            downstream = BatchSpanProcessor(exporter, max_queue_size=100_000)
            processor: SpanProcessor = downstream
            if mode == "on":
                processor = ragpulse.EvaluatingSpanProcessor(
                    downstream,
                    judge=LexicalJudge(),
                    sampler=ragpulse.EvalSampler(rate=1.0),
                    bounds=BoundsOptions(hold_timeout=120.0),
                )
                ROUTER.target = processor
                run_request_round(50, args.lean_rate, 0)  # the judge's processes start
                processor.force_flush(120_000)
                exporter.evaluated = 0
            ROUTER.target = processor
            cpu, wall = run_request_round(
                args.lean_requests, args.lean_rate, number * args.lean_requests
            )
            processor.force_flush(120_000)
            ROUTER.target = None
            processor.shutdown()
            outcome.cpu[mode].extend(cpu)
            outcome.wall[mode].extend(wall)
            if mode == "on":
                outcome.evaluated += exporter.evaluated
                outcome.expected += args.lean_requests
    return outcome


def print_requests(console: Console, outcome: RequestOutcome, rate: float) -> None:
    table = Table(
        title=f"request: three spans, five {PASSAGE_CHARS}-character passages, {rate:g}/s, "
        "every one evaluated by LexicalJudge in its own process; the calling thread (ms)"
    )
    for column in ("evaluation", "requests", "CPU p50", "CPU p90", "wall p50", "wall p99"):
        table.add_column(column, justify="left" if column == "evaluation" else "right")
    for mode in ("off", "on"):
        table.add_row(
            mode,
            str(len(outcome.cpu[mode])),
            f"{percentile(outcome.cpu[mode], 0.5):.3f}",
            f"{percentile(outcome.cpu[mode], 0.9):.3f}",
            f"{percentile(outcome.wall[mode], 0.5):.3f}",
            f"{percentile(outcome.wall[mode], 0.99):.3f}",
        )
    console.print(table)
    console.print(
        f"calling-thread CPU on/off x{outcome.cpu_ratio():.3f} at the median (target <= "
        f"x{REQUEST_TARGET_CPU_RATIO}); p99 latency x{outcome.wall_ratio(0.99):.3f} (target <= "
        f"x{REQUEST_TARGET_P99_RATIO}); {outcome.evaluated} of {outcome.expected} evaluated\n"
    )


def print_lean(console: Console, outcome: LeanOutcome, rate: float) -> None:
    table = Table(
        title=f"lean: {outcome.requests} requests per round at {rate:g}/s, every one evaluated "
        "by LexicalJudge in its own process; app-process CPU and latency"
    )
    for column in ("evaluation", "requests", "p50 ms", "p99 ms", "CPU ms per round"):
        table.add_column(column, justify="left" if column == "evaluation" else "right")
    for mode in ("off", "on"):
        values = outcome.latencies[mode]
        table.add_row(
            mode,
            str(len(values)),
            f"{percentile(values, 0.5):.3f}",
            f"{percentile(values, 0.99):.3f}",
            " ".join(f"{c:.0f}" for c in outcome.cpu_ms[mode]),
        )
    console.print(table)
    console.print(
        f"app CPU per evaluation {outcome.cpu_per_evaluation:.3f} ms (target <= "
        f"{LEAN_TARGET_CPU_MS}), of which the worker thread {outcome.worker_cpu_per_evaluation:.3f}"
        f" ms; p50 x{outcome.ratio(0.5):.3f}, p99 x{outcome.ratio(0.99):.3f} of evaluation off "
        f"(target <= x{LEAN_TARGET_P99_RATIO}); {sum(outcome.evaluated)} of "
        f"{outcome.requests * len(outcome.evaluated)} requests evaluated\n"
    )


def print_saturated(console: Console, outcome: SaturatedOutcome, threads: int) -> None:
    table = Table(
        title=f"saturated app: {outcome.requests} requests back to back from {threads} "
        "threads, every one sampled for LexicalJudge; wall per request (ms)"
    )
    for column in ("judge runs", "round walls", "median", "x off", "evaluated"):
        table.add_column(column, justify="left" if column == "judge runs" else "right")
    labels = {
        "off": "evaluation off",
        "process": "in its own process",
        "thread": "on the worker thread",
    }
    for mode in SATURATED_MODES:
        walls = outcome.walls[mode]
        table.add_row(
            labels[mode],
            " ".join(f"{w:.3f}" for w in walls),
            f"{statistics.median(walls):.3f}",
            "1" if mode == "off" else f"{outcome.ratio(mode):.3f}",
            "-" if mode == "off" else str(outcome.evaluated[mode]),
        )
    console.print(table)
    console.print(
        f"judge in its own process: x{outcome.ratio('process'):.3f} of evaluation off "
        f"(target <= x{SATURATED_TARGET_RATIO}); on the worker thread: "
        f"x{outcome.ratio('thread'):.3f}\n"
    )


def print_outcome(console: Console, outcome: Outcome) -> None:
    table = Table(
        title=f"request latency (ms), model call {outcome.model_ms:g} ms, "
        f"{outcome.rate:g} requests/s, all rounds pooled"
    )
    for column in ("evaluation", "requests", "p50", "p90", "p99", "mean", "round medians"):
        table.add_column(column, justify="left" if column == "evaluation" else "right")
    for mode in ("off", "on"):
        values = outcome.latencies[mode]
        table.add_row(
            mode,
            str(len(values)),
            f"{outcome.p(mode, 0.5):.3f}",
            f"{outcome.p(mode, 0.9):.3f}",
            f"{outcome.p(mode, 0.99):.3f}",
            f"{statistics.fmean(values):.3f}",
            " ".join(f"{m:.3f}" for m in outcome.round_medians[mode]),
        )
    console.print(table)
    console.print(
        f"on/off: p50 x{outcome.ratio(0.5):.3f}, p99 x{outcome.ratio(0.99):.3f} "
        f"(target <= x{TARGET_RATIO}); {outcome.evaluated} of {outcome.expected} requests "
        f"evaluated and exported with scores; up to {outcome.held_peak} spans held at once\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--requests", type=int, default=400, help="requests per round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each mode")
    parser.add_argument(
        "--saturated-rounds", type=int, default=10, help="rounds of each saturated mode"
    )
    parser.add_argument("--judge-seconds", type=float, default=1.0)
    parser.add_argument(
        "--model-ms",
        default="0,20",
        help="simulated model call per request, in ms; a comma-separated list runs each",
    )
    parser.add_argument(
        "--saturated-requests",
        type=int,
        default=1500,
        help="requests per round of the saturated case (0: skip it)",
    )
    parser.add_argument("--app-threads", type=int, default=2, help="app threads when saturated")
    parser.add_argument("--lean-rate", type=float, default=100.0, help="requests/s, lean case")
    parser.add_argument("--lean-requests", type=int, default=600, help="requests per lean round")
    parser.add_argument(
        "--lean-rounds", type=int, default=4, help="rounds of each lean mode (0: skip it)"
    )
    parser.add_argument(
        "--request-rounds",
        type=int,
        default=6,
        help="rounds of each mode of the five-passage request case (0: skip it)",
    )
    args = parser.parse_args()
    models = [float(v) for v in args.model_ms.split(",") if v.strip()]

    console = Console(width=120)
    console.print(
        f"[bold]pipeline latency[/]: {args.rounds} rounds x {args.requests} requests per mode, "
        f"judge {args.judge_seconds:g} s, sample rate 1.0; spans go to a counting "
        "in-process exporter (no network)\n"
    )
    run_round(200, args.rate * 5, 0)  # warm up imports, caches and the retriever
    run_request_round(200, args.rate * 5, 0)

    requests = run_requests(args) if args.request_rounds > 0 else None
    if requests is not None:
        print_requests(console, requests, args.lean_rate)

    lean = run_lean(args) if args.lean_rounds > 0 else None
    if lean is not None:
        print_lean(console, lean, args.lean_rate)
    outcomes = [run_scenario(args, model_ms) for model_ms in models]
    for outcome in outcomes:
        print_outcome(console, outcome)
    saturated = run_saturated(args) if args.saturated_requests > 0 else None
    if saturated is not None:
        print_saturated(console, saturated, args.app_threads)

    fields = []
    within = True
    for outcome in outcomes:
        key = f"model{outcome.model_ms:g}ms"
        within = within and max(outcome.ratio(0.5), outcome.ratio(0.99)) <= TARGET_RATIO
        fields += [
            f"{key}_p50_off_ms={outcome.p('off', 0.5):.4f}",
            f"{key}_p50_on_ms={outcome.p('on', 0.5):.4f}",
            f"{key}_p50_ratio={outcome.ratio(0.5):.4f}",
            f"{key}_p99_off_ms={outcome.p('off', 0.99):.4f}",
            f"{key}_p99_on_ms={outcome.p('on', 0.99):.4f}",
            f"{key}_p99_ratio={outcome.ratio(0.99):.4f}",
            f"{key}_evaluated={outcome.evaluated}",
            f"{key}_expected={outcome.expected}",
        ]
    if saturated is not None:
        process_ratio = saturated.ratio("process")
        fields += [
            f"saturated_off_ms={statistics.median(saturated.walls['off']):.4f}",
            f"saturated_process_ms={statistics.median(saturated.walls['process']):.4f}",
            f"saturated_thread_ms={statistics.median(saturated.walls['thread']):.4f}",
            f"saturated_process_ratio={process_ratio:.4f}",
            f"saturated_thread_ratio={saturated.ratio('thread'):.4f}",
            f"saturated_process_evaluated={saturated.evaluated['process']}",
            f"saturated_thread_evaluated={saturated.evaluated['thread']}",
            f"saturated_target_ratio={SATURATED_TARGET_RATIO}",
            f"saturated_within_target={str(process_ratio <= SATURATED_TARGET_RATIO).lower()}",
        ]
    if lean is not None:
        lean_within = (
            lean.cpu_per_evaluation <= LEAN_TARGET_CPU_MS
            and lean.ratio(0.99) <= LEAN_TARGET_P99_RATIO
        )
        fields += [
            f"lean_rate={args.lean_rate:g}",
            f"lean_app_cpu_ms_per_eval={lean.cpu_per_evaluation:.4f}",
            f"lean_worker_cpu_ms_per_eval={lean.worker_cpu_per_evaluation:.4f}",
            f"lean_p50_ratio={lean.ratio(0.5):.4f}",
            f"lean_p99_ratio={lean.ratio(0.99):.4f}",
            f"lean_p99_off_ms={percentile(lean.latencies['off'], 0.99):.4f}",
            f"lean_p99_on_ms={percentile(lean.latencies['on'], 0.99):.4f}",
            f"lean_evaluated={sum(lean.evaluated)}",
            f"lean_target_cpu_ms={LEAN_TARGET_CPU_MS}",
            f"lean_target_p99_ratio={LEAN_TARGET_P99_RATIO}",
            f"lean_within_target={str(lean_within).lower()}",
        ]
    if requests is not None:
        request_within = (
            requests.cpu_ratio() <= REQUEST_TARGET_CPU_RATIO
            and requests.wall_ratio(0.99) <= REQUEST_TARGET_P99_RATIO
        )
        fields += [
            f"request_cpu_p50_off_ms={percentile(requests.cpu['off'], 0.5):.4f}",
            f"request_cpu_p50_on_ms={percentile(requests.cpu['on'], 0.5):.4f}",
            f"request_cpu_ratio={requests.cpu_ratio():.4f}",
            f"request_p99_off_ms={percentile(requests.wall['off'], 0.99):.4f}",
            f"request_p99_on_ms={percentile(requests.wall['on'], 0.99):.4f}",
            f"request_p99_ratio={requests.wall_ratio(0.99):.4f}",
            f"request_evaluated={requests.evaluated}",
            f"request_expected={requests.expected}",
            f"request_within_target={str(request_within).lower()}",
        ]
    fields += [
        f"judge_s={args.judge_seconds:g}",
        f"target_ratio={TARGET_RATIO}",
        f"within_target={str(within).lower()}",
    ]
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
