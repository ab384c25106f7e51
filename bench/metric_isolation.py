"""What a user metric's own process costs per record, against calling it in this process.

A function metric of an importable module runs in a process of its own
(``ragpulse.judging.metric_boundary``), so a hang, ``os._exit`` or a print stays there. This
times the same trivial metric (the share of the answer's letters that are not capitals)
measured directly and through its boundary, interleaved in rounds, on records of three
sizes, and prints the median cost of each per record.

Usage: python bench/metric_isolation.py [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cases import custom_metrics  # noqa: E402  (an importable module, as a user's)

from ragpulse.evaluation.types import Context, RagRecord  # noqa: E402
from ragpulse.judging.metric_boundary import MetricBoundary, measure_safely  # noqa: E402
from ragpulse.metrics._registry import custom  # noqa: E402


def _record(size: int) -> RagRecord:
    passage = "Support is open from 9am to 5pm on weekdays. " * size
    return RagRecord("When is support open?", (Context(passage),), passage)


async def _per_record(measure: object, record: RagRecord, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        await measure(record)  # type: ignore[operator]
    return (time.perf_counter() - started) / count


async def _main(records: int, rounds: int) -> None:
    assert custom_metrics.shouting is not None  # registered by the import
    metric = custom("shouting")
    assert metric is not None
    boundary = MetricBoundary(metric)
    await boundary.measure(_record(1))  # its process starts once, not timed

    async def direct(record: RagRecord) -> object:
        return await measure_safely(metric, record)

    print(f"{'record':>10} {'direct ms':>10} {'process ms':>11} {'extra ms':>9}")
    extra: list[float] = []
    ratios: list[float] = []
    for size in (1, 20, 400):
        record = _record(size)
        inline, isolated = [], []
        for _ in range(rounds):
            inline.append(await _per_record(direct, record, records))
            isolated.append(await _per_record(boundary.measure, record, records))
        a, b = statistics.median(inline) * 1000, statistics.median(isolated) * 1000
        extra.append(b - a)
        ratios.append(b / a)
        chars = len(record.answer or "")
        print(f"{chars:>9}c {a:>10.3f} {b:>11.3f} {b - a:>9.3f}")
    boundary.close()
    print(
        f"RESULT extra_ms_small={extra[0]:.3f} extra_ms_large={extra[-1]:.3f} "
        f"ratio_small={ratios[0]:.1f} ratio_large={ratios[-1]:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(_main(args.records, args.rounds))
