"""CPU per span of ``ragpulse serve`` side by side with rotel, in one run.

rotel (the Rust OTLP collector of the ``dev`` extra) and ``ragpulse serve`` each run as their
own process pinned to one core (``taskset``), receive the same OTLP/HTTP protobuf requests
(512 spans each) and forward them to a counting OTLP/HTTP sink (``tests/servers/otlp_load.py``)
in this process, on the other core. What is measured is the CPU time (user + system) the
receiving process and its children (serve's judge processes) spend per span delivered,
read from ``/proc`` before and after each round; wall time does not enter, so a busy machine
moves the figures little. Both forward without compression.

Traffic, two shapes of 128 traces of four spans per request, children before their root:

- RAG-shaped: an OpenInference root (the unit) with question and answer, a retriever with
  a document, an LLM span and a cache span (~180 bytes of text a span);
- small: the same four spans with one short attribute each (nothing to evaluate).

Configurations, rounds interleaved with rotel's (``--repeats`` times, the median kept):

- ``rate-0``: evaluation on, sample rate 0 (no trace sampled: every span forwarded as it came);
- ``rate-0.1``: the offline judge evaluates one trace in ten (its processes' CPU counted;
  ``rate-0.1-own`` is serve's own process alone, the judge processes left out: those run
  beside it, on other cores where there are any, while serve's process is one interpreter);
- ``no-evaluate``: serve as a plain relay.

    python bench/serve_vs_rotel.py [--requests 200] [--eval-requests 40] [--repeats 3]

Each rate-0.1 round also counts the evaluations its spans carry (``ragpulse.eval.status``: the
coverage throttle may make fewer than one in ten) and prints what one evaluation made costs:
(CPU per span at rate 0.1 - at rate 0, same shape and repeat) x spans / evaluations, and the
part of it spent in serve's own process. Ends with ``RESULT``: the ratios serve / rotel (CPU per
span, lower is better) and those costs per shape.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.servers.otlp_load import CountingSink, Sender, make_requests  # noqa: E402
from tests.servers.rotel_sink import _port_open, free_port, rotel_agent_path  # noqa: E402

TRACES_PER_REQUEST = 128
SPANS_PER_TRACE = 4
SPANS_PER_REQUEST = TRACES_PER_REQUEST * SPANS_PER_TRACE
TARGET_CORE = "1"
TICKS = os.sysconf("SC_CLK_TCK")
WAIT_S = 600.0


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU of ``pid`` alone, and of it and its live descendants, in seconds."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        child = int(entry.name)
        children.setdefault(int(fields[1]), []).append(child)
        times[child] = (int(fields[11]) + int(fields[12])) / TICKS
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        total += times.get(current, 0.0)
        stack.extend(children.get(current, []))
    return times.get(pid, 0.0), total


class Target:
    """One receiving process on ``TARGET_CORE``, forwarding to ``sink_url``."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], port: int) -> None:
        self.name = name
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            ["taskset", "-c", TARGET_CORE, *command],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not _port_open(port):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{name} did not start")
            time.sleep(0.05)

    def cpu(self) -> tuple[float, float]:
        """CPU seconds of the receiving process alone, and with its children."""
        return _cpu_seconds(self.process.pid)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def rotel(sink_url: str) -> Target:
    binary = rotel_agent_path()
    if binary is None:
        raise SystemExit("rotel-agent not found: pip install -e '.[dev]'")
    http, grpc = free_port(), free_port()
    command = [
        str(binary),
        "start",
        "--otlp-http-endpoint",
        f"127.0.0.1:{http}",
        "--otlp-grpc-endpoint",
        f"127.0.0.1:{grpc}",
        "--exporter",
        "otlp",
        "--otlp-exporter-endpoint",
        sink_url,
        "--otlp-exporter-protocol",
        "http",
        "--otlp-exporter-compression",
        "none",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTEL_")}
    return Target("rotel", command, env, http)


def serve(sink_url: str, *args: str) -> Target:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink_url
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    command = [sys.executable, "-m", "ragpulse.cli", "serve", "--http", f"127.0.0.1:{port}"]
    command += ["--grpc", "off", "--log-level", "error", *args]
    target = Target("serve", command, env, port)
    deadline = time.monotonic() + 60
    while True:  # /readyz: serve listens a moment before it is ready
        try:
            with urllib.request.urlopen(f"{target.url}/readyz", timeout=1):
                return target
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("ragpulse serve did not become ready") from None
            time.sleep(0.05)


def serving(options: tuple[str, ...]) -> Callable[[str], Target]:
    """``serve`` with ``options``, for ``cpu_per_span``."""
    return lambda url: serve(url, *options)


@dataclass
class Round:
    """One target's round: CPU per span delivered, and the evaluations its spans carry."""

    us_per_span: float
    own_us_per_span: float
    """The receiving process alone (serve's judge processes left out)."""
    spans: int
    evaluations: int
    """Spans delivered with a ``ragpulse.eval.status`` (the units evaluated, whatever their
    outcome): at rate 0.1 the coverage throttle may make fewer than one trace in ten."""


def cpu_per_span(make: Callable[[str], Target], bodies: list[bytes], warmup: list[bytes]) -> Round:
    """Microseconds of CPU per span delivered, after ``warmup`` went through."""
    with CountingSink() as sink:
        target = make(sink.url)
        try:
            Sender(target.url, warmup, threads=2).run()
            if not sink.wait_for(len(warmup) * SPANS_PER_REQUEST, timeout=WAIT_S):
                raise RuntimeError(f"{target.name}: warm-up spans did not all arrive")
            before_spans, before_cpu = sink.spans, target.cpu()
            before_evaluations = sum(sink.statuses.values())
            Sender(target.url, bodies, threads=2).run()
            expected = before_spans + len(bodies) * SPANS_PER_REQUEST
            if not sink.wait_for(expected, timeout=WAIT_S):
                raise RuntimeError(f"{target.name}: only {sink.spans - before_spans} spans arrived")
            # What is still running (a judge finishing, an exporter) is counted too.
            time.sleep(0.5)
            own_after, cpu_after = target.cpu()
            own, cpu = own_after - before_cpu[0], cpu_after - before_cpu[1]
            spans = sink.spans - before_spans
            evaluations = sum(sink.statuses.values()) - before_evaluations
            return Round(cpu / spans * 1e6, own / spans * 1e6, spans, evaluations)
        finally:
            target.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per pass-through round")
    parser.add_argument(
        "--eval-requests", type=int, default=40, help="requests per rate-0.1 round (judged)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="", help="run the configurations named (comma-separated)")
    args = parser.parse_args()
    console = Console()

    shapes = {
        "rag": lambda n, seed: make_requests(n, TRACES_PER_REQUEST, plain_spans=1, seed=seed),
        "small": lambda n, seed: make_requests(
            n, TRACES_PER_REQUEST, plain_spans=1, seed=seed, small=True
        ),
    }
    configs: dict[str, tuple[tuple[str, ...], int]] = {
        "rate-0": (("--sample-rate", "0"), args.requests),
        "rate-0.1": (("--sample-rate", "0.1"), args.eval_requests),
        "no-evaluate": (("--no-evaluate",), args.requests),
    }
    ratios: dict[str, list[float]] = {}
    figures: dict[str, list[float]] = {}
    for repeat in range(args.repeats):
        for shape, make_bodies in shapes.items():
            for config, (options, count) in configs.items():
                if args.only and config not in args.only.split(","):
                    continue
                seed = 1000 * repeat + count
                bodies = make_bodies(count, seed)
                # Enough to start every judge process: an interpreter's start is seconds of
                # CPU, paid once, which is not what a span costs in the steady state.
                warmup = make_bodies(count if "rate-0.1" in config else 10, seed + 1)
                rotel_us = cpu_per_span(rotel, bodies, warmup).us_per_span
                served = cpu_per_span(serving(options), bodies, warmup)
                serve_us = served.us_per_span
                key = f"{shape}_{config}"
                ratios.setdefault(key, []).append(serve_us / rotel_us)
                figures.setdefault(f"{key}_rotel_us", []).append(rotel_us)
                figures.setdefault(f"{key}_serve_us", []).append(serve_us)
                line = (
                    f"[{repeat + 1}/{args.repeats}] {key}: serve {serve_us:.2f} µs/span, "
                    f"rotel {rotel_us:.2f} µs/span, ratio {serve_us / rotel_us:.2f}"
                )
                relayed = figures.get(f"{shape}_rate-0_serve_us")
                if config == "rate-0.1":
                    own = served.own_us_per_span
                    ratios.setdefault(f"{shape}_rate-0.1-own", []).append(own / rotel_us)
                    figures.setdefault(f"{shape}_rate-0.1-own_serve_us", []).append(own)
                    figures.setdefault(f"{shape}_rate-0.1-own_rotel_us", []).append(rotel_us)
                    line += f" (serve's process alone {own:.2f}, ratio {own / rotel_us:.2f})"
                if config == "rate-0.1" and served.evaluations and relayed:
                    # What the evaluations made add, over the evaluations actually made:
                    # in serve's own process and in its judge processes.
                    per_eval = (serve_us - relayed[-1]) * served.spans / served.evaluations
                    own_eval = (own - relayed[-1]) * served.spans / served.evaluations
                    figures.setdefault(f"{shape}_eval_ms", []).append(per_eval / 1000.0)
                    figures.setdefault(f"{shape}_eval_own_ms", []).append(own_eval / 1000.0)
                    line += (
                        f"; {served.evaluations} evaluations in {served.spans} spans, "
                        f"{per_eval / 1000.0:.2f} ms of CPU each ({own_eval / 1000.0:.2f} in "
                        "serve's process)"
                    )
                console.print(line)

    table = Table(title="CPU per span delivered: ragpulse serve / rotel (median of repeats)")
    for column in ("traffic", "serve", "serve µs/span", "rotel µs/span", "ratio", "target"):
        table.add_column(column)
    targets = {"rate-0": 1.5, "rate-0.1": 5.0, "rate-0.1-own": None, "no-evaluate": None}
    result = []
    for key, values in ratios.items():
        shape, config = key.split("_", 1)
        ratio = statistics.median(values)
        target = targets[config]
        table.add_row(
            shape,
            config,
            f"{statistics.median(figures[key + '_serve_us']):.2f}",
            f"{statistics.median(figures[key + '_rotel_us']):.2f}",
            f"{ratio:.2f}",
            "-" if target is None else f"<= {target}",
        )
        name = key.replace("-", "_").replace(".", "")
        serve_us = statistics.median(figures[key + "_serve_us"])
        result += [f"{name}_ratio={ratio:.2f}", f"{name}_serve_us={serve_us:.2f}"]
    console.print(table)
    for shape in shapes:
        costs = figures.get(f"{shape}_eval_ms")
        if costs:
            median = statistics.median(costs)
            own = statistics.median(figures[f"{shape}_eval_own_ms"])
            console.print(
                f"{shape}: CPU per evaluation made (rate 0.1 - rate 0) {median:.2f} ms, "
                f"of which serve's own process {own:.2f} ms"
            )
            result += [f"{shape}_eval_cpu_ms={median:.2f}", f"{shape}_eval_own_cpu_ms={own:.2f}"]
    print("RESULT " + " ".join(result))


if __name__ == "__main__":
    main()
