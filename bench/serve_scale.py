"""Evaluations per second at 1, 2 and 3 ``ragpulse serve`` replicas behind a trace-id router,
with an I/O-bound judge of fixed latency, and the proof that each trace is evaluated once.

The router (``tests/servers/otlp_router.py``) routes by trace id with the Collector
``loadbalancing`` exporter's hash ring; the replicas forward to a counting OTLP sink that keeps
every (trace id, span id) it receives. The judge waits ``--latency`` seconds and then scores
like the lexical judge (``tests/servers/fixed_latency_judge.py``); each replica runs
``--concurrency`` evaluations at once, so one replica's ceiling is concurrency / latency.
Every trace is sampled (rate 1.0). A round ends when the sink has every span; its rate is
evaluations over the time from the first request to the last scored span.

    python bench/serve_scale.py [--traces 600] [--latency 0.1] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.servers.otlp_load import CountingSink, Sender, make_requests  # noqa: E402
from tests.servers.otlp_router import OtlpRouter  # noqa: E402
from tests.servers.serve_process import ServeProcess  # noqa: E402

JUDGE = "tests.servers.fixed_latency_judge:FixedLatencyJudge"
SPANS_PER_TRACE = 4
TRACES_PER_REQUEST = 10


def _round(replicas: int, args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    bodies = make_requests(args.traces // TRACES_PER_REQUEST, TRACES_PER_REQUEST, seed=replicas)
    traces = len(bodies) * TRACES_PER_REQUEST
    with CountingSink(keep_ids=True) as sink:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url,
            "RAGPULSE_TEST_JUDGE_LATENCY": str(args.latency),
        }
        processes = [
            ServeProcess(
                workdir,
                "--judge",
                JUDGE,
                "--sample-rate",
                "1",
                "--concurrency",
                str(args.concurrency),
                "--max-queue-size",
                str(args.traces),
                "--hold-timeout",
                "600",
                "--log-level",
                "error",
                name=f"r{replicas}-{i}",
                env=env,
            ).start()
            for i in range(replicas)
        ]
        try:
            with OtlpRouter([f"127.0.0.1:{p.http_port}" for p in processes]) as router:
                started = time.perf_counter()
                Sender(router.url, bodies, threads=2).run()
                if not sink.wait_for(traces * SPANS_PER_TRACE, timeout=traces * args.latency * 2):
                    raise RuntimeError(f"{sink.spans} of {traces * SPANS_PER_TRACE} spans arrived")
                elapsed = time.perf_counter() - started
                share = [router.delivered[f"127.0.0.1:{p.http_port}"] for p in processes]
        finally:
            for process in processes:
                process.stop()
        duplicates = sum(count - 1 for count in sink.copies.values() if count > 1)
        twice = sum(1 for count in sink.evaluations.values() if count > 1)
        return {
            "replicas": replicas,
            "evals_per_s": len(sink.evaluations) / elapsed,
            "evaluated_traces": len(sink.evaluations),
            "traces": traces,
            "spans_lost": traces * SPANS_PER_TRACE - len(sink.copies),
            "spans_duplicated": duplicates,
            "traces_evaluated_twice": twice,
            "busiest_share": max(share) / sum(share),
            "seconds": elapsed,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=600)
    parser.add_argument("--latency", type=float, default=0.1, help="judge latency, seconds")
    parser.add_argument("--concurrency", type=int, default=4, help="evaluations per replica")
    args = parser.parse_args()

    rounds = []
    with tempfile.TemporaryDirectory() as workdir:
        for replicas in (1, 2, 3):
            rounds.append(_round(replicas, args, Path(workdir)))

    table = Table(
        title=f"evaluations/s behind the trace-id router, judge {args.latency * 1000:.0f} ms, "
        f"{args.concurrency} per replica"
    )
    for column in ("replicas", "evals/s", "vs 1", "evaluated", "lost", "dup", "twice", "busiest"):
        table.add_column(column, justify="right")
    base = rounds[0]["evals_per_s"]
    for r in rounds:
        table.add_row(
            f"{r['replicas']:.0f}",
            f"{r['evals_per_s']:.1f}",
            f"{r['evals_per_s'] / base:.2f}",
            f"{r['evaluated_traces']:.0f}/{r['traces']:.0f}",
            f"{r['spans_lost']:.0f}",
            f"{r['spans_duplicated']:.0f}",
            f"{r['traces_evaluated_twice']:.0f}",
            f"{r['busiest_share']:.2f}",
        )
    Console().print(table)
    exactly_once = all(
        r["spans_lost"] == 0
        and r["spans_duplicated"] == 0
        and r["traces_evaluated_twice"] == 0
        and r["evaluated_traces"] == r["traces"]
        for r in rounds
    )
    print(
        "RESULT "
        + " ".join(f"evals_per_s_{r['replicas']:.0f}={r['evals_per_s']:.1f}" for r in rounds)
        + f" speedup_2={rounds[1]['evals_per_s'] / base:.2f}"
        + f" speedup_3={rounds[2]['evals_per_s'] / base:.2f}"
        + f" exactly_once={int(exactly_once)}"
    )


if __name__ == "__main__":
    main()
