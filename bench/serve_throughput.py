"""Spans per second through one ``ragpulse serve`` process pinned to one core, and its memory
under a 10x overload.

The sender and a counting OTLP/HTTP sink (``tests/servers/otlp_load.py``) run in this process
on the other core; ``ragpulse serve`` runs as its own process under ``taskset`` on one core,
receives OTLP/HTTP protobuf and forwards to the sink. Traffic is RAG-shaped traces (an
OpenInference root, a retriever, an LLM span and a plain span), 128 traces per request,
children before their root as SDK batch processors send them.

Rounds, in one run:

- direct: sender -> sink, no serve (the baseline: what the load tools themselves can do);
- pass-through: serve with evaluation off (``--no-evaluate``);
- evaluate: serve with the offline judge at sample rate 0.1 (every trace assembled, one in ten
  evaluated, every span converted to an SDK span and back);
- overload: evaluation off, the sink held to ``--sink-rate`` spans/s and the sender offering
  10x that, against a 16 MiB buffer: serve refuses with 429 + Retry-After, the sender retries
  every refusal, and serve's resident memory is sampled throughout.

    python bench/serve_throughput.py [--requests 300] [--sink-rate 4000] [--overload-s 4]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.servers.otlp_load import CountingSink, Sender, make_requests  # noqa: E402
from tests.servers.serve_process import free_port  # noqa: E402

TRACES_PER_REQUEST = 128
SPANS_PER_TRACE = 4
SERVE_CORE = "1"
TARGET_SPANS_PER_S = 10_000


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Serve:
    """``ragpulse serve`` on one core, forwarding to ``sink``."""

    def __init__(self, sink_url: str, *args: str) -> None:
        self.port = free_port()
        env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=sink_url)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
        command = [sys.executable, "-m", "ragpulse.cli", "serve"]
        command += ["--http", f"127.0.0.1:{self.port}", "--grpc", "off", "--log-level", "error"]
        self.process = subprocess.Popen(
            ["taskset", "-c", SERVE_CORE, *command, *args], env=env, stderr=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        import urllib.request

        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("ragpulse serve did not start") from None
                time.sleep(0.05)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)


def _round(sink: CountingSink, url: str, bodies: list[bytes]) -> float:
    """Spans/s from the first post until the sink has every span."""
    spans = len(bodies) * TRACES_PER_REQUEST * SPANS_PER_TRACE
    before = sink.spans
    started = time.perf_counter()
    Sender(url, bodies, threads=4).run()
    if not sink.wait_for(before + spans, timeout=300):
        raise RuntimeError(f"only {sink.spans - before} of {spans} spans arrived")
    return spans / (time.perf_counter() - started)


def _overload(bodies: list[bytes], sink_rate: float, seconds: float) -> dict[str, float]:
    with CountingSink(max_spans_per_s=sink_rate) as sink:
        serve = Serve(sink.url, "--no-evaluate", "--buffer-bytes", str(16 * 1024 * 1024))
        spans_per_request = TRACES_PER_REQUEST * SPANS_PER_TRACE
        offered_per_s = 10 * sink_rate
        threads = 8
        # Each thread posts one request every `interval` s: together 10x what the sink takes.
        interval = threads * spans_per_request / offered_per_s
        count = int(offered_per_s * seconds / spans_per_request)
        sender = Sender(serve.url, bodies[:count], threads=threads, interval=interval)
        samples: list[float] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                samples.append(_rss_mib(serve.process.pid))
                time.sleep(0.25)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.perf_counter()
        sending = threading.Thread(target=sender.run)
        sending.start()
        sending.join(timeout=seconds * 20)
        sink.wait_for(count * spans_per_request, timeout=seconds * 20)
        elapsed = time.perf_counter() - started
        done.set()
        sampler.join()
        serve.stop()
        quarter = max(1, len(samples) // 4)
        return {
            "offered_x": offered_per_s / sink_rate,
            "delivered": sink.spans,
            "sent": count * spans_per_request,
            "refused": sender.refused,
            "errors": sender.errors,
            "rss_first_quarter_mib": max(samples[:quarter]),
            "rss_max_mib": max(samples),
            "rss_last_quarter_mib": max(samples[-quarter:]),
            "seconds": elapsed,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per round")
    parser.add_argument("--sink-rate", type=float, default=4000.0)
    parser.add_argument("--overload-s", type=float, default=4.0)
    args = parser.parse_args()

    console = Console()
    bodies = make_requests(args.requests, TRACES_PER_REQUEST, plain_spans=1, seed=1)
    overload_bodies = make_requests(
        int(args.sink_rate * 10 * args.overload_s / (TRACES_PER_REQUEST * SPANS_PER_TRACE)) + 1,
        TRACES_PER_REQUEST,
        plain_spans=1,
        seed=2,
    )
    rates: dict[str, float] = {}
    statuses: dict[str, int] = {}
    with CountingSink() as sink:
        rates["direct"] = _round(sink, sink.url, bodies)
        serve = Serve(sink.url, "--no-evaluate")
        _round(sink, serve.url, bodies[:20])  # warm-up
        rates["pass_through"] = _round(sink, serve.url, bodies)
        serve.stop()
        sink.statuses.clear()
        serve = Serve(sink.url, "--judge", "lexical", "--sample-rate", "0.1")
        rates["evaluate_0_1"] = _round(sink, serve.url, bodies)
        serve.stop()
        statuses = dict(sink.statuses)
    overload = _overload(overload_bodies, args.sink_rate, args.overload_s)

    table = Table(title="ragpulse serve on one core: spans/s received and forwarded")
    table.add_column("round")
    table.add_column("spans/s", justify="right")
    table.add_column("vs direct", justify="right")
    for name, rate in rates.items():
        table.add_row(name, f"{rate:,.0f}", f"{rate / rates['direct']:.2f}")
    console.print(table)
    console.print(f"evaluate round, units by ragpulse.eval.status: {statuses}")
    memory = Table(
        title=f"overload: {overload['offered_x']:.0f}x the sink's {args.sink_rate:,.0f} spans/s"
    )
    for key in overload:
        memory.add_column(key, justify="right")
    memory.add_row(*(f"{value:,.1f}" for value in overload.values()))
    console.print(memory)

    growth = overload["rss_last_quarter_mib"] - overload["rss_first_quarter_mib"]
    print(
        "RESULT "
        f"pass_through_spans_per_s={rates['pass_through']:.0f} "
        f"evaluate_spans_per_s={rates['evaluate_0_1']:.0f} "
        f"direct_spans_per_s={rates['direct']:.0f} "
        f"pass_through_ratio={rates['pass_through'] / rates['direct']:.3f} "
        f"evaluate_ratio={rates['evaluate_0_1'] / rates['direct']:.3f} "
        f"target_met={int(rates['pass_through'] >= TARGET_SPANS_PER_S)} "
        f"evaluated={statuses.get('ok', 0)} skipped={statuses.get('skipped', 0)} "
        f"overload_x={overload['offered_x']:.0f} overload_refused={overload['refused']:.0f} "
        f"overload_lost={overload['sent'] - overload['delivered']:.0f} "
        f"rss_growth_mib={growth:.1f} rss_max_mib={overload['rss_max_mib']:.1f}"
    )


if __name__ == "__main__":
    main()
