"""``ragpulse serve`` as a real process: OTLP in over HTTP and gRPC, scored spans out once."""

from __future__ import annotations

import gzip
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from ragpulse import generation, rag, retrieval, semconv
from ragpulse.outputs.files import otlp_json
from servers.serve_process import ServeProcess, by_span_id, free_port

pytestmark = pytest.mark.integration

CONTEXT = "The Eiffel Tower is 330 metres tall and stands in Paris."
ANSWER = "The Eiffel Tower is 330 metres tall."
JUDGE_ENV = {"RAGPULSE_TEST_JUDGE_LATENCY": "1.0"}
SLOW_JUDGE = "tests.servers.fixed_latency_judge:FixedLatencyJudge"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeProcess]:
    with ServeProcess(tmp_path, "--sample-rate", "1") as process:
        yield process


def _oi_trace(trace_id: int) -> dict[str, ReadableSpan]:
    """An OpenInference RAG request from another language: root, retriever, LLM."""
    resource = Resource({"service.name": "node-rag"})
    scope = InstrumentationScope("rag-handler", "1.0.0")

    def span(name: str, number: int, parent: int | None, attributes: dict[str, Any]) -> Any:
        # Span ids unique across traces, as real generators make them.
        span_id = (trace_id << 4 | number) & 0xFFFFFFFFFFFFFFFF
        parent = (trace_id << 4 | parent) & 0xFFFFFFFFFFFFFFFF if parent else None
        return ReadableSpan(
            name=name,
            context=SpanContext(trace_id, span_id, False, TraceFlags(1)),
            parent=SpanContext(trace_id, parent, False, TraceFlags(1)) if parent else None,
            resource=resource,
            attributes=attributes,
            kind=SpanKind.SERVER if parent is None else SpanKind.INTERNAL,
            start_time=1_700_000_000_000_000_000 + number,
            end_time=1_700_000_000_100_000_000 - number,
            instrumentation_scope=scope,
        )

    return {
        "root": span(
            "POST /ask",
            1,
            None,
            {
                "openinference.span.kind": "CHAIN",
                "input.value": "How tall is the Eiffel Tower?",
                "output.value": ANSWER,
            },
        ),
        "retriever": span(
            "retrieve",
            2,
            1,
            {
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.content": CONTEXT,
                "retrieval.documents.0.document.id": "doc-1",
            },
        ),
        "llm": span(
            "llm",
            3,
            1,
            {
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": ANSWER,
            },
        ),
    }


def _unit(spans: list[Any], trace_id: int) -> Any:
    (unit,) = [
        s
        for s in spans
        if s.trace_id == format(trace_id, "032x") and s.attributes.get(semconv.EVAL_STATUS)
    ]
    return unit


def test_capture_only_python_app_gets_scores_on_its_unit_span(
    serve: ServeProcess, route_spans: Any
) -> None:
    exporter = HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")
    route_spans(SimpleSpanProcessor(exporter))

    @retrieval
    def search(question: str) -> list[str]:
        return [CONTEXT]

    @generation
    def generate(question: str, documents: list[str]) -> str:
        return ANSWER

    @rag
    def answer(question: str) -> str:
        return generate(question, search(question))

    answer("How tall is the Eiffel Tower?")

    spans = serve.wait_for_spans(
        lambda spans: any(s.attributes.get(semconv.EVAL_STATUS) == "ok" for s in spans)
    )
    (unit,) = [s for s in spans if s.attributes.get(semconv.RAG_UNIT)]
    assert unit.attributes["ragpulse.eval.groundedness.score"] == 1.0
    assert unit.attributes["ragpulse.eval.faithfulness.score"] == 1.0
    assert len(spans) == 3
    assert all(len(copies) == 1 for copies in by_span_id(spans).values())


def test_openinference_trace_over_grpc_root_first_in_two_batches_is_evaluated(
    serve: ServeProcess,
) -> None:
    trace = _oi_trace(0xABC)
    exporter = GrpcSpanExporter(endpoint=serve.grpc_endpoint, insecure=True)

    assert exporter.export([trace["root"]]) is SpanExportResult.SUCCESS
    assert exporter.export([trace["llm"], trace["retriever"]]) is SpanExportResult.SUCCESS

    spans = serve.wait_for_spans(lambda spans: len(spans) == 3)
    unit = _unit(spans, 0xABC)
    assert unit.name == "POST /ask"
    assert unit.attributes[semconv.EVAL_STATUS] == "ok"
    assert unit.attributes["ragpulse.eval.groundedness.score"] == 1.0
    assert unit.resource["service.name"] == "node-rag"
    assert unit.scope == "rag-handler"
    assert unit.kind == "SPAN_KIND_SERVER"


