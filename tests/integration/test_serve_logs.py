"""``ragpulse serve`` passes an application's log events and metrics on: OTLP ``/v1/logs`` and
``/v1/metrics``, the gRPC ``LogsService`` and ``MetricsService``, forwarded to serve's own
destination (a real rotel collector, or a second serve) or appended to its files. An app
pointed at serve keeps its ``ragpulse.feedback`` events.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import grpc
import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric, NumberDataPoint, Sum
from tests.cases.feedback_set import run_app

from servers.rotel_sink import RotelSink
from servers.serve_process import ServeProcess, free_port, log_records, otlp_documents

pytestmark = pytest.mark.integration

TOKEN = "s3cret-token-for-logs"
PROTOBUF = {"content-type": "application/x-protobuf"}
# Two requests of the feedback app: feedback on the span itself, and by its hex ids.
PLAN = [
    {"grounded": True, "groundedness": 0.9, "label": "thumbs_up", "target": "span"},
    {"grounded": False, "groundedness": 0.1, "label": "thumbs_down", "target": "ids"},
]


def _logs_request(trace_id: int, span_id: int, body: str = "the answer was wrong") -> bytes:
    record = LogRecord(
        time_unix_nano=1_700_000_000_000_000_000,
        event_name="app.note",
        body=AnyValue(string_value=body),
        attributes=[KeyValue(key="app.kind", value=AnyValue(string_value="note"))],
        trace_id=trace_id.to_bytes(16, "big"),
        span_id=span_id.to_bytes(8, "big"),
    )
    request = ExportLogsServiceRequest()
    request.resource_logs.add().scope_logs.add().log_records.append(record)
    return request.SerializeToString()


def _relayed_through_serve(rotel_sink: RotelSink, tmp_path: Path, protocol: str) -> None:
    # serve sends to rotel over the protocol under test; the app sends to serve over it too.
    backend = rotel_sink.grpc_endpoint if protocol == "grpc" else rotel_sink.http_endpoint
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": backend, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    with ServeProcess(tmp_path, "--sample-rate", "1", env=env) as serve:
        target = serve.http_endpoint if protocol != "grpc" else f"http://{serve.grpc_endpoint}"
        to_serve = {"OTEL_EXPORTER_OTLP_ENDPOINT": target, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
        span_ids = run_app(tmp_path, to_serve, PLAN)
        logs = rotel_sink.wait_for_logs(
            lambda got: sum(r.event_name == "ragpulse.feedback" for r in got) >= 4
        )
        units = rotel_sink.wait_for_spans(
            lambda got: sum(s.name == "support-bot" for s in got) == 2
        )
    trace_of = {s.span_id: s.trace_id for s in units if s.name == "support-bot"}
    feedback = [r for r in logs if r.event_name == "ragpulse.feedback"]
    for item, span_id in zip(PLAN, span_ids, strict=True):
        on_span = [r for r in feedback if r.span_id == span_id]
        assert {r.trace_id for r in on_span} == {trace_of[span_id]}
        scored = next(r for r in on_span if "ragpulse.feedback.metric" in r.attributes)
        assert scored.attributes["ragpulse.feedback.score"] == item["groundedness"]


def test_feedback_sent_to_serve_over_http_reaches_the_backend_linked_to_its_span(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    _relayed_through_serve(rotel_sink, tmp_path, "http/protobuf")


def test_feedback_sent_to_serve_over_grpc_reaches_the_backend_linked_to_its_span(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    _relayed_through_serve(rotel_sink, tmp_path, "grpc")


def test_otlp_json_logs_are_appended_to_the_logs_file_with_their_ids(tmp_path: Path) -> None:
    request = ExportLogsServiceRequest.FromString(_logs_request(0xABC, 0xDEF))
    document = json_format.MessageToDict(request)
    record = document["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    # OTLP/JSON spells the ids in hex.
    record["traceId"], record["spanId"] = format(0xABC, "032x"), format(0xDEF, "016x")
    logs_file = tmp_path / "serve-logs.jsonl"
    with ServeProcess(tmp_path, "--no-evaluate") as serve:
        response = httpx.post(
            f"{serve.http_endpoint}/v1/logs",
            content=gzip.compress(json.dumps(document).encode()),
            headers={"content-type": "application/json", "content-encoding": "gzip"},
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        records = _wait_for_records(logs_file, serve)

    assert records[0]["traceId"] == format(0xABC, "032x")
    assert records[0]["spanId"] == format(0xDEF, "016x")
    assert records[0]["body"] == {"stringValue": "the answer was wrong"}


def _wait_for_records(path: Path, serve: ServeProcess, count: int = 1) -> list[dict[str, object]]:
    """The relayed records in serve's logs file, once ``count`` of them are there."""
    deadline = time.monotonic() + 60.0  # a bound for a hang: the wait ends when they are there
    while True:
        records = [r for r in log_records(path) if r.get("eventName") == "app.note"]
        if len(records) >= count:
            return records
        if time.monotonic() > deadline:
            raise AssertionError(f"no relayed log record in {path}\n{serve.log()}")
        time.sleep(0.05)


