"""Captured attributes are bounded in bytes, per attribute and per span, in every convention."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import errors, semconv
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.capture._content import cap_bytes
from ragpulse.capture._record import handoff
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Context, Contexts

PASSAGES = [f"passage {i} about refunds and exchanges" for i in range(100_000)]


pytestmark = pytest.mark.usefixtures("capture_records")


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


NOT_CONTENT = {
    semconv.GEN_AI_OPERATION_NAME,
    semconv.OPENINFERENCE_SPAN_KIND,
    semconv.RAG_NAME,
    semconv.RAG_CAPTURE_TRUNCATED,
}


def captured_bytes(span: ReadableSpan) -> int:
    """Bytes of the texts a span captured (not its kind and name attributes)."""
    return sum(
        len(v.encode())
        for k, v in attrs(span).items()
        if isinstance(v, str) and k not in NOT_CONTENT
    )


def only(exporter: InMemorySpanExporter, prefix: str) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]
    return span


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return PASSAGES


def test_documents_of_100k_passages_stay_under_the_documents_cap_and_say_what_was_left_out(
    exporter: InMemorySpanExporter,
) -> None:
    search("refunds")
    span = attrs(only(exporter, "retrieval"))
    documents = span[semconv.GEN_AI_RETRIEVAL_DOCUMENTS]
    assert len(documents.encode()) <= 65536
    written = json.loads(documents)
    assert written[0] == {"content": PASSAGES[0]}
    assert span[semconv.RAG_CAPTURE_DOCUMENTS_OMITTED] == len(PASSAGES) - len(written)
    assert semconv.GEN_AI_RETRIEVAL_DOCUMENTS in span[semconv.RAG_CAPTURE_TRUNCATED]


def test_span_total_is_capped_across_attributes(exporter: InMemorySpanExporter) -> None:
    set_policy(
        ContentPolicy(
            max_text_bytes=4000,
            max_documents_bytes=100_000,
            max_span_bytes=6000,
            conventions=("genai", "openinference"),
        )
    )

    @ragpulse.rag(name="budget")
    def handle(question: str) -> str:
        return "a" * 5000

    handle("q" * 5000)
    search("r" * 5000)
    for span in exporter.get_finished_spans():
        assert captured_bytes(span) <= 6000
    unit = attrs(only(exporter, "budget"))
    assert set(unit[semconv.RAG_CAPTURE_TRUNCATED]) >= {semconv.RAG_QUESTION}


def test_byte_cap_never_splits_a_multibyte_character() -> None:
    text = "é" * 300  # two bytes each, short enough to be read whole
    capped = cap_bytes(text, 101)
    assert capped is not None
    assert len(capped.encode("utf-8")) <= 101
    assert capped.startswith("é" * 10) and capped.endswith("bytes]")


def test_unreadable_items_are_marked_in_the_openinference_documents(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(conventions=("openinference",)))

    class BadRepr:
        def __repr__(self) -> str:
            raise RuntimeError

    @ragpulse.retrieval
    def odd(query: str) -> list[Any]:
        return ["readable", BadRepr()]

    odd("q")
    span = attrs(only(exporter, "retrieval"))
    assert span["retrieval.documents.0.document.content"] == "readable"
    assert json.loads(span["retrieval.documents.1.document.metadata"]) == {
        semconv.GEN_AI_DOCUMENT_UNREADABLE: "BadRepr: RuntimeError"
    }


def test_too_large_request_is_not_judged_on_part_of_its_contexts(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag(name="large")
    def handle(question: str) -> str:
        search(question)
        return "Refunds take 14 days."

    handle("q")
    unit = attrs(only(exporter, "large"))
    assert unit[semconv.EVAL_STATUS] == EvalStatus.SKIPPED
    assert unit[semconv.EVAL_ERROR_TYPE] == errors.TOO_LARGE
    assert handoff.take(only(exporter, "large").context) is None


def test_request_within_the_record_bound_keeps_every_context(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(max_record_chars=10_000_000))

    @ragpulse.rag(name="kept")
    def handle(question: str) -> str:
        search(question)
        return "Refunds take 14 days."

    handle("q")
    record = handoff.take(only(exporter, "kept").context)
    assert record is not None and len(record.contexts) == len(PASSAGES)


def test_plain_passages_reach_the_evaluator_as_read_with_no_context_made_per_passage(
    exporter: InMemorySpanExporter,
) -> None:
    # As many as the record holds: each takes CONTEXT_CHARGE of its budget beside its text.
    short = [f"p{i}" for i in range(40_000)]

    @ragpulse.retrieval
    def search_short(query: str) -> list[str]:
        return short

    @ragpulse.rag(name="short")
    def handle(question: str) -> str:
        search_short(question)
        return "Refunds take 14 days."

    handle("q")
    record = handoff.take(only(exporter, "short").context)
    assert record is not None
    # The request's thread hands the passages over as they were read; whoever reads
    # the record (the judge, off that thread) gets a Context per passage.
    assert isinstance(record.contexts, Contexts)
    assert record.contexts.texts() == short
    assert record.contexts[7] == Context("p7")
    assert list(record.contexts)[-1] == Context("p39999")
