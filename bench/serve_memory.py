"""Resident memory of ``ragpulse serve`` against its ``--buffer-bytes`` while the backend is down.

With nothing accepting its exports, ``ragpulse serve`` holds what it takes until the buffer
is full and then refuses with 429. Its resident memory should then stay within
``base + 2 x --buffer-bytes``. Two traffic shapes, one run each, in one process:

- rag: OpenInference RAG traces (root, retriever with a passage, LLM span, one plain span);
- small: the same spans with short texts (per-span overhead dominates);
- passthrough: the rag traces with evaluation off (requests held decoded, never converted).

For each, serve starts (rag and small at sample rate 0: nothing sampled, every request held
as the bytes it came in) with its OTLP endpoint pointing at a closed port; requests are
posted until 20 in a row are refused. Printed: base resident memory, its peak (VmHWM),
growth / buffer.

    python bench/serve_memory.py [--buffer-mib 32] [--traces-per-request 64]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from servers.otlp_load import make_requests  # noqa: E402
from servers.serve_process import ServeProcess, free_port  # noqa: E402

MiB = 1024 * 1024
REFUSALS_IN_A_ROW = 20


def _memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def _shrunk(body: bytes) -> bytes:
    """The same request with every text cut to 8 characters (small spans)."""
    request = ExportTraceServiceRequest.FromString(body)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                for pair in span.attributes:
                    if pair.value.HasField("string_value"):
                        pair.value.string_value = pair.value.string_value[:8]
    return request.SerializeToString()


def fill(shape: str, buffer_bytes: int, traces_per_request: int, workdir: Path) -> dict[str, float]:
    """Run serve against a closed port until its buffer refuses; its memory figures."""
    bodies = make_requests(200, traces_per_request, seed=7)
    if shape == "small":
        bodies = [_shrunk(body) for body in bodies]
    dead = f"http://127.0.0.1:{free_port()}"
    mode = ("--no-evaluate",) if shape == "passthrough" else ("--sample-rate", "0")
    serve = ServeProcess(
        workdir,
        *mode,
        "--buffer-bytes",
        str(buffer_bytes),
        "--log-level",
        "error",
        name=f"memory-{shape}",
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": dead, "RAGPULSE_EXPORT_BUFFER_SECONDS": "3600"},
    ).start()
    try:
        assert serve.process is not None
        pid = serve.process.pid
        url = f"{serve.http_endpoint}/v1/traces"
        headers = {"content-type": "application/x-protobuf"}
        with httpx.Client(timeout=120) as client:
            # Warm up: imports, the first conversion, allocator arenas. Then the baseline.
            client.post(url, content=make_requests(1, 1, seed=99)[0], headers=headers)
            time.sleep(1.0)
            base_kb = _memory_kb(pid, "VmRSS")
            accepted_bytes = 0
            refused = 0
            index = 0
            while refused < REFUSALS_IN_A_ROW:
                # Fresh trace ids for every request: a resent unit would be dropped as a copy.
                body = bodies[index % len(bodies)] if index < len(bodies) else None
                if body is None:
                    body = make_requests(1, traces_per_request, seed=1000 + index)[0]
                    if shape == "small":
                        body = _shrunk(body)
                index += 1
                status = client.post(url, content=body, headers=headers).status_code
                if status == 200:
                    accepted_bytes += len(body)
                    refused = 0
                elif status == 429:
                    refused += 1
                else:
                    raise RuntimeError(f"unexpected answer {status}")
        time.sleep(1.0)
        peak_kb = _memory_kb(pid, "VmHWM")
        rss_kb = _memory_kb(pid, "VmRSS")
    finally:
        serve.kill()
    growth = (peak_kb - base_kb) * 1024
    return {
        "base_mb": base_kb / 1024,
        "peak_mb": peak_kb / 1024,
        "rss_mb": rss_kb / 1024,
        "accepted_mb": accepted_bytes / MiB,
        "growth_ratio": growth / buffer_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--buffer-mib", type=int, default=32)
    parser.add_argument("--traces-per-request", type=int, default=64)
    args = parser.parse_args()
    buffer_bytes = args.buffer_mib * MiB
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("rag", "small", "passthrough"):
            figures = fill(shape, buffer_bytes, args.traces_per_request, Path(tmp))
            results[shape] = figures
            print(
                f"{shape:>11}: base {figures['base_mb']:.0f} MB, peak {figures['peak_mb']:.0f} MB, "
                f"wire bytes accepted {figures['accepted_mb']:.1f} MB, "
                f"growth / buffer {figures['growth_ratio']:.2f}"
            )
    print(
        f"RESULT buffer_mib={args.buffer_mib} "
        + " ".join(f"{shape}_growth_ratio={r['growth_ratio']:.2f}" for shape, r in results.items())
        + " "
        + " ".join(f"{shape}_accepted_mb={r['accepted_mb']:.1f}" for shape, r in results.items())
    )


if __name__ == "__main__":
    main()
