"""App request latency with evaluation in ``ragpulse serve`` against evaluation off.

The app is a decorated support bot (``@rag`` around a BM25 ``@retrieval`` over the demo
corpus and an extractive ``@generation``) exporting its spans over OTLP/HTTP through a
``BatchSpanProcessor``, as a capture-only app does. Modes, alternating in rounds in one run:

- off: the app exports to a counting OTLP sink; nothing is evaluated;
- serve: the app exports to ``ragpulse serve`` (offline judge, every request evaluated), which
  forwards the scored spans to the same sink; the app's code and pipeline are those of "off";
- in_process (reference): the app evaluates itself (``EvaluatingSpanProcessor``, offline
  judge, every request) in front of the same exporter.

The app runs on core 0, ``ragpulse serve`` on core 1 (``taskset``). Requests are paced at
``--rate`` per second from one thread; the figures are the per-request wall times of the
app's call; the target (serve/off at p50 and p99 <= 1.05) is read on the median over rounds
of each round's ratio, beside the pooled figures.

    python bench/serve_latency.py [--rate 200] [--requests 400] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context as OtelContext
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.servers.serve_process import free_port  # noqa: E402

import ragpulse  # noqa: E402
from ragpulse.demo.generator import split_sentences  # noqa: E402
from ragpulse.demo.questions import QUESTIONS  # noqa: E402
from ragpulse.demo.retriever import Bm25Retriever, tokenize  # noqa: E402
from ragpulse.processor.span_processor import EvaluatingSpanProcessor  # noqa: E402
from ragpulse.sampling.sampler import EvalSampler  # noqa: E402

TARGET_RATIO = 1.05
APP_CORE, SERVE_CORE = 0, "1"
MODES = ("off", "serve", "in_process")


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
RETRIEVER = Bm25Retriever()


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": p.document.id, "content": p.text} for p in RETRIEVER.search(query, k=3)]


@ragpulse.generation(model="extractive")
def write(question: str, passages: list[dict[str, str]]) -> str:
    words = set(tokenize(question))
    sentences = [s for p in passages for s in split_sentences(p["content"])]
    return max(sentences, key=lambda s: len(words & set(tokenize(s))), default="I don't know.")


@ragpulse.rag(name="support-bot")
def answer(question: str) -> str:
    return write(question, search(question))


def run_round(count: int, rate: float, offset: int) -> list[float]:
    """Call the app ``count`` times at ``rate`` per second; each call's latency in ms."""
    latencies: list[float] = []
    interval = 1.0 / rate
    start = time.perf_counter()
    for n in range(count):
        wait = start + n * interval - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        question = QUESTIONS[(offset + n) % len(QUESTIONS)].text
        began = time.perf_counter()
        answer(question)
        latencies.append((time.perf_counter() - began) * 1000.0)
    return latencies


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def sink_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/stats", timeout=5) as response:
        stats: dict[str, Any] = json.loads(response.read())
    return stats


def start_sink() -> tuple[subprocess.Popen[bytes], str]:
    """The counting OTLP sink in its own process on the serve core, off the app's GIL."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    process = subprocess.Popen(
        ["taskset", "-c", SERVE_CORE, sys.executable, "-m", "tests.servers.otlp_load"],
        env=env,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().decode().strip()


def start_serve(sink_url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=sink_url)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    process = subprocess.Popen(
        [
            "taskset", "-c", SERVE_CORE, sys.executable, "-m", "ragpulse.cli", "serve",
            "--http", f"127.0.0.1:{port}", "--grpc", "off", "--judge", "lexical",
            "--sample-rate", "1", "--log-level", "error",
        ],
        env=env,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1):
                return process, url
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("ragpulse serve did not start") from None
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--requests", type=int, default=400, help="requests per round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {APP_CORE})

    latencies: dict[str, list[float]] = {mode: [] for mode in MODES}
    # Per round: (p50, p99) of each mode, so a burst of machine noise in one round does not
    # decide the figure (the rounds alternate the modes' order).
    per_round: list[dict[str, tuple[float, float]]] = []
    sink, sink_url = start_sink()
    serve, serve_url = start_serve(sink_url)
    try:
        run_round(50, args.rate, 0)  # warm-up: imports, BM25 caches
        for number in range(args.rounds):
            order = MODES if number % 2 == 0 else tuple(reversed(MODES))
            this_round: dict[str, tuple[float, float]] = {}
            per_round.append(this_round)
            for mode in order:
                endpoint = serve_url if mode == "serve" else sink_url
                downstream = BatchSpanProcessor(OTLPSpanExporter(f"{endpoint}/v1/traces"))
                pipeline: SpanProcessor = downstream
                if mode == "in_process":
                    pipeline = EvaluatingSpanProcessor(
                        downstream, sampler=EvalSampler(rate=1.0), adapters=False
                    )
                ROUTER.target = pipeline
                measured = run_round(args.requests, args.rate, number * 97)
                latencies[mode] += measured
                this_round[mode] = (percentile(measured, 0.5), percentile(measured, 0.99))
                ROUTER.target = None
                pipeline.shutdown()  # drained outside the timed region
        expected = args.rounds * args.requests * 2  # serve and in_process evaluate all
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            evaluated = int(sink_stats(sink_url)["statuses"].get("ok", 0))
            if evaluated >= expected:
                break
            time.sleep(0.2)
    finally:
        serve.terminate()
        serve.wait(timeout=60)
        sink.terminate()
        sink.wait(timeout=10)

    table = Table(
        title=f"app request latency (ms) at {args.rate:.0f} req/s, every request evaluated"
    )
    for column in ("mode", "p50", "p99", "p50 vs off", "p99 vs off"):
        table.add_column(column, justify="right")
    p = {mode: (percentile(v, 0.5), percentile(v, 0.99)) for mode, v in latencies.items()}
    for mode in MODES:
        table.add_row(
            mode,
            f"{p[mode][0]:.3f}",
            f"{p[mode][1]:.3f}",
            f"{p[mode][0] / p['off'][0]:.3f}",
            f"{p[mode][1] / p['off'][1]:.3f}",
        )
    Console().print(table)
    print(f"evaluated (status ok) across serve and in_process: {evaluated} of {expected}")
    serve_p50, serve_p99 = p["serve"][0] / p["off"][0], p["serve"][1] / p["off"][1]
    round_p50 = statistics.median(r["serve"][0] / r["off"][0] for r in per_round)
    round_p99 = statistics.median(r["serve"][1] / r["off"][1] for r in per_round)
    print(f"median over rounds of serve/off: p50 {round_p50:.3f}, p99 {round_p99:.3f}")
    print(
        "RESULT "
        f"serve_p50_ratio={serve_p50:.3f} serve_p99_ratio={serve_p99:.3f} "
        f"serve_round_median_p50_ratio={round_p50:.3f} "
        f"serve_round_median_p99_ratio={round_p99:.3f} "
        f"in_process_p50_ratio={p['in_process'][0] / p['off'][0]:.3f} "
        f"in_process_p99_ratio={p['in_process'][1] / p['off'][1]:.3f} "
        f"off_p50_ms={p['off'][0]:.3f} off_p99_ms={p['off'][1]:.3f} "
        f"evaluated={evaluated} expected={expected} "
        f"target_met={int(max(round_p50, round_p99) <= TARGET_RATIO)}"
    )


if __name__ == "__main__":
    main()