def test_logs_received_before_sigterm_are_written_before_the_process_exits(
    tmp_path: Path,
) -> None:
    serve = ServeProcess(tmp_path, "--no-evaluate").start()
    try:
        bodies = [_logs_request(0x100 + n, 0x200 + n) for n in range(20)]
        for body in bodies:
            response = httpx.post(f"{serve.http_endpoint}/v1/logs", content=body, headers=PROTOBUF)
            assert response.status_code == 200
        assert serve.terminate() == 0
    finally:
        serve.stop()

    records = [
        r for r in log_records(tmp_path / "serve-logs.jsonl") if r.get("eventName") == "app.note"
    ]
    assert sorted(str(r["traceId"]) for r in records) == [
        format(0x100 + n, "032x") for n in range(20)
    ]


def test_a_body_that_is_not_a_logs_request_is_a_400_over_http(tmp_path: Path) -> None:
    with ServeProcess(tmp_path, "--no-evaluate") as serve:
        bad_protobuf = httpx.post(
            f"{serve.http_endpoint}/v1/logs", content=b"\xff\xff\xff", headers=PROTOBUF
        )
        bad_json = httpx.post(
            f"{serve.http_endpoint}/v1/logs",
            content=b'{"resourceLogs": 7}',
            headers={"content-type": "application/json"},
        )

    assert bad_protobuf.status_code == 400
    assert bad_json.status_code == 400
    assert "logs request" in bad_json.json()["message"]


