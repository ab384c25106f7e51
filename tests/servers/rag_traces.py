"""Small OpenInference RAG traces as a service in another process would send them, and a poster.

``rag_trace(trace_id)`` is a root span (question and answer, the unit ``ragpulse serve``
evaluates) and a retriever span with one document; ``post_spans`` sends spans as one
OTLP/HTTP protobuf request; ``documents_of`` reads the per-document scores a retrieval span
left with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse import semconv

QUESTION = "How tall is the Eiffel Tower?"
DOCUMENT = "The Eiffel Tower is 330 metres tall and stands in Paris."
ANSWER = "The Eiffel Tower is 330 metres tall."


def documents_of(attributes: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
    """A retrieval span's ``ragpulse.eval.context_relevance.documents.N.*``, by N."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in (attributes or {}).items():
        if key.startswith(semconv.EVAL_DOCUMENTS_PREFIX):
            index, field = key[len(semconv.EVAL_DOCUMENTS_PREFIX) :].split(".")
            found.setdefault(int(index), {})[field] = value
    return found


def span_id(trace_id: int, number: int) -> int:
    """The id of span ``number`` of a trace (unique across traces, as generators make them)."""
    return (trace_id << 4 | number) & 0xFFFFFFFFFFFFFFFF


def rag_trace(
    trace_id: int,
    *,
    document: str = DOCUMENT,
    answer: str = ANSWER,
    root_attributes: Mapping[str, Any] | None = None,
) -> list[ReadableSpan]:
    """The root (``POST /ask``) and its retriever (``retrieve``), in that order."""
    resource = Resource({"service.name": "rag-app"})
    scope = InstrumentationScope("rag-handler", "1.0.0")

    def span(number: int, parent: int | None, attributes: dict[str, Any]) -> ReadableSpan:
        return ReadableSpan(
            name="POST /ask" if parent is None else "retrieve",
            context=SpanContext(trace_id, span_id(trace_id, number), False, TraceFlags(1)),
            parent=SpanContext(trace_id, span_id(trace_id, parent), False, TraceFlags(1))
            if parent
            else None,
            resource=resource,
            attributes=attributes,
            start_time=1_700_000_000_000_000_000 + number,
            end_time=1_700_000_000_100_000_000 - number,
            instrumentation_scope=scope,
        )

    root = {
        "openinference.span.kind": "CHAIN",
        "input.value": QUESTION,
        "output.value": answer,
        **(root_attributes or {}),
    }
    retriever = {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.content": document,
    }
    return [span(1, None, root), span(2, 1, retriever)]


def post_spans(endpoint: str, spans: Sequence[ReadableSpan], **options: Any) -> httpx.Response:
    """POST ``spans`` to ``endpoint``/v1/traces as OTLP protobuf."""
    headers = {"content-type": "application/x-protobuf", **options.pop("headers", {})}
    return httpx.post(
        f"{endpoint}/v1/traces",
        content=encode_spans(list(spans)).SerializeToString(),
        headers=headers,
        timeout=options.pop("timeout", 60),
        **options,
    )