def test_otlp_json_gzip_request_is_accepted_and_answered_in_json(serve: ServeProcess) -> None:
    trace = _oi_trace(0xDEF)
    body = gzip.compress(otlp_json(encode_spans(list(trace.values()))).encode())

    response = httpx.post(
        f"{serve.http_endpoint}/v1/traces",
        content=body,
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {}
    spans = serve.wait_for_spans(lambda spans: len(spans) == 3)
    assert _unit(spans, 0xDEF).attributes[semconv.EVAL_STATUS] == "ok"


def test_spans_with_invalid_ids_are_reported_as_partial_success(serve: ServeProcess) -> None:
    request = encode_spans(list(_oi_trace(0x123).values()))
    request.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x00"

    response = httpx.post(
        f"{serve.http_endpoint}/v1/traces",
        content=request.SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )

    assert response.status_code == 200
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 1
    assert "invalid" in answer.partial_success.error_message


def test_a_body_that_is_not_otlp_is_a_400_not_a_retry(serve: ServeProcess) -> None:
    response = httpx.post(
        f"{serve.http_endpoint}/v1/traces",
        content=b"\xff\xfe not protobuf",
        headers={"content-type": "application/x-protobuf"},
    )

    assert response.status_code == 400
    assert status_pb2.Status.FromString(response.content).message


def test_with_evaluation_off_every_span_goes_out_as_it_came(tmp_path: Path) -> None:
    trace = _oi_trace(0x66)
    with ServeProcess(tmp_path, "--no-evaluate") as serve:
        exporter = HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")
        assert exporter.export(list(trace.values())) is SpanExportResult.SUCCESS

        spans = serve.wait_for_spans(lambda spans: len(spans) == 3)
    assert not any(semconv.EVAL_STATUS in s.attributes for s in spans)
    root = next(s for s in spans if s.name == "POST /ask")
    assert root.attributes["output.value"] == ANSWER


def test_pipeline_settings_come_from_ragpulse_variables_and_options_win(tmp_path: Path) -> None:
    env = {"RAGPULSE_SAMPLE_RATE": "0"}
    with ServeProcess(tmp_path, name="from-env", env=env) as unsampled:
        exporter = HttpSpanExporter(endpoint=f"{unsampled.http_endpoint}/v1/traces")
        assert exporter.export(list(_oi_trace(0x31).values())) is SpanExportResult.SUCCESS
        spans = unsampled.wait_for_spans(lambda spans: len(spans) == 3)
    assert not any(semconv.EVAL_STATUS in s.attributes for s in spans)

    with ServeProcess(tmp_path, "--sample-rate", "1", name="option", env=env) as sampled:
        exporter = HttpSpanExporter(endpoint=f"{sampled.http_endpoint}/v1/traces")
        assert exporter.export(list(_oi_trace(0x32).values())) is SpanExportResult.SUCCESS
        spans = sampled.wait_for_spans(lambda spans: len(spans) == 3)
    assert _unit(spans, 0x32).attributes[semconv.EVAL_STATUS] == "ok"


def test_unsupported_content_type_is_415_and_an_oversized_body_413(tmp_path: Path) -> None:
    with ServeProcess(tmp_path) as serve:
        url = f"{serve.http_endpoint}/v1/traces"
        wrong_type = httpx.post(url, content=b"{}", headers={"content-type": "text/plain"})
        oversized = httpx.post(
            url,
            content=gzip.compress(b"\0" * (40 * 1024 * 1024)),  # inflates past the 32 MiB limit
            headers={"content-type": "application/x-protobuf", "content-encoding": "gzip"},
        )

    assert wrong_type.status_code == 415
    assert oversized.status_code == 413


def test_scored_spans_are_forwarded_over_otlp_grpc_when_the_protocol_says_so(
    tmp_path: Path,
) -> None:
    # The destination is a second ragpulse serve with evaluation off, writing what it receives.
    with ServeProcess(tmp_path, "--no-evaluate", name="backend") as backend:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{backend.grpc_endpoint}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        }
        with ServeProcess(tmp_path, "--sample-rate", "1", name="relay", env=env) as relay:
            exporter = HttpSpanExporter(endpoint=f"{relay.http_endpoint}/v1/traces")
            assert exporter.export(list(_oi_trace(0x44).values())) is SpanExportResult.SUCCESS
            spans = backend.wait_for_spans(lambda spans: len(spans) == 3)
    assert _unit(spans, 0x44).attributes[semconv.EVAL_STATUS] == "ok"
    assert all(len(copies) == 1 for copies in by_span_id(spans).values())


def test_healthz_and_readyz_answer_while_serving(serve: ServeProcess) -> None:
    assert httpx.get(f"{serve.http_endpoint}/healthz").status_code == 200
    assert httpx.get(f"{serve.http_endpoint}/readyz").status_code == 200


