"""examples/fastapi_app.py served by uvicorn: the streamed answer is evaluated on its span."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_streaming_endpoint_span_ends_after_the_stream_with_the_full_answer(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    # The shutdown on SIGINT waits for the evaluation in flight (half of this at most) and
    # returns as soon as it is done: on a busy machine the judge's process starts slowly.
    env["RAGPULSE_SHUTDOWN_TIMEOUT"] = "120"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "examples.fastapi_app:app",
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with httpx.stream(
                    "GET",
                    f"http://127.0.0.1:{port}/ask",
                    params={"question": "How long do refunds take?"},
                    timeout=10,
                ) as response:
                    chunks = list(response.iter_text())
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "uvicorn did not start"
                time.sleep(0.2)
        received = "".join(chunks)
        assert received.startswith("Refunds are issued within 14 days")
    finally:
        server.send_signal(signal.SIGINT)  # uvicorn runs the lifespan shutdown: ragpulse flushes
        server.wait(timeout=150)
    spans = [
        span
        for line in (tmp_path / "ragpulse-traces.jsonl").read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    (ask,) = [s for s in spans if s["name"] == "ask"]
    attrs = {a["key"]: next(iter(a["value"].values())) for a in ask["attributes"]}
    assert attrs["ragpulse.output.answer"] == received
    assert attrs["ragpulse.stream.end"] == "exhausted"
    assert attrs["ragpulse.eval.groundedness.score"] == 1.0
    (search,) = [s for s in spans if s["name"] == "retrieval search"]
    assert int(ask["endTimeUnixNano"]) >= int(search["endTimeUnixNano"])
