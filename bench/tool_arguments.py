"""What recording a ``@ragpulse.tool`` call's arguments costs per call.

The same decorated tool (two plain arguments) called in batches, with the arguments written
as they ship and with their writing switched off (the hook replaced by a no-op), the two in
short interleaved batch pairs (the order alternating), under an SDK tracer provider with no
exporter: the ratio isolates capture's own work. A second case passes an object, bytes and a
nested list, read by the bounded walk.

    .venv/bin/python bench/tool_arguments.py [--pairs 40] [--calls 2000]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--calls", type=int, default=2000)
    options = parser.parse_args()
    trace.set_tracer_provider(TracerProvider())
    rows = [[i, str(i)] for i in range(50)]
    cases = {
        "plain": lambda: search("X200 warranty", limit=3),
        "objects": lambda: lookup(Filters(), b"caf\xc3\xa9", rows),
    }
    print(f"{'arguments':<10} {'ratio':>7} {'IQR':>13} {'us/call':>8}")
    results: dict[str, float] = {}
    for name, call in cases.items():
        median, low, high, micros = _case(call, options.pairs, options.calls)
        results[name] = median
        print(f"{name:<10} {median:>7.3f} {low:>6.3f}-{high:<6.3f} {micros:>8.1f}")
    print(
        f"RESULT plain_ratio={results['plain']:.3f} objects_ratio={results['objects']:.3f} "
        f"pairs={options.pairs} calls={options.calls}"
    )


if __name__ == "__main__":
    main()
