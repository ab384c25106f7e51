"""Adapters against real instrumentation: openinference-instrumentation-openai (and
LangChain's OpenInference instrumentor) drive the real ``openai`` client against the
Chat Completions test server; a processor buffers the trace's spans the way the
evaluating processor does and reads the record when the local root ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.context import Context as OtelContext
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from tests.integration.agents import require
from tests.servers.chat_server import ChatServer

from ragpulse import semconv
from ragpulse.adapters import TraceBuffer, TraceReading, is_buffered, read_trace

pytestmark = pytest.mark.integration


openai = require("openai")
_openinference_openai = require("openinference.instrumentation.openai")

QUESTION = "When did the Eiffel Tower open?"
PASSAGE_1 = "The Eiffel Tower opened to the public on 31 March 1889."
PASSAGE_2 = "It was built for the 1889 World's Fair in Paris."


class RecordAtLocalRoot(SpanProcessor):
    """What the evaluating processor does with an instrumented trace, and only that:
    hold its retrieval and LLM spans, read them when the local root ends."""

    def __init__(self, buffer: TraceBuffer) -> None:
        self.buffer = buffer
        self.readings: list[TraceReading] = []
        self.roots: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: OtelContext | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if span.parent is None or span.parent.is_remote:
            held = self.buffer.pop_trace(span.context.trace_id)
            self.roots.append(span)
            self.readings.append(read_trace(span, held))
        elif is_buffered(span):
            self.buffer.add(span)


@pytest.fixture
def probe() -> RecordAtLocalRoot:
    return RecordAtLocalRoot(TraceBuffer())


@pytest.fixture
def provider(probe: RecordAtLocalRoot) -> Iterator[TracerProvider]:
    """A provider of its own (not the global one) with the OpenAI instrumentor on it."""
    provider = TracerProvider()
    provider.add_span_processor(probe)
    instrumentor = _openinference_openai.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield provider
    instrumentor.uninstrument()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(mode="assistant") as server:
        yield server


def _client(server: ChatServer) -> Any:
    return openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)


def test_instrumented_openai_call_is_read_at_its_own_span(
    provider: TracerProvider, probe: RecordAtLocalRoot, server: ChatServer
) -> None:
    response = _client(server).chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": f"Answer from this context: {PASSAGE_1}"},
            {"role": "user", "content": QUESTION},
        ],
    )

    [reading] = probe.readings
    record = reading.record
    assert record is not None
    assert record.question == QUESTION
    assert record.answer == response.choices[0].message.content
    assert record.contexts == ()
    assert record.span_context == probe.roots[0].context
    assert record.attributes[semconv.RAG_ADAPTER_CONVENTION] == "openinference"
    assert reading.skipped == 0


def test_streamed_instrumented_call_is_read_from_its_accumulated_output(
    provider: TracerProvider, probe: RecordAtLocalRoot, server: ChatServer
) -> None:
    stream = _client(server).chat.completions.create(
        model="gpt-4o-mini",
        stream=True,
        messages=[{"role": "user", "content": f"{PASSAGE_1}\n{QUESTION}"}],
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)

    [reading] = probe.readings
    assert reading.record is not None
    assert reading.record.answer == streamed
    assert streamed


def test_app_retriever_and_instrumented_llm_under_a_chain_become_one_record(
    provider: TracerProvider, probe: RecordAtLocalRoot, server: ChatServer
) -> None:
    tracer = provider.get_tracer("support-bot")
    with tracer.start_as_current_span("answer") as chain:
        chain.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OI_KIND_CHAIN)
        chain.set_attribute(semconv.OI_INPUT_VALUE, QUESTION)
        with tracer.start_as_current_span("search") as retriever:
            retriever.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OI_KIND_RETRIEVER)
            retriever.set_attribute(semconv.OI_INPUT_VALUE, QUESTION)
            for i, (doc_id, passage) in enumerate([("kb-1", PASSAGE_1), ("kb-2", PASSAGE_2)]):
                prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{i}."
                retriever.set_attribute(prefix + semconv.OI_DOCUMENT_ID, doc_id)
                retriever.set_attribute(prefix + semconv.OI_DOCUMENT_CONTENT, passage)
                retriever.set_attribute(prefix + semconv.OI_DOCUMENT_SCORE, 0.9 - i / 10)
        response = _client(server).chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": f"Context:\n{PASSAGE_1}\n{PASSAGE_2}"},
                {"role": "user", "content": QUESTION},
            ],
        )

    [reading] = probe.readings
    record = reading.record
    assert record is not None
    assert record.name == "answer"
    assert record.question == QUESTION
    assert [(c.id, c.text) for c in record.contexts] == [("kb-1", PASSAGE_1), ("kb-2", PASSAGE_2)]
    assert record.contexts[0].score == pytest.approx(0.9)
    assert record.answer == response.choices[0].message.content
    assert probe.buffer.spans == 0


def test_buffer_refusals_under_real_spans_are_counted_and_the_record_keeps_the_rest(
    provider: TracerProvider, probe: RecordAtLocalRoot, server: ChatServer
) -> None:
    probe.buffer = TraceBuffer(max_spans_per_trace=1)
    tracer = provider.get_tracer("support-bot")
    client = _client(server)
    with tracer.start_as_current_span("two calls"):
        first = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"{PASSAGE_1} {QUESTION}"}]
        )
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"{PASSAGE_2} {QUESTION}"}]
        )

    [reading] = probe.readings
    assert probe.buffer.dropped == 1
    assert reading.record is not None
    assert reading.record.answer == first.choices[0].message.content


def test_langchain_rag_chain_instrumented_by_openinference_becomes_a_record(
    provider: TracerProvider, probe: RecordAtLocalRoot, server: ChatServer
) -> None:
    langchain = require("openinference.instrumentation.langchain")
    documents = require("langchain_core.documents")
    retrievers = require("langchain_core.retrievers")
    prompts = require("langchain_core.prompts")
    parsers = require("langchain_core.output_parsers")
    runnables = require("langchain_core.runnables")
    langchain_openai = require("langchain_openai")

    class Wiki(retrievers.BaseRetriever):  # type: ignore[misc,name-defined]
        def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> list[Any]:
            return [
                documents.Document(page_content=PASSAGE_1, metadata={"source": "wiki"}),
                documents.Document(page_content=PASSAGE_2, metadata={"source": "wiki"}),
            ]

    def join(docs: list[Any]) -> str:
        return "\n".join(doc.page_content for doc in docs)

    instrumentor = langchain.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        llm = langchain_openai.ChatOpenAI(
            base_url=server.url, api_key="test", model="gpt-4o-mini", max_retries=0
        )
        prompt = prompts.ChatPromptTemplate.from_messages(
            [("system", "Context: {context}"), ("user", "{question}")]
        )
        chain = (
            {"context": Wiki() | join, "question": runnables.RunnablePassthrough()}
            | prompt
            | llm
            | parsers.StrOutputParser()
        )
        answer = chain.invoke(QUESTION)
    finally:
        instrumentor.uninstrument()

    chain_readings = [
        reading
        for reading, root in zip(probe.readings, probe.roots, strict=True)
        if root.name == "RunnableSequence"
    ]
    [reading] = chain_readings
    record = reading.record
    assert record is not None
    assert record.question == QUESTION
    assert [c.text for c in record.contexts] == [PASSAGE_1, PASSAGE_2]
    assert record.answer == answer
    assert reading.skipped == 0
