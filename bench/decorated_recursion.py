"""How deep a decorated function may recurse, against the same function undecorated.

A recursive function that the interpreter's recursion limit allows undecorated must be
allowed decorated too: each decorated call adds the wrapper's frames to the stack while
the function runs, and the span's start and end add their own frames at the deepest
level. For sync, async, generator and async generator functions under ``@rag``,
``@retrieval`` and ``@tool``, this prints

- the frames each level keeps on the stack, decorated / undecorated (counted exactly:
  the stack depth at the innermost call of a recursion of 50 levels, less that of a
  recursion of none, per level), and
- the deepest recursion that completes under the interpreter's limit (a bisection, run
  in this process through ``configure()``'s own pipeline, writing OTLP-JSON to a
  temporary directory), beside the undecorated function's.

    python bench/decorated_recursion.py [--limit 1000]

The last line is ``RESULT frames_per_call_<kind>=... depth_ratio_<kind>=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

import ragpulse

_DEPTH = 50


def _stack_depth() -> int:
    frame: Any = sys._getframe(1)
    depth = 0
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def sync_chain(decorate: Callable[[Any], Any] | None) -> Callable[[int], Any]:
    def down(n: int) -> Any:
        return str(_stack_depth()) if n == 0 else chain(n - 1)

    chain = decorate(down) if decorate else down
    return chain


def async_chain(decorate: Callable[[Any], Any] | None) -> Callable[[int], Any]:
    async def down(n: int) -> Any:
        return str(_stack_depth()) if n == 0 else await chain(n - 1)

    chain = decorate(down) if decorate else down
    return lambda n: asyncio.run(chain(n))


def generator_chain(decorate: Callable[[Any], Any] | None) -> Callable[[int], Any]:
    def down(n: int) -> Any:
        if n == 0:
            yield str(_stack_depth())
        else:
            yield from chain(n - 1)

    chain = decorate(down) if decorate else down
    return lambda n: next(iter(chain(n)))


def async_generator_chain(decorate: Callable[[Any], Any] | None) -> Callable[[int], Any]:
    async def down(n: int) -> Any:
        if n == 0:
            yield str(_stack_depth())
        else:
            async for item in chain(n - 1):
                yield item

    chain = decorate(down) if decorate else down

    async def first(n: int) -> Any:
        async for item in chain(n):
            return item

    return lambda n: asyncio.run(first(n))


SHAPES: dict[str, Callable[[Callable[[Any], Any] | None], Callable[[int], Any]]] = {
    "sync": sync_chain,
    "async": async_chain,
    "generator": generator_chain,
    "async_generator": async_generator_chain,
}
DECORATORS: dict[str, Callable[[Any], Any]] = {
    "rag": ragpulse.rag(name="level"),
    "retrieval": ragpulse.retrieval(name="level"),
    "tool": ragpulse.tool(name="level"),
}


def completes(run: Callable[[int], Any], depth: int) -> bool:
    try:
        run(depth)
    except RecursionError:
        return False
    return True


def deepest(run: Callable[[int], Any], limit: int) -> int:
    """The deepest recursion ``run`` completes (bisection over 0..limit)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if completes(run, middle):
            low = middle
        else:
            high = middle - 1
    return low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1000, help="sys.setrecursionlimit")
    args = parser.parse_args()
    os.chdir(tempfile.mkdtemp(prefix="ragpulse-recursion-"))
    # Evaluation stays on, so its processor is on the path; nothing is sampled, so the
    # bisection's thousands of calls queue no work.
    handle = ragpulse.configure(service_name="recursion-bench", sample_rate=0.0)
    sys.setrecursionlimit(args.limit)
    table = Table(title=f"decorated recursion (recursion limit {args.limit})")
    table.add_column("shape")
    table.add_column("decorator")
    for column in ("frames per level", "deepest", "undecorated", "ratio"):
        table.add_column(column, justify="right")
    results: list[str] = []
    for shape, make in SHAPES.items():
        plain = make(None)
        plain_frames = (int(plain(_DEPTH)) - int(plain(0))) / _DEPTH
        plain_deepest = deepest(plain, args.limit)
        for name, decorate in DECORATORS.items():
            chain = make(decorate)
            frames = (int(chain(_DEPTH)) - int(chain(0))) / _DEPTH
            depth = deepest(chain, args.limit)
            ratio = depth / plain_deepest
            table.add_row(
                shape,
                f"@{name}",
                f"{frames:.1f} / {plain_frames:.1f}",
                str(depth),
                str(plain_deepest),
                f"{ratio:.2f}",
            )
            results.append(f"frames_per_call_{shape}_{name}={frames / plain_frames:.1f}")
            results.append(f"depth_ratio_{shape}_{name}={ratio:.2f}")
    handle.shutdown()
    Console().print(table)
    print("RESULT " + " ".join(results))


if __name__ == "__main__":
    main()
