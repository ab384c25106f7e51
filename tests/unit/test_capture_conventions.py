"""Content is written under the conventions the policy names: GenAI, OpenInference, or both."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import semconv
from ragpulse.capture import ContentPolicy, set_policy

DOCS = [
    {"id": "refunds", "score": 0.9, "content": "Refunds are issued within 14 days."},
    {"id": "exchanges", "score": 0.4, "content": "Exchanges take 30 days."},
]
MESSAGES = [
    {"role": "system", "content": "Answer from the passages."},
    {"role": "user", "content": "How long do refunds take?"},
]
ANSWER = "Refunds are issued within 14 days."


pytestmark = pytest.mark.usefixtures("capture_records")


@ragpulse.retrieval
def search(query: str) -> list[dict[str, Any]]:
    return DOCS


@ragpulse.generation(model="test-model")
def write(messages: list[dict[str, str]]) -> str:
    return ANSWER


@ragpulse.rag(name="unit")
def handle(question: str) -> str:
    search(question)
    return write(MESSAGES)


def run(exporter: InMemorySpanExporter, *conventions: str) -> dict[str, dict[str, Any]]:
    set_policy(ContentPolicy(conventions=conventions))
    handle("How long do refunds take?")
    spans: dict[str, ReadableSpan] = {s.name: s for s in exporter.get_finished_spans()}
    return {
        "retrieval": dict(spans["retrieval search"].attributes or {}),
        "chat": dict(spans["chat test-model"].attributes or {}),
        "unit": dict(spans["unit"].attributes or {}),
    }


def test_default_writes_genai_content_once(exporter: InMemorySpanExporter) -> None:
    spans = run(exporter, "genai")
    documents = json.loads(spans["retrieval"][semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert [d["id"] for d in documents] == ["refunds", "exchanges"]
    assert not any(k.startswith("retrieval.documents.") for k in spans["retrieval"])
    assert semconv.OI_INPUT_VALUE not in spans["unit"]
    input_messages = json.loads(spans["chat"][semconv.GEN_AI_INPUT_MESSAGES])
    assert [m["role"] for m in input_messages] == ["system", "user"]
    assert input_messages[1]["parts"][0]["content"] == "How long do refunds take?"
    assert not any(k.startswith("llm.") for k in spans["chat"])


def test_openinference_writes_the_document_keys_phoenix_renders(
    exporter: InMemorySpanExporter,
) -> None:
    spans = run(exporter, "openinference")
    retrieval = spans["retrieval"]
    assert semconv.GEN_AI_RETRIEVAL_DOCUMENTS not in retrieval
    assert retrieval["retrieval.documents.0.document.id"] == "refunds"
    assert retrieval["retrieval.documents.0.document.score"] == 0.9
    assert retrieval["retrieval.documents.1.document.content"] == "Exchanges take 30 days."
    assert retrieval[semconv.OI_INPUT_VALUE] == "How long do refunds take?"
    chat = spans["chat"]
    assert chat["llm.input_messages.1.message.role"] == "user"
    assert chat["llm.input_messages.1.message.content"] == "How long do refunds take?"
    assert chat["llm.output_messages.0.message.content"] == ANSWER
    assert chat[semconv.OI_LLM_MODEL_NAME] == "test-model"
    assert semconv.GEN_AI_OUTPUT_MESSAGES not in chat
    assert spans["unit"][semconv.OI_OUTPUT_VALUE] == ANSWER


def test_both_conventions_write_both_forms(exporter: InMemorySpanExporter) -> None:
    spans = run(exporter, "genai", "openinference")
    assert semconv.GEN_AI_RETRIEVAL_DOCUMENTS in spans["retrieval"]
    assert "retrieval.documents.0.document.content" in spans["retrieval"]


def test_one_message_each_way_is_written_whole_in_both_conventions(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(conventions=("genai", "openinference")))

    @ragpulse.generation(model="test-model")
    def ask(messages: str) -> str:
        return ANSWER

    ask("How long do refunds take?")
    (span,) = exporter.get_finished_spans()
    chat = dict(span.attributes or {})
    assert chat["llm.input_messages.0.message.role"] == "user"
    assert chat["llm.input_messages.0.message.content"] == "How long do refunds take?"
    assert chat["llm.output_messages.0.message.role"] == "assistant"
    assert chat["llm.output_messages.0.message.content"] == ANSWER
    assert "llm.output_messages.1.message.content" not in chat
    assert json.loads(str(chat[semconv.GEN_AI_OUTPUT_MESSAGES])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}
    ]
    # The finish reason is the span's (the per-message one is deprecated).
    assert list(chat[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    assert json.loads(str(chat[semconv.GEN_AI_INPUT_MESSAGES])) == [
        {"role": "user", "parts": [{"type": "text", "content": "How long do refunds take?"}]}
    ]


def test_a_whole_one_message_input_is_charged_to_the_span(
    exporter: InMemorySpanExporter,
) -> None:
    # The input message is written whole; what it took leaves too little of the
    # span's budget for the answer, which is cut and listed as cut.
    answer = "a" * 300
    set_policy(ContentPolicy(conventions=("openinference",), max_span_bytes=450))

    @ragpulse.generation(model="test-model")
    def ask(messages: str) -> str:
        return answer

    ask("b" * 300)
    (span,) = exporter.get_finished_spans()
    chat = dict(span.attributes or {})
    assert chat["llm.input_messages.0.message.content"] == "b" * 300
    assert len(str(chat["llm.output_messages.0.message.content"])) < 150
    assert semconv.RAG_CAPTURE_TRUNCATED in chat


def test_openinference_documents_are_bounded_in_number(exporter: InMemorySpanExporter) -> None:
    set_policy(ContentPolicy(conventions=("openinference",), max_documents=5))

    @ragpulse.retrieval
    def many(query: str) -> list[str]:
        return [f"passage {i}" for i in range(50)]

    many("q")
    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert "retrieval.documents.4.document.content" in attributes
    assert "retrieval.documents.5.document.content" not in attributes
    assert attributes[semconv.RAG_CAPTURE_DOCUMENTS_OMITTED] == 45


def test_openinference_documents_stay_under_the_documents_cap(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(conventions=("openinference",), max_documents_bytes=2000))
    passages = [f"{i} " + "x" * 498 for i in range(10)]

    @ragpulse.retrieval
    def many(query: str) -> list[str]:
        return passages

    many("q")
    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    written = [
        attributes[f"retrieval.documents.{i}.document.content"]
        for i in range(10)
        if f"retrieval.documents.{i}.document.content" in attributes
    ]
    assert sum(len(text) for text in written) <= 2000
    assert written[:3] == passages[:3]
    assert semconv.OI_RETRIEVAL_DOCUMENTS in attributes[semconv.RAG_CAPTURE_TRUNCATED]
    assert attributes[semconv.RAG_CAPTURE_DOCUMENTS_OMITTED] == 10 - len(written)


def test_unknown_convention_is_refused() -> None:
    with pytest.raises(ValueError, match="conventions"):
        ContentPolicy(conventions=("zipkin",))


def test_capture_off_writes_lengths_and_hashes_in_every_convention(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(capture_content=False, conventions=("genai", "openinference")))
    handle("How long do refunds take?")
    exported = " ".join(
        str(v) for s in exporter.get_finished_spans() for v in (s.attributes or {}).values()
    )
    assert "Refunds" not in exported and "refunds take" not in exported
