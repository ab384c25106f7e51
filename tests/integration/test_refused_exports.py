"""A backend that refuses a signal for good: ragpulse drops what it refuses, once, and moves on.

Traces-only backends (Jaeger's and Tempo's OTLP receivers, Phoenix) answer logs and metrics
with OTLP's non-retryable failures: HTTP 404 or 405, gRPC UNIMPLEMENTED. Retrying them helps
nothing: it filled the delivery buffer with requests that were re-sent until they expired,
and at exit ``shutdown`` waited out its whole grace for them. Here a real backend on
loopback takes traces and refuses the rest; an app configured with ``ragpulse.configure()``
evaluates two requests and shuts down with a grace of two minutes. Its scored spans arrive;
each refused request was sent once, never again; the drops are counted under
``reason="refused"`` and the refusal is logged once per signal; and shutdown does not wait
for what was refused (the app's run is bounded well under the grace). ``ragpulse serve``
relaying to such a backend does the same with its evaluation events.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragpulse import semconv
from servers.otlp_load import make_requests
from servers.rotel_sink import free_port
from servers.serve_process import ServeProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

APP = """
import sys, time, urllib.request
import ragpulse

handle = ragpulse.configure(service_name="traces-only", prometheus_port=int(sys.argv[1]))

@ragpulse.rag(name="support-bot")
def answer(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."

for n in range(2):
    answer(f"When is support open? {n}")
assert handle.force_flush(120), "the spans were not delivered"
# The refused events are counted once their request came back: wait for that (bounded).
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    page = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics").read().decode()
    if 'reason="refused",ragpulse_export_signal="logs"' in page:
        break
    time.sleep(0.2)
handle.shutdown(timeout=120)
print(page)
"""


class TracesOnly:
    """What a traces-only backend received: span statuses, and each refused body by path."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.refused: dict[str, list[bytes]] = {}

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        for pair in span.attributes:
                            if pair.key == semconv.EVAL_STATUS:
                                self.statuses[pair.value.string_value] += 1

    def refuse(self, path: str, body: bytes) -> None:
        with self.lock:
            self.refused.setdefault(path, []).append(body)


@pytest.fixture
def http_backend() -> Iterator[tuple[str, TracesOnly]]:
    """OTLP/HTTP: 200 to /v1/traces, 405 Method Not Allowed to anything else."""
    seen = TracesOnly()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path == "/v1/traces":
                seen.take(body)
                self.send_response(200)
            else:
                seen.refuse(self.path, body)
                self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def grpc_backend() -> Iterator[tuple[str, TracesOnly]]:
    """OTLP/gRPC with the trace service alone: logs and metrics get UNIMPLEMENTED."""
    seen = TracesOnly()

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(
            self, request: ExportTraceServiceRequest, context: grpc.ServicerContext
        ) -> trace_service_pb2.ExportTraceServiceResponse:
            seen.take(request.SerializeToString())
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        server.stop(grace=None)


def run_app(endpoint: str, protocol: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        # Metric snapshots every half second: several of them meet the refusal.
        OTEL_METRIC_EXPORT_INTERVAL="500",
    )
    done = subprocess.run(
        [sys.executable, "-c", APP, str(free_port())],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        # A hang guard below the app's grace of 120 s: retrying what was refused until the
        # grace ran out is what this test catches.
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def refused_drops(page: str, signal: str) -> float:
    total = 0.0
    for line in page.splitlines():
        if (
            line.startswith("ragpulse_evaluator_export_dropped")
            and f'ragpulse_export_signal="{signal}"' in line
            and 'ragpulse_export_reason="refused"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_logs_refused_over_http_are_dropped_once_and_spans_still_arrive(
    http_backend: tuple[str, TracesOnly], tmp_path: Path
) -> None:
    endpoint, seen = http_backend
    done = run_app(endpoint, "http/protobuf", tmp_path)
    assert seen.statuses["ok"] == 2  # both units arrived scored
    logs = seen.refused.get("/v1/logs", [])
    assert logs, "the evaluation events were never offered to the backend"
    assert len(set(logs)) == len(logs), "a refused request was sent again"
    assert refused_drops(done.stdout, "logs") >= 2  # one event per metric and unit at least
    assert done.stderr.count("the logs endpoint refuses them (HTTP 405") == 1


def test_logs_and_metrics_refused_over_grpc_are_dropped_once_and_spans_still_arrive(
    grpc_backend: tuple[str, TracesOnly], tmp_path: Path
) -> None:
    endpoint, seen = grpc_backend
    done = run_app(endpoint, "grpc", tmp_path)
    assert seen.statuses["ok"] == 2
    assert refused_drops(done.stdout, "logs") >= 2
    assert done.stderr.count("the logs endpoint refuses them (gRPC UNIMPLEMENTED") == 1
    assert "the metrics endpoint refuses them (gRPC UNIMPLEMENTED" in done.stderr
    assert "retrying with backoff" not in done.stderr


def test_serve_drops_the_events_a_traces_only_backend_refuses_once_and_ends_promptly(
    http_backend: tuple[str, TracesOnly], tmp_path: Path
) -> None:
    endpoint, seen = http_backend
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    serve = ServeProcess(tmp_path, "--sample-rate", "1", env=env).start()
    try:
        (body,) = make_requests(1, 4)  # four RAG traces: four units, judged
        response = httpx.post(
            f"{serve.http_endpoint}/v1/traces",
            content=body,
            headers={"content-type": "application/x-protobuf"},
            timeout=30,
        )
        assert response.status_code == 200
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            seen.statuses["ok"] == 4 and seen.refused.get("/v1/logs")
        ):
            time.sleep(0.2)
        assert seen.statuses["ok"] == 4, serve.log()
        # Terminated with the default grace: nothing refused is left to wait for.
        assert serve.terminate(timeout=60) == 0
    finally:
        serve.stop()
    logs = seen.refused["/v1/logs"]
    assert len(set(logs)) == len(logs), "a refused request was sent again"
    assert serve.log().count("the logs endpoint refuses them (HTTP 405") == 1
