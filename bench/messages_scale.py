"""What reading an agent's chat ``messages`` costs ``ragpulse eval``, against decoding the line.

Builds the lines the issue names as bad input (a history of 1,000 turns, 10,000 tool
messages in one turn) and a small one, and times ``read_records`` on each against
``json.loads`` of the same line (the cost any reader pays): the ratio says what reading
the conversation adds. Also the peak memory of the read, as a multiple of the line's size.

    python bench/messages_scale.py

Ends with one line: ``RESULT key=value ...``.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from ragpulse.offline.evaluate import InputRecord, read_records

REPEATS = 5


def _turn(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "search_docs"}}
    return [
        {"role": "user", "content": f"Question {i} about the X200?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"Passage {i}: " + "words " * 40},
        {"role": "assistant", "content": f"Answer {i}."},
    ]


def _history(turns: int) -> str:
    messages = [m for i in range(turns) for m in _turn(i)]
    return json.dumps({"id": "h", "messages": messages})


def _many_tools(count: int) -> str:
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "s"}} for i in range(count)]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Everything?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": f"R{i}"} for i in range(count)),
        {"role": "assistant", "content": "Done."},
    ]
    return json.dumps({"id": "t", "messages": messages})


def _best(work: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def _read(line: str) -> InputRecord:
    (item,) = list(read_records([line]))
    assert isinstance(item, InputRecord)
    return item


def main() -> None:
    cases = {
        "small": _history(2),
        "turns_1000": _history(1_000),
        "tools_10000": _many_tools(10_000),
    }
    print(
        f"{'line':<12} {'bytes':>10} {'json ms':>9} {'read ms':>9} {'ratio':>6} {'peak/bytes':>10}"
    )
    result = []
    for name, line in cases.items():
        decode = _best(lambda line=line: json.loads(line))
        read = _best(lambda line=line: _read(line))
        tracemalloc.start()
        _read(line)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        ratio = read / decode
        share = peak / len(line)
        print(
            f"{name:<12} {len(line):>10} {decode * 1e3:>9.2f} {read * 1e3:>9.2f} "
            f"{ratio:>6.2f} {share:>10.1f}"
        )
        result.append(f"{name}_ratio={ratio:.2f} {name}_read_ms={read * 1e3:.1f}")
        result.append(f"{name}_peak_per_byte={share:.1f}")
    print("RESULT " + " ".join(result))


if __name__ == "__main__":
    main()