def test_full_buffer_refuses_http_with_429_retry_after_and_grpc_with_retry_info(
    tmp_path: Path,
) -> None:
    # Nothing listens at the destination, so nothing leaves and the buffer stays full.
    dead = f"http://127.0.0.1:{free_port()}"
    with ServeProcess(
        tmp_path, "--buffer-bytes", "3000", env={"OTEL_EXPORTER_OTLP_ENDPOINT": dead}
    ) as serve:
        body = encode_spans(list(_oi_trace(0x1).values())).SerializeToString()
        headers = {"content-type": "application/x-protobuf"}
        url = f"{serve.http_endpoint}/v1/traces"
        first = httpx.post(url, content=body * 1, headers=headers)
        responses = [httpx.post(url, content=body, headers=headers) for _ in range(10)]

        assert first.status_code == 200
        refused = [r for r in responses if r.status_code == 429]
        assert refused, [r.status_code for r in responses]
        assert int(refused[0].headers["retry-after"]) >= 1

        with grpc.insecure_channel(serve.grpc_endpoint) as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            with pytest.raises(grpc.RpcError) as caught:
                stub.Export(encode_spans(list(_oi_trace(0x2).values())), timeout=5)
        error = caught.value
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        trailers = dict(error.trailing_metadata())
        status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
        retry_info = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(retry_info)
        assert retry_info.retry_delay.seconds >= 1
        serve.kill()


def test_saturated_judge_forwards_units_skipped_instead_of_refusing(tmp_path: Path) -> None:
    with ServeProcess(
        tmp_path,
        "--judge",
        SLOW_JUDGE,
        "--concurrency",
        "1",
        "--max-queue-size",
        "1",
        "--sample-rate",
        "1",
        env=JUDGE_ENV,
    ) as serve:
        traces = [_oi_trace(0x500 + i) for i in range(6)]
        exporter = HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")
        assert exporter.export([s for t in traces for s in t.values()]) is SpanExportResult.SUCCESS

        spans = serve.wait_for_spans(lambda spans: len(spans) == 18, timeout=30)
    statuses = [
        s.attributes[semconv.EVAL_STATUS] for s in spans if semconv.EVAL_STATUS in s.attributes
    ]
    assert len(statuses) == 6
    assert "skipped" in statuses and "ok" in statuses
    assert all(len(copies) == 1 for copies in by_span_id(spans).values())


def test_sigterm_forwards_units_still_assembling_and_exits_zero(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, "--assembly-timeout", "60", "--sample-rate", "1").start()
    try:
        trace = _oi_trace(0x77)
        exporter = HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")
        # The root alone: its record is incomplete, so it waits in assembly.
        assert exporter.export([trace["root"]]) is SpanExportResult.SUCCESS
        assert serve.spans() == []

        assert serve.terminate() == 0
    finally:
        serve.stop()
    assert [s.name for s in serve.spans()] == ["POST /ask"]
    assert '"drained"' in serve.log()


def test_sigterm_waits_for_evaluations_in_flight(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path, "--judge", SLOW_JUDGE, "--sample-rate", "1", env=JUDGE_ENV
    ).start()
    try:
        exporter = HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")
        assert exporter.export(list(_oi_trace(0x88).values())) is SpanExportResult.SUCCESS

        assert serve.terminate() == 0
    finally:
        serve.stop()
    spans = serve.spans()
    assert len(spans) == 3
    assert _unit(spans, 0x88).attributes[semconv.EVAL_STATUS] == "ok"


def test_prometheus_endpoint_shows_relay_counters_and_scores_by_the_apps_service(
    tmp_path: Path,
) -> None:
    port = free_port()
    with ServeProcess(tmp_path, "--prometheus-port", str(port), "--sample-rate", "1") as serve:
        exporter = HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")
        assert exporter.export(list(_oi_trace(0x99).values())) is SpanExportResult.SUCCESS
        serve.wait_for_spans(lambda spans: len(spans) == 3)

        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    assert re.search(r'ragpulse_serve_spans_received_total\{[^}]*protocol="http"[^}]*\} 3\.0', text)
    assert "ragpulse_serve_buffer_bytes" in text
    # Scores are series of the app that sent the trace, not of the relay.
    assert re.search(r'ragpulse_evaluation_score_count\{[^}]*service_name="node-rag"', text)
    # And so are the labels the alerts count: the one evaluation's faithfulness, once (the
    # offline judge scores groundedness unlabelled).
    labels = re.findall(
        r'ragpulse_evaluation_labels_total\{gen_ai_evaluation_name="faithfulness",'
        r'gen_ai_evaluation_score_label="(pass|fail)",[^}]*service_name="node-rag"[^}]*\} (\S+)',
        text,
    )
    assert sorted(float(value) for _, value in labels) == [0.0, 1.0]


