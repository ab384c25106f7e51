"""``ragpulse serve`` exposed beyond loopback: a bearer token and TLS on both receivers."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from servers.rag_traces import post_spans, rag_trace
from servers.serve_process import REPO, ServeProcess, free_port
from servers.tls import openssl_available, self_signed

pytestmark = pytest.mark.integration

TOKEN = "s3cret-token-for-tests"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    if not openssl_available():
        if os.environ.get("CI"):
            pytest.fail("openssl is required in CI")
        pytest.skip("openssl is not installed")
    return self_signed(tmp_path)


def _grpc_export(channel: grpc.Channel, trace_id: int, token: str | None) -> None:
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    stub.Export(encode_spans(rag_trace(trace_id)), timeout=10, metadata=metadata)


def test_http_requests_need_the_bearer_token_and_probes_do_not(
    tmp_path: Path, token_file: Path
) -> None:
    with ServeProcess(tmp_path, "--auth-token-file", str(token_file)) as serve:
        missing = post_spans(serve.http_endpoint, rag_trace(0x1))
        wrong = post_spans(
            serve.http_endpoint, rag_trace(0x2), headers={"authorization": "Bearer nope"}
        )
        right = post_spans(
            serve.http_endpoint, rag_trace(0x3), headers={"authorization": f"Bearer {TOKEN}"}
        )
        healthz = httpx.get(f"{serve.http_endpoint}/healthz")
        spans = serve.wait_for_spans(lambda spans: len(spans) == 2)

    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert right.status_code == 200
    assert healthz.status_code == 200
    assert {s.trace_id for s in spans} == {format(0x3, "032x")}


def test_grpc_requests_without_the_bearer_token_are_unauthenticated(
    tmp_path: Path, token_file: Path
) -> None:
    with (
        ServeProcess(tmp_path, "--auth-token-file", str(token_file)) as serve,
        grpc.insecure_channel(serve.grpc_endpoint) as channel,
    ):
        with pytest.raises(grpc.RpcError) as missing:
            _grpc_export(channel, 0x4, None)
        with pytest.raises(grpc.RpcError) as wrong:
            _grpc_export(channel, 0x5, "nope")
        _grpc_export(channel, 0x6, TOKEN)
        spans = serve.wait_for_spans(lambda spans: len(spans) == 2)

    assert missing.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert wrong.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert {s.trace_id for s in spans} == {format(0x6, "032x")}


def test_both_receivers_serve_tls(
    tmp_path: Path, token_file: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    args = ("--auth-token-file", str(token_file), "--tls-cert", str(cert), "--tls-key", str(key))
    with ServeProcess(tmp_path, *args, tls_ca=cert) as serve:
        response = post_spans(
            serve.http_endpoint,
            rag_trace(0x7),
            headers={"authorization": f"Bearer {TOKEN}"},
            verify=ssl.create_default_context(cafile=cert),
        )
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(serve.grpc_endpoint, credentials) as channel:
            _grpc_export(channel, 0x8, TOKEN)
        with pytest.raises(httpx.HTTPError):  # plain text to a TLS port
            httpx.post(
                f"http://127.0.0.1:{serve.http_port}/v1/traces",
                content=b"",
                headers={"content-type": "application/x-protobuf"},
            )
        spans = serve.wait_for_spans(lambda spans: len(spans) == 4)

    assert response.status_code == 200
    assert {s.trace_id for s in spans} == {format(0x7, "032x"), format(0x8, "032x")}


def test_listening_beyond_loopback_without_token_and_tls_is_warned_about(tmp_path: Path) -> None:
    with ServeProcess(tmp_path, "--grpc", f"0.0.0.0:{free_port()}") as serve:
        log = serve.log()

    assert "beyond loopback" in log and "no --auth-token-file" in log and "no TLS" in log


def test_loopback_alone_is_not_warned_about(tmp_path: Path) -> None:
    with ServeProcess(tmp_path) as serve:
        log = serve.log()

    assert "beyond loopback" not in log


@pytest.mark.parametrize("content", ["", "   \n"], ids=["empty", "blank"])
def test_an_empty_token_file_refuses_to_start_in_one_line(tmp_path: Path, content: str) -> None:
    path = tmp_path / "token"
    path.write_text(content)
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"}
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "serve", "--auth-token-file", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"ragpulse serve: --auth-token-file {path} is empty"
    ]


def _serve_refusal(tmp_path: Path, cert: Path, key: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ragpulse.cli",
            "serve",
            "--http",
            f"127.0.0.1:{free_port()}",
            "--grpc",
            f"127.0.0.1:{free_port()}",
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(key),
            "--output-file",
            str(tmp_path / "out.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("case", ["key_of_another_cert", "cert_not_pem", "key_not_pem"])
def test_a_bad_tls_pair_with_grpc_on_refuses_to_start_in_one_line(
    tmp_path: Path, certificate: tuple[Path, Path], case: str
) -> None:
    cert, key = certificate
    other = tmp_path / "other"
    other.mkdir()
    _, other_key = self_signed(other)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    given, expected = {
        "key_of_another_cert": (
            (cert, other_key),
            f"--tls-key {other_key} is not the private key of --tls-cert {cert}",
        ),
        "cert_not_pem": ((garbage, key), f"--tls-cert {garbage}: not a PEM certificate"),
        "key_not_pem": (
            (cert, garbage),
            f"--tls-key {garbage}: not an unencrypted PEM private key",
        ),
    }[case]

    done = _serve_refusal(tmp_path, *given)

    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"ragpulse serve: {expected}"]
