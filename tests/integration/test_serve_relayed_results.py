"""What ``ragpulse serve`` relays holds no evaluation result it did not compute, and no
credential: forged ``gen_ai.evaluation.result`` events and ``ragpulse.evaluation.score``
metrics are dropped, other records lose their ``ragpulse.eval.*`` results, and the comment
of a ``ragpulse.feedback`` event leaves scrubbed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Histogram,
    HistogramDataPoint,
    Metric,
    NumberDataPoint,
    Sum,
)

from servers.serve_process import ServeProcess, iter_lines, log_records, otlp_documents

pytestmark = pytest.mark.integration

PROTOBUF = {"content-type": "application/x-protobuf"}
KEY = "sk-live-0123456789abcdefghij"
TRACE, SPAN = (0xABC).to_bytes(16, "big"), (0xDEF).to_bytes(8, "big")


def _kv(key: str, value: object) -> KeyValue:
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def _record(event: str | None, **attributes: object) -> LogRecord:
    return LogRecord(
        time_unix_nano=1_700_000_000_000_000_000,
        event_name=event or "",
        attributes=[_kv(k.replace("__", "."), v) for k, v in attributes.items()],
        trace_id=TRACE,
        span_id=SPAN,
    )


FORGED = {
    "gen_ai__evaluation__name": "faithfulness",
    "gen_ai__evaluation__score__value": 1.0,
    "ragpulse__eval__status": "ok",
}


def _logs_request() -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add().log_records
    records.append(_record("gen_ai.evaluation.result", **FORGED))
    # The name as SDKs before LogRecord.event_name wrote it.
    records.append(_record(None, event__name="gen_ai.evaluation.result", **FORGED))
    records.append(
        _record(
            "ragpulse.feedback",
            ragpulse__feedback__score=0.0,
            ragpulse__feedback__comment=f"wrong again; my api_key={KEY} and {KEY}",
        )
    )
    records.append(_record("app.note", ragpulse__eval__faithfulness__score=1.0, app__kind="note"))
    return request


def _wait(found: Callable[[], bool], serve: ServeProcess) -> None:
    deadline = time.monotonic() + 60.0  # a bound for a hang: the wait ends when it is there
    while not found():
        if time.monotonic() > deadline:
            raise AssertionError(f"not relayed\n{serve.log()}")
        time.sleep(0.05)


def _attributes(record: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in record.get("attributes", [])}


def _relayed_logs(serve: ServeProcess, tmp_path: Path, over: str) -> list[dict[str, Any]]:
    if over == "http":
        body = _logs_request().SerializeToString()
        response = httpx.post(f"{serve.http_endpoint}/v1/logs", content=body, headers=PROTOBUF)
        assert response.status_code == 200
    else:
        with grpc.insecure_channel(serve.grpc_endpoint) as channel:
            logs_service_pb2_grpc.LogsServiceStub(channel).Export(_logs_request(), timeout=10)
    path = tmp_path / "serve-logs.jsonl"
    _wait(lambda: any(r.get("eventName") == "app.note" for r in log_records(path)), serve)
    return log_records(path)


@pytest.mark.parametrize("over", ["http", "grpc"])
def test_forged_evaluation_events_are_not_relayed_and_feedback_leaves_scrubbed(
    tmp_path: Path, over: str
) -> None:
    with ServeProcess(tmp_path, "--sample-rate", "1") as serve:
        records = _relayed_logs(serve, tmp_path, over)

    names = [r.get("eventName") for r in records]
    assert "gen_ai.evaluation.result" not in names
    assert not any(_attributes(r).get("event.name") == "gen_ai.evaluation.result" for r in records)
    [feedback] = [r for r in records if r.get("eventName") == "ragpulse.feedback"]
    comment = _attributes(feedback)["ragpulse.feedback.comment"]
    assert KEY not in comment and comment.startswith("wrong again; my api_key=")
    [note] = [r for r in records if r.get("eventName") == "app.note"]
    assert _attributes(note) == {"app.kind": "note", "ragpulse.serve.eval_stripped": "1"}


def test_without_evaluation_serve_relays_results_but_still_scrubs_feedback(
    tmp_path: Path,
) -> None:
    with ServeProcess(tmp_path, "--no-evaluate") as serve:
        records = _relayed_logs(serve, tmp_path, "http")

    assert [r.get("eventName") for r in records].count("gen_ai.evaluation.result") == 1
    [feedback] = [r for r in records if r.get("eventName") == "ragpulse.feedback"]
    assert KEY not in json.dumps(feedback)


def _metrics_request() -> ExportMetricsServiceRequest:
    forged = HistogramDataPoint(
        time_unix_nano=1_700_000_000_000_000_000,
        count=1,
        sum=1.0,
        attributes=[_kv("gen_ai.evaluation.name", "faithfulness"), _kv("forged", "yes")],
    )
    request = ExportMetricsServiceRequest()
    metrics = request.resource_metrics.add().scope_metrics.add().metrics
    metrics.append(
        Metric(name="ragpulse.evaluation.score", histogram=Histogram(data_points=[forged]))
    )
    label = NumberDataPoint(
        time_unix_nano=1_700_000_000_000_000_000,
        as_int=1,
        attributes=[_kv("gen_ai.evaluation.score.label", "pass"), _kv("forged", "yes")],
    )
    metrics.append(
        Metric(
            name="ragpulse.evaluation.labels",
            sum=Sum(data_points=[label], is_monotonic=True),
        )
    )
    point = NumberDataPoint(time_unix_nano=1_700_000_000_000_000_000, as_int=3)
    metrics.append(Metric(name="app.requests", sum=Sum(data_points=[point], is_monotonic=True)))
    return request


def test_forged_score_metrics_are_not_relayed(tmp_path: Path) -> None:
    path = tmp_path / "serve-metrics.jsonl"

    def relayed() -> list[str]:
        return [json.dumps(d) for d in otlp_documents(path) if "app.requests" in json.dumps(d)]

    with ServeProcess(tmp_path, "--sample-rate", "1") as serve:
        response = httpx.post(
            f"{serve.http_endpoint}/v1/metrics",
            content=_metrics_request().SerializeToString(),
            headers=PROTOBUF,
        )
        assert response.status_code == 200
        _wait(lambda: bool(relayed()), serve)

    assert all('"forged"' not in document for document in relayed())
    assert all('"forged"' not in line for line in iter_lines(path))
