"""The rotel test sink receives what the plain OpenTelemetry SDK exports, field for field.

These tests prove the receiver that the other integration tests rely on: if a span reached
rotel, ``RotelSink`` reports it with the ids, parent, typed attributes, events, links, status,
resource and scope that the exporter sent, over OTLP/HTTP and OTLP/gRPC, and log records too.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from servers.rotel_sink import ReceivedSpan, RotelSink, free_ports

pytestmark = pytest.mark.integration

ROTEL_KIT = Path(__file__).resolve().parents[2] / "collector-config" / "rotel"
RESOURCE = Resource.create({"service.name": "sink-proof", "deployment.environment": "test"})


def _provider(exporter: SpanExporter) -> TracerProvider:
    # SimpleSpanProcessor exports on span end, so a test never depends on a batch timer.
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def http_tracer(rotel_sink: RotelSink) -> Iterator[trace.Tracer]:
    provider = _provider(HttpSpans(endpoint=rotel_sink.http_traces_endpoint))
    yield provider.get_tracer("sink.proof", "1.2.3")
    provider.shutdown()


@pytest.fixture
def grpc_tracer(rotel_sink: RotelSink) -> Iterator[trace.Tracer]:
    provider = _provider(GrpcSpans(endpoint=rotel_sink.grpc_endpoint, insecure=True))
    yield provider.get_tracer("sink.proof", "1.2.3")
    provider.shutdown()


def _named(sink: RotelSink, name: str) -> ReceivedSpan:
    return sink.wait_for_span(lambda span: span.name == name)


def _hex_span_id(span: trace.Span) -> str:
    return format(span.get_span_context().span_id, "016x")


def _hex_trace_id(span: trace.Span) -> str:
    return format(span.get_span_context().trace_id, "032x")


def test_http_span_attributes_keep_their_otlp_types(
    rotel_sink: RotelSink, http_tracer: trace.Tracer
) -> None:
    attributes: dict[str, AttributeValue] = {
        "score.double": 0.75,
        "score.whole_double": 1.0,
        "claims.int": 4,
        "flag.bool": True,
        "label.string": "pass",
        "doubles": [0.25, 1.0],
        "ints": [1, 2, 3],
        "strings": ["a", "b"],
        "bools": [True, False],
    }
    with http_tracer.start_as_current_span("typed", attributes=attributes):
        pass

    received = _named(rotel_sink, "typed").attributes

    assert received == attributes
    assert type(received["score.whole_double"]) is float
    assert type(received["claims.int"]) is int
    assert type(received["flag.bool"]) is bool
    assert [type(v) for v in received["doubles"]] == [float, float]


def test_grpc_span_arrives_with_the_ids_the_sdk_assigned(
    rotel_sink: RotelSink, grpc_tracer: trace.Tracer
) -> None:
    with grpc_tracer.start_as_current_span("over-grpc", attributes={"score": 0.5}) as span:
        pass

    received = _named(rotel_sink, "over-grpc")

    assert received.span_id == _hex_span_id(span)
    assert received.trace_id == _hex_trace_id(span)
    assert received.attributes == {"score": 0.5}


def test_child_span_names_its_parent_and_root_has_none(
    rotel_sink: RotelSink, http_tracer: trace.Tracer
) -> None:
    with (
        http_tracer.start_as_current_span("root") as root,
        http_tracer.start_as_current_span("child"),
    ):
        pass

    child = _named(rotel_sink, "child")
    received_root = _named(rotel_sink, "root")

    assert child.parent_span_id == _hex_span_id(root)
    assert child.trace_id == received_root.trace_id
    assert received_root.parent_span_id is None


def test_span_events_arrive_in_order_with_attributes(
    rotel_sink: RotelSink, http_tracer: trace.Tracer
) -> None:
    with http_tracer.start_as_current_span("with-events") as span:
        span.add_event("retrieved", {"count": 5})
        span.add_event("answered", {"chars": 120, "streamed": False})

    events = _named(rotel_sink, "with-events").events

    assert [(e.name, dict(e.attributes)) for e in events] == [
        ("retrieved", {"count": 5}),
        ("answered", {"chars": 120, "streamed": False}),
    ]
    assert events[0].time_unix_nano <= events[1].time_unix_nano


def test_span_links_arrive_with_target_ids_and_attributes(
    rotel_sink: RotelSink, http_tracer: trace.Tracer
) -> None:
    with http_tracer.start_as_current_span("target") as target:
        pass
    link = Link(target.get_span_context(), {"link.kind": "evaluates"})
    with http_tracer.start_as_current_span("carrier", links=[link]):
        pass

    (received_link,) = _named(rotel_sink, "carrier").links

    assert received_link.span_id == _hex_span_id(target)
    assert received_link.trace_id == _hex_trace_id(target)
    assert received_link.attributes == {"link.kind": "evaluates"}


def test_kind_status_and_times_arrive(rotel_sink: RotelSink, http_tracer: trace.Tracer) -> None:
    with http_tracer.start_as_current_span("failing", kind=SpanKind.CLIENT) as span:
        span.set_status(Status(StatusCode.ERROR, "judge unavailable"))

    received = _named(rotel_sink, "failing")

    assert (received.kind_name, received.status_name) == ("CLIENT", "ERROR")
    assert received.status_message == "judge unavailable"
    assert 0 < received.start_time_unix_nano <= received.end_time_unix_nano


def test_resource_and_scope_arrive_with_each_span(
    rotel_sink: RotelSink, http_tracer: trace.Tracer
) -> None:
    with http_tracer.start_as_current_span("scoped"):
        pass

    received = _named(rotel_sink, "scoped")

    assert received.resource["service.name"] == "sink-proof"
    assert received.resource["deployment.environment"] == "test"
    assert (received.scope_name, received.scope_version) == ("sink.proof", "1.2.3")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_log_records_arrive_with_event_name_attributes_and_span_context(
    rotel_sink: RotelSink, http_tracer: trace.Tracer, protocol: str
) -> None:
    exporter: LogRecordExporter = (
        HttpLogs(endpoint=rotel_sink.http_logs_endpoint)
        if protocol == "http"
        else GrpcLogs(endpoint=rotel_sink.grpc_endpoint, insecure=True)
    )
    logger_provider = LoggerProvider(resource=RESOURCE)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = logger_provider.get_logger("sink.proof.logs")
    with http_tracer.start_as_current_span("evaluated") as span:
        logger.emit(
            event_name="gen_ai.evaluation.result",
            attributes={"gen_ai.evaluation.name": "groundedness", "score": 0.75},
            body="grounded enough",
        )
    logger_provider.shutdown()

    (record,) = rotel_sink.wait_for_logs(lambda got: len(got) == 1)

    assert record.event_name == "gen_ai.evaluation.result"
    assert record.attributes == {"gen_ai.evaluation.name": "groundedness", "score": 0.75}
    assert record.body == "grounded enough"
    assert (record.trace_id, record.span_id) == (_hex_trace_id(span), _hex_span_id(span))
    assert record.resource["service.name"] == "sink-proof"


def test_forwarding_sink_records_and_passes_spans_on_unchanged(rotel_sink: RotelSink) -> None:
    with RotelSink(forward_to=rotel_sink.http_endpoint) as forwarder:
        provider = _provider(HttpSpans(endpoint=forwarder.http_traces_endpoint))
        with provider.get_tracer("sink.proof").start_as_current_span(
            "forwarded", attributes={"score": 0.25, "claims": 3}
        ) as span:
            pass
        provider.shutdown()

        at_forwarder = _named(forwarder, "forwarded")
        at_backend = _named(rotel_sink, "forwarded")

    assert at_forwarder == at_backend
    assert at_backend.span_id == _hex_span_id(span)
    assert at_backend.attributes == {"score": 0.25, "claims": 3}


def test_wait_for_spans_fails_naming_what_arrived(
    rotel_sink: RotelSink, http_tracer: trace.Tracer
) -> None:
    with http_tracer.start_as_current_span("only-this"):
        pass
    rotel_sink.wait_for_span(lambda span: span.name == "only-this")

    with pytest.raises(AssertionError, match="only-this"):
        rotel_sink.wait_for_span(lambda span: span.name == "never-sent", timeout=0.3)


def _env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key: value for key, value in pairs if not key.startswith("#")}


@pytest.mark.parametrize("backend", ["phoenix", "jaeger", "tempo"])
def test_collector_config_rotel_forwards_traces_to_its_backend(
    rotel_sink: RotelSink, rotel_binary: Path, tmp_path: Path, backend: str
) -> None:
    # The kit's run.sh, with the backend played by a sink on the protocol the env file names.
    settings = _env_file(ROTEL_KIT / f"{backend}.env")
    (exporter_name,) = settings["ROTEL_EXPORTERS_TRACES"].split(",")
    prefix = f"ROTEL_EXPORTER_{exporter_name.upper()}_"
    backend_endpoint = (
        rotel_sink.grpc_endpoint
        if settings[prefix + "PROTOCOL"] == "grpc"
        else rotel_sink.http_endpoint
    )
    http_port, grpc_port = free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTEL_")}
    env.update(
        {
            "ROTEL_AGENT": str(rotel_binary),
            "ROTEL_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{grpc_port}",
            "ROTEL_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
            prefix + "ENDPOINT": backend_endpoint,
        }
    )
    flags = ["--pid-file", str(tmp_path / "pid"), "--log-file", str(tmp_path / "log")]
    with subprocess.Popen(
        ["bash", str(ROTEL_KIT / "run.sh"), backend, *flags],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as collector:
        try:
            _wait_for_port(http_port, collector)
            provider = _provider(HttpSpans(endpoint=f"http://127.0.0.1:{http_port}/v1/traces"))
            with provider.get_tracer("sink.proof").start_as_current_span(
                f"via-{backend}", attributes={"score": 0.5}
            ) as span:
                pass
            provider.shutdown()

            received = _named(rotel_sink, f"via-{backend}")
        finally:
            collector.terminate()

    assert received.span_id == _hex_span_id(span)
    assert received.attributes == {"score": 0.5}


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"collector exited with {process.returncode}"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"collector did not listen on {port} within {timeout}s")
