"""``ragpulse serve`` keeps within its bounds: what it forwards fits the destination's limit."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

from servers.otlp_load import CountingSink
from servers.serve_process import ServeProcess

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
DOCUMENT = "The Eiffel Tower is 330 metres tall and stands in Paris. " * 1150  # ~64 KiB


def rag_trace(trace_id: int, document: str = DOCUMENT) -> list[ReadableSpan]:
    """An OpenInference RAG request: root with its answer, a retriever with one document."""
    resource = Resource({"service.name": "rag-app"})
    scope = InstrumentationScope("rag-handler", "1.0.0")

    def span(number: int, parent: int | None, attributes: dict[str, str]) -> ReadableSpan:
        return ReadableSpan(
            name="POST /ask" if parent is None else "retrieve",
            context=SpanContext(trace_id, trace_id << 4 | number, False, TraceFlags(1)),
            parent=SpanContext(trace_id, trace_id << 4 | parent, False, TraceFlags(1))
            if parent
            else None,
            resource=resource,
            attributes=attributes,
            start_time=1_700_000_000_000_000_000 + number,
            end_time=1_700_000_000_100_000_000 - number,
            instrumentation_scope=scope,
        )

    return [
        span(
            1,
            None,
            {
                "openinference.span.kind": "CHAIN",
                "input.value": "How tall is the Eiffel Tower?",
                "output.value": "The Eiffel Tower is 330 metres tall.",
            },
        ),
        span(
            2,
            1,
            {
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.content": document,
            },
        ),
    ]


def post(endpoint: str, spans: list[ReadableSpan]) -> httpx.Response:
    return httpx.post(
        f"{endpoint}/v1/traces",
        content=encode_spans(spans).SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
        timeout=60,
    )


@pytest.mark.parametrize(
    "mode", [("--sample-rate", "0"), ("--no-evaluate",)], ids=["converted", "passed-through"]
)
def test_requests_sent_separately_are_never_forwarded_as_one_past_the_byte_bound(
    tmp_path: Path, mode: tuple[str, ...]
) -> None:
    # A slow destination lets the 100 small requests pile up behind its first export.
    with (
        CountingSink(max_spans_per_s=100) as sink,
        ServeProcess(
            tmp_path,
            *mode,
            "--max-export-batch-bytes",
            str(1 * MiB),
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url},
        ) as serve,
    ):
        for trace_id in range(1, 101):
            assert post(serve.http_endpoint, rag_trace(trace_id)).status_code == 200
        assert sink.wait_for(200, timeout=120), serve.log()
    assert sink.spans == 200
    assert max(sink.request_bytes) <= 1 * MiB
    assert sum(sink.request_bytes) > 6 * MiB


@pytest.mark.parametrize(
    "mode", [("--sample-rate", "0"), ("--no-evaluate",)], ids=["converted", "passed-through"]
)
def test_one_request_larger_than_the_byte_bound_is_forwarded_cut_below_it(
    tmp_path: Path, mode: tuple[str, ...]
) -> None:
    spans = [span for trace_id in range(1, 41) for span in rag_trace(trace_id)]
    with (
        CountingSink() as sink,
        ServeProcess(
            tmp_path,
            *mode,
            "--max-export-batch-bytes",
            str(1 * MiB),
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url},
        ) as serve,
    ):
        assert post(serve.http_endpoint, spans).status_code == 200
        assert sink.wait_for(80, timeout=120), serve.log()
    assert sink.spans == 80
    assert max(sink.request_bytes) <= 1 * MiB
