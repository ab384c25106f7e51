"""``ragpulse serve`` as a real process: the retrieval spans of an evaluated trace leave it with
their documents' scores, each span with its own documents; other traces' go on unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from ragpulse import semconv
from servers.rag_traces import documents_of, post_spans
from servers.serve_process import ExportedSpan, ServeProcess

pytestmark = pytest.mark.integration

METRICS = "groundedness,context_relevance,context_precision,context_utilisation"
QUESTION = "How tall is the Eiffel Tower?"
TOWER = "The Eiffel Tower is 330 metres tall and stands in Paris."
BRIDGE = "The Golden Gate Bridge opened in 1937."
LOUVRE = "The Louvre is the most visited museum in the world."
ANSWER = "The Eiffel Tower is 330 metres tall."
# Low 64 bits small: in the sample at any positive rate; all ones: in none below 1.
SAMPLED = 0x5A << 64 | 0x1
UNSAMPLED = 0x5B << 64 | 0xFFFFFFFFFFFFFFFF


def oi_trace(trace_id: int) -> list[ReadableSpan]:
    """An OpenInference request from another language: root, two retrievers, in any order."""
    resource = Resource({"service.name": "node-rag"})
    scope = InstrumentationScope("rag-handler", "1.0.0")

    def span(name: str, number: int, parent: int | None, attributes: dict[str, Any]) -> Any:
        span_id = (trace_id << 4 | number) & 0xFFFFFFFFFFFFFFFF
        parent_id = (trace_id << 4 | parent) & 0xFFFFFFFFFFFFFFFF if parent else None
        return ReadableSpan(
            name=name,
            context=SpanContext(trace_id, span_id, False, TraceFlags(1)),
            parent=SpanContext(trace_id, parent_id, False, TraceFlags(1)) if parent_id else None,
            resource=resource,
            attributes=attributes,
            kind=SpanKind.SERVER if parent is None else SpanKind.INTERNAL,
            start_time=1_700_000_000_000_000_000 + number,
            end_time=1_700_000_000_100_000_000 - number,
            instrumentation_scope=scope,
        )

    def retriever(documents: list[tuple[str, str]]) -> dict[str, Any]:
        attributes: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
        for i, (doc_id, text) in enumerate(documents):
            attributes[f"retrieval.documents.{i}.document.id"] = doc_id
            attributes[f"retrieval.documents.{i}.document.content"] = text
        return attributes

    return [
        span("landmarks", 2, 1, retriever([("bridge", BRIDGE), ("tower", TOWER)])),
        span("museums", 3, 1, retriever([("louvre", LOUVRE)])),
        span(
            "POST /ask",
            1,
            None,
            {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": ANSWER},
        ),
    ]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeProcess]:
    with ServeProcess(tmp_path, "--sample-rate", "0.5", "--metrics", METRICS) as process:
        yield process


def of_trace(spans: list[ExportedSpan], trace_id: int) -> dict[str, ExportedSpan]:
    mine = [s for s in spans if s.trace_id == format(trace_id, "032x")]
    assert len({s.span_id for s in mine}) == len(mine), "a span was exported twice"
    return {s.name: s for s in mine}


def test_each_retrieval_span_leaves_serve_with_its_own_documents_scores(
    serve: ServeProcess,
) -> None:
    assert post_spans(serve.http_endpoint, oi_trace(SAMPLED)).status_code == 200
    spans = of_trace(serve.wait_for_spans(lambda got: len(of_trace(got, SAMPLED)) == 3), SAMPLED)
    unit = spans["POST /ask"]
    assert unit.attributes[semconv.EVAL_STATUS] == "ok"
    listed = {row["id"]: row for row in json.loads(unit.attributes[semconv.EVAL_CONTEXTS])}

    def expected(doc_id: str) -> dict[str, Any]:
        row = listed[doc_id]
        return {"score": row["relevance"], "relevant": row["relevant"], "used": row["used"]}

    assert documents_of(spans["landmarks"].attributes) == {
        0: expected("bridge"),
        1: expected("tower"),
    }
    assert documents_of(spans["museums"].attributes) == {0: expected("louvre")}
    assert documents_of(spans["landmarks"].attributes)[1]["used"] is True


def test_retrieval_span_of_an_unsampled_trace_leaves_serve_unchanged(
    serve: ServeProcess,
) -> None:
    assert post_spans(serve.http_endpoint, oi_trace(UNSAMPLED)).status_code == 200
    spans = of_trace(
        serve.wait_for_spans(lambda got: len(of_trace(got, UNSAMPLED)) == 3), UNSAMPLED
    )
    for span in spans.values():
        assert not [key for key in span.attributes if key.startswith(semconv.EVAL_PREFIX)]
