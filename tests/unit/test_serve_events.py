"""serve's own evaluation events: encoded straight to OTLP and relayed with the logs it relays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from ragpulse.outputs.forwarders import SignalFile
from ragpulse.outputs.relay import Relay
from ragpulse.outputs.relayed import LOGS
from ragpulse.serve._byte_budget import ByteBudget
from ragpulse.serve._events import RelayedEventsProvider

TRACE, SPAN = 0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7


def _relay(tmp_path: Path) -> tuple[Relay, ByteBudget, Path]:
    budget = ByteBudget(1 << 20)
    path = tmp_path / "out-logs.jsonl"
    return Relay(LOGS, SignalFile(path, LOGS), budget), budget, path


def _event(**attributes: object) -> LogRecord:
    context = trace.set_span_in_context(
        NonRecordingSpan(SpanContext(TRACE, SPAN, False, TraceFlags(1)))
    )
    return LogRecord(
        context=context,
        severity_number=SeverityNumber.INFO,
        event_name="gen_ai.evaluation.result",
        attributes=attributes,  # type: ignore[arg-type]
    )


def _records(path: Path) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        {**record, "resource": resource["resource"], "scope": scope["scope"]}
        for line in lines
        for resource in line["resourceLogs"]
        for scope in resource["scopeLogs"]
        for record in scope["logRecords"]
    ]


def test_events_leave_with_their_unit_s_trace_their_attributes_and_serve_s_resource(
    tmp_path: Path,
) -> None:
    relay, budget, path = _relay(tmp_path)
    provider = RelayedEventsProvider(Resource.create({"service.name": "ragpulse-serve"}), relay)
    logger = provider.get_logger("ragpulse", "1.2.3")

    for name in ("faithfulness", "groundedness"):
        logger.emit(_event(**{"gen_ai.evaluation.name": name, "score": 0.5, "ok": True, "n": 2}))
    assert relay.delivery.flush(30)
    relay.shutdown(5)

    records = _records(path)
    assert [r["attributes"][0]["value"] for r in records] == [  # type: ignore[index]
        {"stringValue": "faithfulness"},
        {"stringValue": "groundedness"},
    ]
    first = records[0]
    assert first["eventName"] == "gen_ai.evaluation.result"
    assert first["severityNumber"] in (9, "SEVERITY_NUMBER_INFO")
    assert (first["traceId"], first["spanId"]) == (f"{TRACE:032x}", f"{SPAN:016x}")
    assert first["scope"] == {"name": "ragpulse", "version": "1.2.3"}
    values = {a["key"]: a["value"] for a in first["attributes"]}  # type: ignore[attr-defined]
    assert values["score"] == {"doubleValue": 0.5} and values["ok"] == {"boolValue": True}
    assert values["n"] == {"intValue": "2"}
    resource = {a["key"]: a["value"] for a in first["resource"]["attributes"]}  # type: ignore[index]
    assert resource["service.name"] == {"stringValue": "ragpulse-serve"}
    assert budget.used == 0  # held while queued, given back once written


def test_the_log_record_limits_apply_as_in_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT", "4")
    relay, _, path = _relay(tmp_path)
    logger = RelayedEventsProvider(Resource.create({}), relay).get_logger("ragpulse")

    logger.emit(_event(a="abcdefgh", b=("long text", 3), c="dropped"))
    assert relay.delivery.flush(30)
    relay.shutdown(5)

    (record,) = _records(path)
    assert record["droppedAttributesCount"] == 1
    values = {a["key"]: a["value"] for a in record["attributes"]}  # type: ignore[attr-defined]
    assert values == {
        "a": {"stringValue": "abcd"},
        "b": {"arrayValue": {"values": [{"stringValue": "long"}, {"intValue": "3"}]}},
    }


def test_an_attribute_that_cannot_be_encoded_is_left_out_as_the_sdk_does(tmp_path: Path) -> None:
    relay, budget, path = _relay(tmp_path)
    logger = RelayedEventsProvider(Resource.create({}), relay).get_logger("ragpulse")

    logger.emit(_event(bad=object(), kept=1))  # ``bad`` is not an attribute value
    logger.emit(_event(good="yes"))
    assert relay.delivery.flush(30)
    relay.shutdown(5)

    assert [r["attributes"] for r in _records(path)] == [
        [{"key": "kept", "value": {"intValue": "1"}}],
        [{"key": "good", "value": {"stringValue": "yes"}}],
    ]
    assert budget.used == 0


def test_an_event_that_cannot_be_written_is_lost_alone_without_raising(tmp_path: Path) -> None:
    relay, budget, path = _relay(tmp_path)
    logger = RelayedEventsProvider(Resource.create({}), relay).get_logger("ragpulse")

    logger.emit(_event(good="first"))
    broken = _event(good="broken")
    broken.observed_timestamp = "not a time"  # type: ignore[assignment]
    logger.emit(broken)
    logger.emit(_event(good="last"))
    assert relay.delivery.flush(30)
    relay.shutdown(5)

    assert [r["attributes"][0]["value"] for r in _records(path)] == [  # type: ignore[index]
        {"stringValue": "first"},
        {"stringValue": "last"},
    ]
    assert budget.used == 0
