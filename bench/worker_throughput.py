"""EvalWorker under sustained load, and what sampling costs the request thread.

Phase 1 (sustained): a producer thread offers records at ``--rate`` per second for
``--duration`` seconds, each through ``EvalSampler.should_evaluate`` and
``EvalWorker.submit``, while the judge completes at most ``--judge-rate``
evaluations per second (``--concurrency`` slots, each evaluation sleeping
``concurrency / judge_rate`` seconds). The queue fills and stays full, so most
records are dropped; the counters must account for every one of them:
offered = submitted + dropped, and after the drain completed = submitted.
Memory is traced with ``tracemalloc`` once a second; "flat" compares the traced
size at the end of the first quarter of the run (queue already full) with the
size at the end, and fits a slope to the samples after that quarter.

Phase 2 (bytes): thirty distinct answers of ``--big-mb`` MB are offered to a worker
whose judge is busy, the way a burst of huge answers arrives; the queue's byte bound
(64 MiB by default) must keep what the worker holds near that bound, and the
refused records and bytes are counted.

Phase 3 (cost on the request thread, no tracemalloc): ``should_evaluate`` per
call against OpenTelemetry's own ``TraceIdRatioBased.should_sample`` measured in
the same run (the ratio travels between machines), and ``submit`` per call on
its accepting and its dropping path.

Usage: python bench/worker_throughput.py [--duration 10] [--rate 2000] [--judge-rate 10]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable, Collection

from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from ragpulse import semconv
from ragpulse.evaluation.types import (
    GROUNDEDNESS,
    Context,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
)
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import BoundsOptions, JudgeOptions
from ragpulse.worker import EvalWorker


class PacedJudge:
    """A judge whose throughput is fixed: each evaluation takes ``latency`` seconds."""

    name = "paced"
    annotator_kind = "LLM"

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        await asyncio.sleep(self.latency)
        return Evaluation(
            status=EvalStatus.OK,
            metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, 0.9)},
            judge=self.name,
            annotator_kind="LLM",
        )


class InstantJudge(PacedJudge):
    """Answers at once (for measuring submit's accepting path)."""

    def __init__(self) -> None:
        super().__init__(0.0)


def _record(n: int) -> RagRecord:
    # A realistic size: a question, three retrieved passages, an answer.
    passage = "The kettle's warranty lasts two years from the date of purchase. " * 6
    return RagRecord(
        question=f"How long is the warranty? ({n})",
        contexts=tuple(Context(passage, id=f"doc-{i}") for i in range(3)),
        answer="The warranty lasts two years from the date of purchase.",
        name="support",
    )


class Counter:
    """Counts callbacks (thread-safe enough: only the worker thread calls it)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        self.count += 1


def sustained(args: argparse.Namespace) -> dict[str, float]:
    latency = args.concurrency / args.judge_rate
    worker = EvalWorker(
        PacedJudge(latency),
        bounds=BoundsOptions(max_queue_size=args.queue),
        judging=JudgeOptions(concurrency=args.concurrency),
    )
    sampler = EvalSampler(args.sample_rate)
    done = Counter()
    rng = random.Random(1)
    records = [_record(n) for n in range(256)]
    offered = submitted = dropped = not_sampled = 0
    memory: list[tuple[float, int]] = []

    tracemalloc.start()
    start = time.perf_counter()
    next_sample = start
    batch = max(1, int(args.rate / 200))  # pace in 5 ms steps
    n = 0
    while True:
        now = time.perf_counter()
        if now - start >= args.duration:
            break
        target = int((now - start) * args.rate) + batch
        while n < target:
            offered += 1
            decision = sampler.should_evaluate(rng.getrandbits(128), name="support")
            if not decision.evaluate:
                not_sampled += 1
            elif worker.submit(records[n % len(records)], done):
                submitted += 1
            else:
                dropped += 1
            n += 1
        if now >= next_sample:
            memory.append((now - start, tracemalloc.get_traced_memory()[0]))
            next_sample += 1.0
        time.sleep(0.005)
    elapsed = time.perf_counter() - start
    memory.append((elapsed, tracemalloc.get_traced_memory()[0]))
    completed_during_run = done.count
    stats_at_end = worker.stats
    drain_start = time.perf_counter()
    flushed = worker.flush(timeout=args.queue / args.judge_rate * 2 + 30)
    drain = time.perf_counter() - drain_start
    worker.shutdown(timeout=5)
    tracemalloc.stop()

    quarter = [m for t, m in memory if t <= elapsed / 4] or [memory[0][1]]
    mem_start = quarter[-1]
    mem_end = memory[-1][1]
    # Slope after the queue filled: set and deque tables resize now and then (a few KiB
    # back and forth), so a trend over all samples says more than two end points.
    steady = [(t, m) for t, m in memory if t > elapsed / 4]
    slope = (
        statistics.linear_regression([t for t, _ in steady], [m for _, m in steady]).slope
        if len(steady) >= 2
        else 0.0
    )
    stats = worker.stats
    return {
        "duration_s": elapsed,
        "offered": offered,
        "offered_per_s": offered / elapsed,
        "not_sampled": not_sampled,
        "submitted": submitted,
        "dropped": dropped,
        "worker_dropped": stats_at_end.dropped,
        "completed": stats.completed,
        "callbacks": done.count,
        "lost": submitted - done.count,
        "flushed": float(flushed),
        "judge_per_s": completed_during_run / elapsed,
        "drain_s": drain,
        "mem_start_kib": mem_start / 1024,
        "mem_end_kib": mem_end / 1024,
        "mem_peak_kib": max(m for _, m in memory) / 1024,
        "mem_growth_ratio": mem_end / mem_start if mem_start else float("nan"),
        "mem_growth_kib": (mem_end - mem_start) / 1024,
        "mem_slope_kib_per_min": slope * 60 / 1024,
    }


def bytes_bound(big_mb: int) -> dict[str, float]:
    """Offer thirty huge answers to a busy worker; what it holds, accepts and refuses."""
    blocked = threading.Event()

    class Busy(PacedJudge):
        async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
            while not blocked.is_set():
                await asyncio.sleep(0.01)
            return await super().evaluate(record, metrics)

    # The judge-input bound is lifted: records that size would otherwise be skipped as
    # too_large at once; here the byte bound alone must hold them.
    worker = EvalWorker(
        Busy(0.0), judging=JudgeOptions(concurrency=1), bounds=BoundsOptions(max_input_chars=10**10)
    )
    done = Counter()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    accepted = 0
    for n in range(30):
        # A fresh string each time, dropped by the caller after submit, as a request's is.
        answer = chr(ord("a") + n % 26) * (big_mb * 1_000_000)
        accepted += worker.submit(RagRecord("q", (Context("c"),), answer), done)
        del answer
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    stats = worker.stats
    queue_bytes = worker.queue_bytes
    blocked.set()
    worker.shutdown(timeout=30)
    return {
        "offered_mib": 30 * big_mb * 1_000_000 / 2**20,
        "accepted": accepted,
        "refused": stats.dropped,
        "refused_mib": stats.dropped_bytes / 2**20,
        "queue_mib": queue_bytes / 2**20,
        "held_mib": held / 2**20,
    }


def _ns_per_call(fn: Callable[[], object], calls: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best


def request_thread_cost(calls: int) -> dict[str, float]:
    rng = random.Random(2)
    ids = [rng.getrandbits(128) for _ in range(1024)]
    otel = TraceIdRatioBased(0.2)
    plain = EvalSampler(0.2)
    budgeted = EvalSampler(0.2, max_evaluations_per_minute=10**9)
    ruled = EvalSampler(0.2, always_evaluate=["billing.*", "/v1/refunds/*"])
    attrs = {semconv.HTTP_ROUTE: "/v1/support/{id}", semconv.RAG_NAME: "support"}

    def cycle(fn: Callable[[int], object]) -> Callable[[], object]:
        state = {"i": 0}

        def call() -> object:
            state["i"] = (state["i"] + 1) & 1023
            return fn(ids[state["i"]])

        return call

    out = {
        "otel_should_sample_ns": _ns_per_call(
            cycle(lambda t: otel.should_sample(None, t, "support")), calls
        ),
        "should_evaluate_ns": _ns_per_call(cycle(lambda t: plain.should_evaluate(t)), calls),
        "should_evaluate_budget_ns": _ns_per_call(
            cycle(lambda t: budgeted.should_evaluate(t)), calls
        ),
        "should_evaluate_rules_ns": _ns_per_call(
            cycle(lambda t: ruled.should_evaluate(t, name="support", attributes=attrs)), calls
        ),
    }

    record = _record(0)
    fast = EvalWorker(
        InstantJudge(),
        bounds=BoundsOptions(max_queue_size=10**6),
        judging=JudgeOptions(concurrency=64),
    )
    sink = Counter()
    accept = [0] * 20_000
    for i in range(len(accept)):
        t0 = time.perf_counter_ns()
        fast.submit(record, sink)
        accept[i] = time.perf_counter_ns() - t0
    fast.flush(timeout=60)
    fast.shutdown(timeout=5)

    blocked = threading.Event()

    class Stuck(PacedJudge):
        async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
            while not blocked.is_set():
                await asyncio.sleep(0.01)
            return await super().evaluate(record, metrics)

    full = EvalWorker(
        Stuck(0.0), bounds=BoundsOptions(max_queue_size=10), judging=JudgeOptions(concurrency=1)
    )
    for _ in range(11):
        full.submit(record, sink)
    drop = [0] * 20_000
    for i in range(len(drop)):
        t0 = time.perf_counter_ns()
        full.submit(record, sink)
        drop[i] = time.perf_counter_ns() - t0
    blocked.set()
    full.shutdown(timeout=5)

    def pct(values: list[int], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] / 1000

    out.update(
        submit_accept_p50_us=pct(accept, 50),
        submit_accept_p99_us=pct(accept, 99),
        submit_drop_p50_us=pct(drop, 50),
        submit_drop_p99_us=pct(drop, 99),
    )
    out["should_evaluate_vs_otel"] = out["should_evaluate_ns"] / out["otel_should_sample_ns"]
    out["should_evaluate_budget_vs_otel"] = (
        out["should_evaluate_budget_ns"] / out["otel_should_sample_ns"]
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load")
    parser.add_argument("--rate", type=float, default=2000.0, help="records offered per second")
    parser.add_argument("--judge-rate", type=float, default=10.0, help="evaluations per second")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--queue", type=int, default=100, help="worker max_queue_size")
    parser.add_argument("--sample-rate", type=float, default=1.0)
    parser.add_argument("--calls", type=int, default=200_000, help="calls per cost round")
    parser.add_argument("--big-mb", type=int, default=20, help="size of each huge answer (MB)")
    args = parser.parse_args()

    load = sustained(args)
    print(
        f"\nSustained load: {args.rate:g}/s offered for {args.duration:g}s, "
        f"judge at {args.judge_rate:g}/s, queue {args.queue}"
    )
    print(f"{'measure':<28}{'value':>14}")
    for key in (
        "offered_per_s",
        "offered",
        "not_sampled",
        "submitted",
        "dropped",
        "worker_dropped",
        "callbacks",
        "lost",
        "judge_per_s",
        "drain_s",
        "mem_start_kib",
        "mem_end_kib",
        "mem_peak_kib",
        "mem_growth_ratio",
        "mem_growth_kib",
        "mem_slope_kib_per_min",
    ):
        print(f"{key:<28}{load[key]:>14.2f}")
    accounted = load["offered"] == load["not_sampled"] + load["submitted"] + load["dropped"]
    print(f"{'every record accounted for':<28}{accounted!s:>14}")

    held = bytes_bound(args.big_mb)
    print(f"\nA burst of 30 answers of {args.big_mb} MB to a busy worker (64 MiB byte bound)")
    print(f"{'measure':<28}{'value':>14}")
    for key in ("offered_mib", "accepted", "refused", "refused_mib", "queue_mib", "held_mib"):
        print(f"{key:<28}{held[key]:>14.2f}")

    cost = request_thread_cost(args.calls)
    print("\nCost on the request thread (best of 5 rounds)")
    print(f"{'measure':<32}{'value':>12}")
    for key, value in cost.items():
        print(f"{key:<32}{value:>12.3f}")

    result = {
        "offered": int(load["offered"]),
        "submitted": int(load["submitted"]),
        "dropped": int(load["dropped"]),
        "completed": int(load["callbacks"]),
        "lost": int(load["lost"]),
        "accounted": int(accounted),
        "judge_per_s": round(load["judge_per_s"], 2),
        "mem_growth_ratio": round(load["mem_growth_ratio"], 3),
        "mem_end_kib": round(load["mem_end_kib"], 1),
        "mem_slope_kib_per_min": round(load["mem_slope_kib_per_min"], 2),
        "burst_accepted": int(held["accepted"]),
        "burst_refused": int(held["refused"]),
        "burst_held_mib": round(held["held_mib"], 1),
        "burst_offered_mib": round(held["offered_mib"], 1),
        "should_evaluate_ns": round(cost["should_evaluate_ns"], 1),
        "should_evaluate_vs_otel": round(cost["should_evaluate_vs_otel"], 3),
        "should_evaluate_budget_vs_otel": round(cost["should_evaluate_budget_vs_otel"], 3),
        "submit_accept_p99_us": round(cost["submit_accept_p99_us"], 2),
        "submit_drop_p99_us": round(cost["submit_drop_p99_us"], 2),
    }
    print("\nRESULT " + " ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