def test_a_message_that_is_not_a_logs_request_is_invalid_argument_over_grpc(
    tmp_path: Path,
) -> None:
    with (
        ServeProcess(tmp_path, "--no-evaluate") as serve,
        grpc.insecure_channel(serve.grpc_endpoint) as channel,
    ):
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            request_serializer=lambda body: body,
            response_deserializer=lambda body: body,
        )
        with pytest.raises(grpc.RpcError) as caught:
            export(b"\xff\xff\xff", timeout=10)

    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_logs_without_the_bearer_token_are_refused_over_http_and_grpc(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    body = _logs_request(0x7, 0x8)
    with (
        ServeProcess(tmp_path, "--no-evaluate", "--auth-token-file", str(token_file)) as serve,
        grpc.insecure_channel(serve.grpc_endpoint) as channel,
    ):
        url = f"{serve.http_endpoint}/v1/logs"
        missing = httpx.post(url, content=body, headers=PROTOBUF)
        right = httpx.post(
            url, content=body, headers={**PROTOBUF, "authorization": f"Bearer {TOKEN}"}
        )
        stub = logs_service_pb2_grpc.LogsServiceStub(channel)
        request = ExportLogsServiceRequest.FromString(body)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(request, timeout=10)
        stub.Export(request, timeout=10, metadata=(("authorization", f"Bearer {TOKEN}"),))
        records = _wait_for_records(tmp_path / "serve-logs.jsonl", serve, count=2)

    assert missing.status_code == 401
    assert right.status_code == 200
    assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert len(records) == 2


def test_logs_are_refused_with_429_when_the_buffer_is_full(tmp_path: Path) -> None:
    # Nothing listens at the destination, so the first request's bytes stay held.
    dead = f"http://127.0.0.1:{free_port()}"
    with ServeProcess(
        tmp_path,
        "--no-evaluate",
        "--buffer-bytes",
        "3000",
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": dead},
    ) as serve:
        url = f"{serve.http_endpoint}/v1/logs"
        first = httpx.post(url, content=_logs_request(0x1, 0x1, "x" * 2500), headers=PROTOBUF)
        second = httpx.post(url, content=_logs_request(0x2, 0x2, "y" * 2500), headers=PROTOBUF)
        serve.kill()

    assert first.status_code == 200
    assert second.status_code == 429
    assert int(second.headers["retry-after"]) >= 1


def _metrics_request(name: str) -> ExportMetricsServiceRequest:
    point = NumberDataPoint(time_unix_nano=1_700_000_000_000_000_000, as_int=3)
    metric = Metric(name=name, sum=Sum(data_points=[point], is_monotonic=True))
    request = ExportMetricsServiceRequest()
    request.resource_metrics.add().scope_metrics.add().metrics.append(metric)
    return request


def _metric_names(path: Path) -> set[str]:
    return {
        metric["name"]
        for document in otlp_documents(path)
        for resource_metrics in document.get("resourceMetrics", [])
        for scope_metrics in resource_metrics.get("scopeMetrics", [])
        for metric in scope_metrics.get("metrics", [])
    }


def _wait_for_metrics(path: Path, names: set[str], serve: ServeProcess) -> None:
    deadline = time.monotonic() + 60.0  # a bound for a hang: the wait ends when they are there
    while not names <= _metric_names(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"{names} not all in {path}\n{serve.log()}")
        time.sleep(0.05)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_an_apps_metrics_are_forwarded_to_serves_destination(tmp_path: Path, protocol: str) -> None:
    # The destination is a second ragpulse serve writing what it receives to its files.
    with ServeProcess(tmp_path, "--no-evaluate", name="backend") as backend:
        target = f"http://{backend.grpc_endpoint}" if protocol == "grpc" else backend.http_endpoint
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": target, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
        with (
            ServeProcess(tmp_path, "--no-evaluate", name="relay", env=env) as relay,
            grpc.insecure_channel(relay.grpc_endpoint) as channel,
        ):
            over_http = httpx.post(
                f"{relay.http_endpoint}/v1/metrics",
                content=_metrics_request("app.requests").SerializeToString(),
                headers=PROTOBUF,
            )
            metrics_service_pb2_grpc.MetricsServiceStub(channel).Export(
                _metrics_request("app.errors"), timeout=10
            )
            _wait_for_metrics(
                tmp_path / "backend-metrics.jsonl", {"app.requests", "app.errors"}, backend
            )

    assert over_http.status_code == 200


def test_a_logs_request_over_the_batch_bound_is_forwarded_cut_below_it(tmp_path: Path) -> None:
    request = ExportLogsServiceRequest()
    scope_logs = request.resource_logs.add().scope_logs.add()
    for n in range(40):
        record = ExportLogsServiceRequest.FromString(_logs_request(0x300 + n, 0x400 + n, "z" * 200))
        scope_logs.log_records.append(record.resource_logs[0].scope_logs[0].log_records[0])
    body = request.SerializeToString()
    bound = 2048
    assert len(body) > 4 * bound
    logs_file = tmp_path / "serve-logs.jsonl"
    with ServeProcess(tmp_path, "--no-evaluate", "--max-export-batch-bytes", str(bound)) as serve:
        response = httpx.post(f"{serve.http_endpoint}/v1/logs", content=body, headers=PROTOBUF)
        records = _wait_for_records(logs_file, serve, count=40)

    assert response.status_code == 200
    assert sorted(str(r["traceId"]) for r in records) == [
        format(0x300 + n, "032x") for n in range(40)
    ]
    per_line = [
        len(scope_logs.get("logRecords", []))
        for document in otlp_documents(logs_file)
        for resource_logs in document.get("resourceLogs", [])
        for scope_logs in resource_logs.get("scopeLogs", [])
    ]
    # Each record's body alone is 200 bytes: a request within the bound holds at most ten.
    assert len(per_line) >= 4
    assert max(per_line) <= bound // 200
