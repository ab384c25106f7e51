"""ragpulse's exporters follow the OTLP exporter specification's variables, and its own
lifecycle holds across configure() -> shutdown() -> configure()."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from servers.otlp_recorder import OtlpRecorder
from servers.rotel_sink import RotelSink
from servers.tls import openssl_available, self_signed

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

APP = """
import sys
import ragpulse

handle = ragpulse.configure(
    service_name="conventions-app", bounds=ragpulse.BoundsOptions(shutdown_timeout=30)
)


@ragpulse.rag(name="support-bot")
def answer(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."


answer("When is support open?")
print("flushed", handle.force_flush(timeout=float(sys.argv[1]) if len(sys.argv) > 1 else 30))
handle.shutdown()
"""


def _run(tmp_path: Path, env: dict[str, str], *args: str) -> str:
    (tmp_path / "app.py").write_text(APP)
    full = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **env}
    for key in list(full):
        if key.startswith(("OTEL_", "RAGPULSE_")) and key not in env:
            del full[key]
    done = subprocess.run(
        [sys.executable, "app.py", *args],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_signals_own_endpoint_wins_over_the_base_endpoint(tmp_path: Path) -> None:
    with OtlpRecorder() as base, OtlpRecorder() as logs:
        out = _run(
            tmp_path,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": base.url,
                # Used as it is: no /v1/logs appended.
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"{logs.url}/custom/logs",
            },
        )
        assert out.strip() == "flushed True"
        assert set(logs.paths()) == {"/custom/logs"}
        assert {"/v1/traces", "/v1/metrics"} <= set(base.paths())
        assert "/v1/logs" not in base.paths()


def test_a_signals_own_endpoint_alone_sends_that_signal_and_files_the_rest(
    tmp_path: Path,
) -> None:
    with OtlpRecorder() as logs:
        _run(tmp_path, {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"{logs.url}/v1/logs"})
        assert set(logs.paths()) == {"/v1/logs"}
    assert (tmp_path / "ragpulse-traces.jsonl").read_text().count('"name": "support-bot"') == 1
    assert not (tmp_path / "ragpulse-logs.jsonl").exists()


def test_a_signals_own_protocol_timeout_and_compression_win(
    tmp_path: Path, rotel_sink: RotelSink
) -> None:
    with OtlpRecorder() as base:
        _run(
            tmp_path,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": base.url,
                "OTEL_EXPORTER_OTLP_COMPRESSION": "none",
                "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "20",
                "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": rotel_sink.grpc_endpoint,
            },
        )
        traces = base.wait_for("/v1/traces")
        metrics = base.wait_for("/v1/metrics")
        assert "/v1/logs" not in base.paths()
    assert traces.headers.get("content-encoding") == "gzip"
    request = ExportTraceServiceRequest.FromString(gzip.decompress(traces.body))
    assert request.resource_spans
    assert "content-encoding" not in metrics.headers
    logs = rotel_sink.wait_for_logs(
        lambda got: any(r.event_name == "gen_ai.evaluation.result" for r in got)
    )
    assert logs


def test_force_flush_is_false_while_the_backend_refuses_everything(tmp_path: Path) -> None:
    with OtlpRecorder(status=401) as backend:
        out = _run(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": backend.url})
        assert backend.paths()  # it was asked, and said 401
    assert out.strip() == "flushed False"


RECONFIGURED = """
import ragpulse


@ragpulse.rag(name="support-bot")
def answer(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."


for run in ("first", "second"):
    handle = ragpulse.configure(
        output_file=f"{run}-traces.jsonl", bounds=ragpulse.BoundsOptions(shutdown_timeout=30)
    )
    answer("When is support open?")
    print(run, handle.force_flush(timeout=30))
    handle.shutdown()
"""


def test_configure_after_shutdown_writes_again(tmp_path: Path) -> None:
    (tmp_path / "reconfigured.py").write_text(RECONFIGURED)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    for key in [k for k in env if k.startswith(("OTEL_", "RAGPULSE_"))]:
        del env[key]
    done = subprocess.run(
        [sys.executable, "reconfigured.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["first", "True", "second", "True"]
    assert "shutdown `MeterProvider`" not in done.stderr
    for run in ("first", "second"):
        spans = (tmp_path / f"{run}-traces.jsonl").read_text()
        assert spans.count('"name": "support-bot"') == 1
        assert '"ragpulse.eval.faithfulness.score"' in spans
        assert "gen_ai.evaluation.result" in (tmp_path / f"{run}-logs.jsonl").read_text()
        assert "ragpulse.evaluation.score" in (tmp_path / f"{run}-metrics.jsonl").read_text()


@pytest.fixture
def certificates(tmp_path: Path) -> dict[str, Path]:
    if not openssl_available():
        if os.environ.get("CI"):
            pytest.fail("openssl is required in CI")
        pytest.skip("openssl is not installed")
    made = {}
    for name in ("server", "client", "unrelated"):
        directory = tmp_path / name
        directory.mkdir()
        made[f"{name}_cert"], made[f"{name}_key"] = self_signed(directory)
    return made


# These machines set the two requests variables; a TLS test must not pass only because they
# are unset, so they name a bundle that does not hold the server's certificate.
def _unrelated_bundles(certificates: dict[str, Path]) -> dict[str, str]:
    bundle = str(certificates["unrelated_cert"])
    return {"REQUESTS_CA_BUNDLE": bundle, "CURL_CA_BUNDLE": bundle}


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"]
)
def test_the_otlp_certificate_wins_over_the_requests_ca_bundles(
    tmp_path: Path, certificates: dict[str, Path], variable: str
) -> None:
    with OtlpRecorder(cert=certificates["server_cert"], key=certificates["server_key"]) as tls:
        out = _run(
            tmp_path,
            {
                **_unrelated_bundles(certificates),
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{tls.url}/v1/traces",
                variable: str(certificates["server_cert"]),
            },
        )
        request = tls.wait_for("/v1/traces")
    assert out.strip() == "flushed True"
    assert ExportTraceServiceRequest.FromString(request.body).resource_spans


def test_the_otlp_client_certificate_and_key_are_presented(
    tmp_path: Path, certificates: dict[str, Path]
) -> None:
    with OtlpRecorder(
        cert=certificates["server_cert"],
        key=certificates["server_key"],
        client_ca=certificates["client_cert"],
    ) as mutual:
        out = _run(
            tmp_path,
            {
                **_unrelated_bundles(certificates),
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{mutual.url}/v1/traces",
                "OTEL_EXPORTER_OTLP_CERTIFICATE": str(certificates["server_cert"]),
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(certificates["client_cert"]),
                "OTEL_EXPORTER_OTLP_CLIENT_KEY": str(certificates["client_key"]),
            },
        )
        mutual.wait_for("/v1/traces")
    assert out.strip() == "flushed True"
