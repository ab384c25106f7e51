"""``ragpulse eval`` on trace files: throughput, and peak memory of a large file and a small one.

Two OTLP-JSON lines files of the same traffic are written: OpenInference RAG traces (a root
with the question and answer, a retriever with one passage, a plain HTTP span carrying a
large payload), each trace's spans split over two lines with ``--lag`` other traces between
them, as a Collector's file exporter interleaves concurrent requests. The large file holds
``--scale`` times the traces of the small one and is many times ``--assembly-mib``, the
assembly's byte bound (``RAGPULSE_SERVE_ASSEMBLY_BYTES``). Each file is judged by
``ragpulse eval`` (offline judge) in its own process; printed: its size, units, wall and CPU
seconds, units and MiB per CPU second (CPU time, as a shared machine makes wall time noisy),
the process's peak resident memory, and the most the assembly held
(from eval's own summary line). Memory bounded by the assembly, not the file, shows as a
peak RSS ratio near 1 while the file ratio is ``--scale``.

    python bench/eval_trace_files.py [--traces 400] [--scale 25] [--assembly-mib 4]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.trace import SpanContext, TraceFlags  # noqa: E402

from servers.otlp_files import spans_line  # noqa: E402
from servers.rag_traces import rag_trace, span_id  # noqa: E402

MiB = 1024 * 1024
_HELD = re.compile(r"held at most (\d+) traces, (\d+) bytes")


def _payload_span(root: ReadableSpan, size: int) -> ReadableSpan:
    """A plain child span with a large attribute (a request body an HTTP instrumentation
    recorded): read and routed, never held."""
    assert root.context is not None
    trace_id = root.context.trace_id
    return ReadableSpan(
        name="GET /search",
        context=SpanContext(trace_id, span_id(trace_id, 3), False, TraceFlags(1)),
        parent=root.context,
        resource=root.resource,
        attributes={"http.response.body": "x" * size},
        start_time=root.start_time,
        end_time=root.start_time,
        instrumentation_scope=root.instrumentation_scope,
    )


def _lines(traces: int, lag: int, payload: int) -> Iterator[str]:
    first = 0x7000_0000
    document = "The tower is 330 metres tall and stands in Paris. " * 80
    for number in range(traces + lag):
        if number < traces:
            root, retriever = rag_trace(first + number, document=document)
            yield spans_line([retriever, _payload_span(root, payload)])
        if number >= lag:
            root, _ = rag_trace(first + number - lag)
            yield spans_line([root])


def _write(path: Path, traces: int, lag: int, payload: int) -> int:
    with path.open("w", encoding="utf-8") as out:
        for line in _lines(traces, lag, payload):
            out.write(line + "\n")
    return path.stat().st_size


def _run(path: Path, assembly_bytes: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env["RAGPULSE_SERVE_ASSEMBLY_BYTES"] = str(assembly_bytes)
    command = [sys.executable, "-m", "ragpulse.cli", "eval", str(path), "--output", os.devnull]
    command += ["--metrics", "faithfulness,groundedness"]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"ragpulse eval failed:\n{stderr[-2000:]}")
    held = _HELD.search(stderr)
    units = re.search(r"(\d+) evaluation units?", stderr)
    return {
        "seconds": seconds,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mib": usage.ru_maxrss / 1024,  # KiB on Linux
        "units": float(units.group(1)) if units else 0.0,
        "held_traces": float(held.group(1)) if held else -1.0,
        "held_bytes": float(held.group(2)) if held else -1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=200, help="traces in the small file")
    parser.add_argument("--scale", type=int, default=25, help="the large file's traces / small's")
    parser.add_argument("--lag", type=int, default=256, help="traces between a trace's lines")
    parser.add_argument("--payload", type=int, default=16_000, help="bytes of the plain span")
    parser.add_argument("--assembly-mib", type=float, default=4.0)
    args = parser.parse_args()
    assembly_bytes = int(args.assembly_mib * MiB)
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for name, traces in (("small", args.traces), ("large", args.traces * args.scale)):
            path = Path(tmp) / f"{name}.jsonl"
            size = _write(path, traces, args.lag, args.payload)
            result = _run(path, assembly_bytes)
            rows.append((name, size, result))
            path.unlink()
    print(f"assembly bound {assembly_bytes / MiB:.1f} MiB, lag {args.lag} traces")
    print(
        f"{'file':<6} {'MiB':>8} {'units':>7} {'s':>7} {'CPU s':>7} {'units/CPU s':>12} "
        f"{'MiB/CPU s':>10} "
        f"{'peak RSS MiB':>13} {'held traces':>12} {'held MiB':>9}"
    )
    for name, size, r in rows:
        print(
            f"{name:<6} {size / MiB:>8.1f} {r['units']:>7.0f} {r['seconds']:>7.1f} "
            f"{r['cpu']:>7.1f} {r['units'] / r['cpu']:>12.0f} {size / MiB / r['cpu']:>10.2f} "
            f"{r['rss_mib']:>13.1f} {r['held_traces']:>12.0f} {r['held_bytes'] / MiB:>9.2f}"
        )
    (_, small_size, small), (_, large_size, large) = rows
    print(
        f"RESULT file_ratio={large_size / small_size:.1f} "
        f"rss_ratio={large['rss_mib'] / small['rss_mib']:.2f} "
        f"large_over_bound={large_size / assembly_bytes:.1f} "
        f"held_within_bound={int(large['held_bytes'] <= assembly_bytes * 1.1)} "
        f"units_per_cpu_s={large['units'] / large['cpu']:.0f} "
        f"mib_per_cpu_s={large_size / MiB / large['cpu']:.2f}"
    )


if __name__ == "__main__":
    main()
