"""What a request pays for what it hands over past what can leave: time and peak memory.

Three calls of a ``@rag`` request, each in a child process of its own (so its peak RSS,
``resource.getrusage``, is its own), under an SDK tracer provider with a processor that
wants records (as an evaluating one does) and no exporter:

- ``empty_contexts``: a ``@retrieval`` returning 100,000 empty passages;
- ``empty_objects``: the same with 100,000 empty dicts (read one by one);
- ``non_ascii_answer``: a ``@generation`` answering a 50 MB non-ASCII text.

Beside each, the same functions undecorated in the same child (the floor): it prints the
milliseconds of each, their ratio and the peak RSS of the child.

    python bench/capture_bounds.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

CASES = ("empty_contexts", "empty_objects", "non_ascii_answer")


def _items(case: str) -> Any:
    if case == "empty_contexts":
        return [""] * 100_000
    if case == "empty_objects":
        return [{} for _ in range(100_000)]
    return ["The X200 comes with a 2-year limited warranty."]


def _child(case: str, repeat: int) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    import ragpulse
    from ragpulse.capture._record import handoff

    trace.set_tracer_provider(TracerProvider())
    handoff.add_consumer()
    items = _items(case)
    answer = "é" * 50_000_000 if case == "non_ascii_answer" else "No idea."

    def retrieve(query: str) -> Any:
        return items

    def generate(question: str) -> str:
        return answer

    def bare(question: str) -> str:
        retrieve(question)
        return generate(question)

    traced_retrieve = ragpulse.retrieval(retrieve)
    traced_generate = ragpulse.generation(generate)

    @ragpulse.rag
    def request(question: str) -> str:
        traced_retrieve(question)
        return traced_generate(question)

    def timed(call: Callable[[str], str]) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            call("q")
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    floor = timed(bare)
    captured = timed(request)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{floor:.3f} {captured:.3f} {peak:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=CASES)
    options = parser.parse_args()
    if options.child:
        _child(options.child, options.repeat)
        return
    print(f"{'case':<18} {'bare ms':>9} {'ragpulse ms':>12} {'ratio':>8} {'peak MB':>8}")
    results = []
    for case in CASES:
        out = subprocess.run(
            [sys.executable, __file__, "--child", case, "--repeat", str(options.repeat)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        floor, captured, peak = (float(value) for value in out[-3:])
        ratio = captured / max(floor, 1e-6)
        print(f"{case:<18} {floor:>9.3f} {captured:>12.1f} {ratio:>8.0f} {peak:>8.0f}")
        results.append(f"{case}_ms={captured:.1f} {case}_peak_mb={peak:.0f}")
    print("RESULT " + " ".join(results) + f" repeat={options.repeat}")


if __name__ == "__main__":
    main()