def test_evaluation_events_and_metrics_are_written_beside_the_traces(tmp_path: Path) -> None:
    with ServeProcess(tmp_path, "--sample-rate", "1", "--metric-export-interval", "0.5") as serve:
        exporter = HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")
        assert exporter.export(list(_oi_trace(0xAA).values())) is SpanExportResult.SUCCESS
        serve.wait_for_spans(lambda spans: len(spans) == 3)
        assert serve.terminate() == 0
    logs = (tmp_path / "serve-logs.jsonl").read_text()
    metrics = (tmp_path / "serve-metrics.jsonl").read_text()
    assert "gen_ai.evaluation.result" in logs
    assert "ragpulse.evaluation.score" in metrics
    assert json.loads(logs.splitlines()[0])["resourceLogs"]


def _waiting_unit_and_parts(trace_id: int, parts: int) -> list[ReadableSpan]:
    """A ``@rag`` unit that reported more contexts than ever arrive, then ``parts`` retrievals."""
    scope = InstrumentationScope("ragpulse", "0")
    resource = Resource({"service.name": "rag-app"})

    def span(span_id: int, parent: int | None, attributes: dict[str, Any]) -> ReadableSpan:
        return ReadableSpan(
            name="answer" if parent is None else "retrieval search",
            context=SpanContext(trace_id, span_id, False, TraceFlags(1)),
            parent=SpanContext(trace_id, parent, False, TraceFlags(1)) if parent else None,
            resource=resource,
            attributes=attributes,
            start_time=1_700_000_000_000_000_000 + span_id,
            end_time=1_700_000_000_100_000_000 + span_id,
            instrumentation_scope=scope,
        )

    unit = span(
        1,
        None,
        {
            semconv.RAG_UNIT: True,
            semconv.RAG_QUESTION: "How tall is the Eiffel Tower?",
            semconv.RAG_ANSWER: ANSWER,
            semconv.RAG_CONTEXTS_COUNT: 1_000_000,
        },
    )
    retrievals = [
        span(
            2 + number,
            1,
            {
                semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
                "gen_ai.retrieval.documents": json.dumps([{"content": f"Passage {number}."}]),
            },
        )
        for number in range(parts)
    ]
    return [unit, *retrievals]


def test_healthz_answers_while_a_large_trace_is_being_assembled(serve: ServeProcess) -> None:
    body = encode_spans(_waiting_unit_and_parts(0x2000, 2000)).SerializeToString()
    answers: list[int] = []

    def post() -> None:
        response = httpx.post(
            f"{serve.http_endpoint}/v1/traces",
            content=body,
            headers={"content-type": "application/x-protobuf"},
            timeout=600,
        )
        answers.append(response.status_code)

    poster = threading.Thread(target=post)
    poster.start()
    try:
        # Generous against a busy machine; a loop blocked by the request misses it by far.
        healthz = [httpx.get(f"{serve.http_endpoint}/healthz", timeout=5).status_code]
        while poster.is_alive():
            healthz.append(httpx.get(f"{serve.http_endpoint}/healthz", timeout=5).status_code)
    finally:
        poster.join()
    assert set(healthz) == {200}
    assert answers == [200]
    spans = serve.wait_for_spans(lambda spans: len(spans) == 2001, timeout=60)
    assert all(len(copies) == 1 for copies in by_span_id(spans).values())


ANSWER_LENGTH = """
import ragpulse

@ragpulse.metric("serve_answer_length")
def serve_answer_length(record):
    return min(1.0, len(record.answer or "") / 100)
"""


def test_a_metric_module_scores_the_users_metric_on_relayed_traces(tmp_path: Path) -> None:
    module = tmp_path / "serve_metrics.py"
    module.write_text(ANSWER_LENGTH, encoding="utf-8")
    options = ("--metric-module", str(module), "--metrics", "faithfulness,serve_answer_length")
    with ServeProcess(tmp_path, "--sample-rate", "1", *options) as process:
        trace = _oi_trace(0x5E7)
        exporter = HttpSpanExporter(endpoint=f"{process.http_endpoint}/v1/traces")
        assert exporter.export(list(trace.values())) is SpanExportResult.SUCCESS
        spans = process.wait_for_spans(lambda spans: len(spans) == 3)
    unit = _unit(spans, 0x5E7)
    assert unit.attributes["ragpulse.eval.faithfulness.score"] == 1.0
    assert unit.attributes["ragpulse.eval.serve_answer_length.score"] == pytest.approx(
        len(ANSWER) / 100
    )
