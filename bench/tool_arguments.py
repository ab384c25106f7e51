"""What recording a ``@ragpulse.tool`` call's arguments costs per call.

The same decorated tool (two plain arguments) called in batches, with the arguments written
as they ship and with their writing switched off (the hook replaced by a no-op), the two in
short interleaved batch pairs (the order alternating), under an SDK tracer provider with no
exporter: the ratio isolates capture's own work. A second case passes an object, bytes and a
nested list, read by the bounded walk; two more pass what is read no further than can leave:
a 40 MB string and 100,000 keyword arguments (fewer calls each, ``--big-calls``). Each case's
peak RSS is read in a child process of its own (``resource.getrusage``), with the arguments
written and without.

    .venv/bin/python bench/tool_arguments.py [--pairs 40] [--calls 2000] [--big-calls 5]
"""

from __future__ import annotations

import argparse
import importlib
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import ragpulse

_tool = importlib.import_module("ragpulse.capture.tool")
_WRITE = _tool._ToolHooks._write_arguments
ANSWER = "The X200 comes with a 2-year limited warranty."


class Filters:
    def __repr__(self) -> str:
        return "Filters(product='X200')"


@ragpulse.tool
def search(query: str, limit: int = 5) -> str:
    return ANSWER


@ragpulse.tool
def lookup(filters: Any, raw: bytes, rows: list[Any]) -> str:
    return ANSWER


@ragpulse.tool
def by_name(**filters: Any) -> str:
    return ANSWER


HUGE = "x" * 40_000_000
MANY = {f"k{i}": i for i in range(100_000)}
CASES: dict[str, Callable[[], Any]] = {
    "plain": lambda: search("X200 warranty", limit=3),
    "objects": lambda: lookup(Filters(), b"caf\xc3\xa9", [[i, str(i)] for i in range(50)]),
    "huge": lambda: search(HUGE),
    "kwargs": lambda: by_name(**MANY),
}
BIG = ("huge", "kwargs")


def _off(self: Any, call: Any, attributes: Any, args: Any, kwargs: Any) -> None:
    return None


def _batch(call: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return time.perf_counter() - start


def _case(call: Callable[[], Any], pairs: int, calls: int) -> tuple[float, float, float, float]:
    """Median and quartiles of the per-pair ratio (with / without), and µs per call with."""
    ratios: list[float] = []
    with_times: list[float] = []
    for index in range(pairs):
        times: dict[bool, float] = {}
        for on in (True, False) if index % 2 else (False, True):
            _tool._ToolHooks._write_arguments = _WRITE if on else _off
            times[on] = _batch(call, calls)
        ratios.append(times[True] / times[False])
        with_times.append(times[True] / calls * 1e6)
    _tool._ToolHooks._write_arguments = _WRITE
    low, _, high = statistics.quantiles(ratios, n=4)
    return statistics.median(ratios), low, high, statistics.median(with_times)


def _peak_rss_mb(name: str, on: bool) -> float:
    """Peak RSS of a child process that makes one call of case ``name``."""
    code = (
        "import sys; sys.argv = ['bench']; import runpy; "
        f"bench = runpy.run_path({__file__!r}, run_name='bench'); "
        f"bench['_one']({name!r}, {on!r})"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return float(out.split()[-1])


def _one(name: str, on: bool) -> None:
    trace.set_tracer_provider(TracerProvider())
    _tool._ToolHooks._write_arguments = _WRITE if on else _off
    CASES[name]()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--big-calls", type=int, default=5)
    options = parser.parse_args()
    trace.set_tracer_provider(TracerProvider())
    print(f"{'arguments':<10} {'ratio':>7} {'IQR':>13} {'us/call':>10} {'peak MB on/off':>15}")
    results: dict[str, float] = {}
    for name, call in CASES.items():
        calls = options.big_calls if name in BIG else options.calls
        median, low, high, micros = _case(call, options.pairs, calls)
        results[name] = median
        rss = f"{_peak_rss_mb(name, True):.0f}/{_peak_rss_mb(name, False):.0f}"
        print(f"{name:<10} {median:>7.3f} {low:>6.3f}-{high:<6.3f} {micros:>10.1f} {rss:>15}")
    print(
        "RESULT "
        + " ".join(f"{name}_ratio={ratio:.3f}" for name, ratio in results.items())
        + f" pairs={options.pairs} calls={options.calls} big_calls={options.big_calls}"
    )


if __name__ == "__main__":
    main()
