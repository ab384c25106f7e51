"""``ragpulse serve`` answers every bad input as OTLP says, and keeps no connection or process
it does not need."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from ragpulse import semconv
from servers.rag_traces import post_spans, rag_trace
from servers.serve_process import REPO, ServeProcess, free_port

pytestmark = pytest.mark.integration

SLOW_JUDGE = "tests.servers.fixed_latency_judge:FixedLatencyJudge"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def serve(tmp_path: Path) -> ServeProcess:
    with ServeProcess(tmp_path, "--sample-rate", "0") as process:
        yield process


def _nested_json(depth: int) -> str:
    """An OTLP/JSON request whose one attribute nests ``depth`` key-value lists deep."""
    opening = '{"kvlistValue": {"values": [{"key": "k", "value": '
    value = opening * depth + '{"stringValue": "leaf"}' + "}]}}" * depth
    span = f'{{"traceId": "{"0" * 31}1", "spanId": "{"0" * 15}1", "name": "nested", '
    span += f'"attributes": [{{"key": "deep", "value": {value}}}]}}'
    return f'{{"resourceSpans": [{{"scopeSpans": [{{"spans": [{span}]}}]}}]}}'


def test_deeply_nested_otlp_json_is_a_400_with_its_reason(serve: ServeProcess) -> None:
    response = httpx.post(
        f"{serve.http_endpoint}/v1/traces",
        content=_nested_json(300),
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 400
    assert "nested too deeply" in response.json()["message"]


def test_every_gzip_member_of_a_body_is_decoded(serve: ServeProcess) -> None:
    first = encode_spans(rag_trace(0x21)).SerializeToString()
    second = encode_spans(rag_trace(0x22)).SerializeToString()

    response = httpx.post(
        f"{serve.http_endpoint}/v1/traces",
        content=gzip.compress(first) + gzip.compress(second),
        headers={"content-type": "application/x-protobuf", "content-encoding": "gzip"},
    )

    assert response.status_code == 200
    spans = serve.wait_for_spans(lambda spans: len(spans) == 4)
    assert {s.trace_id for s in spans} == {format(0x21, "032x"), format(0x22, "032x")}


def test_a_truncated_gzip_body_is_a_400(serve: ServeProcess) -> None:
    body = gzip.compress(encode_spans(rag_trace(0x23)).SerializeToString())

    response = httpx.post(
        f"{serve.http_endpoint}/v1/traces",
        content=body[: len(body) // 2],
        headers={"content-type": "application/x-protobuf", "content-encoding": "gzip"},
    )

    assert response.status_code == 400
    assert status_pb2.Status.FromString(response.content).message


def test_a_grpc_message_that_is_not_an_export_request_is_invalid_argument(
    serve: ServeProcess,
) -> None:
    with grpc.insecure_channel(serve.grpc_endpoint) as channel:
        export = channel.unary_unary(EXPORT)
        with pytest.raises(grpc.RpcError) as caught:
            export(b"\xff\xfe not protobuf", timeout=10)

    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_requests_during_drain_are_answered_503_not_refused(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path,
        "--judge",
        SLOW_JUDGE,
        "--sample-rate",
        "1",
        env={"RAGPULSE_TEST_JUDGE_LATENCY": "4.0"},
    ).start()
    try:
        assert post_spans(serve.http_endpoint, rag_trace(0x31)).status_code == 200
        assert serve.process is not None
        serve.process.terminate()
        answers: list[int] = []
        # While the evaluation is still running the service is draining, and says so.
        while not any(semconv.EVAL_STATUS in s.attributes for s in serve.spans()):
            try:
                answers.append(post_spans(serve.http_endpoint, rag_trace(0x32)).status_code)
            except httpx.ConnectError:
                if not any(semconv.EVAL_STATUS in s.attributes for s in serve.spans()):
                    raise
        assert serve.process.wait(timeout=60) == 0
    finally:
        serve.stop()

    assert 503 in answers
    assert set(answers) <= {200, 503}  # 200 only before SIGTERM reached the process


def test_exporting_to_its_own_listen_address_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://localhost:{port}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "serve", "--http", f"0.0.0.0:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )

    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("ragpulse serve: ") and "own listen address" in line


@pytest.mark.parametrize(
    ("http", "grpc"),
    [("127.0.0.1:{port}", "127.0.0.1:{port}"), ("0.0.0.0:{port}", "localhost:{port}")],
    ids=["same-address", "wildcard-and-host"],
)
def test_both_receivers_on_one_port_refuse_to_start_in_one_line(
    tmp_path: Path, http: str, grpc: str
) -> None:
    # One of the two would take the port and the other fail after it (or a client would
    # reach the wrong protocol): refused before either listens.
    port = free_port()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragpulse.cli",
            "serve",
            "--http",
            http.format(port=port),
            "--grpc",
            grpc.format(port=port),
            "--output-file",
            str(tmp_path / "out.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"},
        cwd=tmp_path,
    )

    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("ragpulse serve: ") and "the same port" in line


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.parametrize(
    "sent",
    [
        b"",
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n",
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n\x0a",
    ],
    ids=["nothing", "half-the-headers", "half-the-body"],
)
def test_a_client_that_does_not_send_its_request_in_time_is_cut_off(
    tmp_path: Path, sent: bytes
) -> None:
    with ServeProcess(tmp_path, "--request-timeout", "1", "--idle-timeout", "1") as serve:
        with socket.create_connection(("127.0.0.1", serve.http_port)) as sock:
            sock.sendall(sent)
            # Generous against a busy machine; a connection kept for ever misses it.
            assert _closed_within(sock, 30)
        # The service still answers others.
        assert httpx.get(f"{serve.http_endpoint}/healthz").status_code == 200


def _children(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize(
    "args", [("--no-evaluate",), ("--sample-rate", "0")], ids=["no-evaluate", "rate-0"]
)
def test_no_judge_process_starts_when_nothing_is_evaluated(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    with ServeProcess(tmp_path, *args) as serve:
        assert post_spans(serve.http_endpoint, rag_trace(0x41)).status_code == 200
        serve.wait_for_spans(lambda spans: len(spans) == 2)
        assert serve.process is not None
        children = _children(serve.process.pid)

    assert children == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_at_rate_zero_a_forced_unit_starts_the_judge_process(tmp_path: Path) -> None:
    with ServeProcess(tmp_path, "--sample-rate", "0") as serve:
        assert serve.process is not None
        before = _children(serve.process.pid)
        forced = rag_trace(0x42, root_attributes={semconv.RAG_FORCE_EVALUATION: True})
        assert post_spans(serve.http_endpoint, forced).status_code == 200
        spans = serve.wait_for_spans(
            lambda spans: any(semconv.EVAL_STATUS in s.attributes for s in spans), timeout=60
        )
        after = _children(serve.process.pid)

    assert before == [] and len(after) >= 1
    (unit,) = [s for s in spans if semconv.EVAL_STATUS in s.attributes]
    assert unit.attributes[semconv.EVAL_STATUS] == "ok"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="sets CPU affinity")
def test_on_one_cpu_serve_judges_in_one_process_whatever_the_concurrency(tmp_path: Path) -> None:
    # A CPU-bound judge's processes beyond the CPUs serve may use would only take turns.
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})  # this thread's affinity: the one serve inherits
    try:
        serve = ServeProcess(tmp_path, "--sample-rate", "1", "--concurrency", "4").start()
    finally:
        os.sched_setaffinity(0, cpus)
    try:
        assert serve.process is not None
        for trace in range(40):
            assert post_spans(serve.http_endpoint, rag_trace(0x500 + trace)).status_code == 200
        spans = serve.wait_for_spans(
            lambda spans: sum(semconv.EVAL_STATUS in s.attributes for s in spans) == 40,
            timeout=120,
        )
        children = _children(serve.process.pid)
    finally:
        serve.stop()

    assert len(children) == 1
    statuses = {
        s.attributes[semconv.EVAL_STATUS] for s in spans if semconv.EVAL_STATUS in s.attributes
    }
    assert statuses == {"ok"}


@pytest.mark.parametrize(
    ("variable", "target"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.1:{port}"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::ffff:127.0.0.1]:{port}"),
        ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://127.0.0.1:{port}/v1/logs"),
        ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://localhost:{port}/v1/metrics"),
    ],
    ids=["short-ipv4", "ipv4-mapped-ipv6", "logs-endpoint", "metrics-endpoint"],
)
def test_any_signal_exported_to_its_own_address_refuses_to_start_in_one_line(
    tmp_path: Path, variable: str, target: str
) -> None:
    port, backend = free_port(), free_port()
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}",
        # The other signals go to a backend elsewhere; only the one under test loops.
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{backend}",
        variable: target.format(port=port),
    }
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "serve", "--http", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"ragpulse serve: {variable} {target.format(port=port)} is this")
    assert f"own listen address (127.0.0.1:{port})" in line
