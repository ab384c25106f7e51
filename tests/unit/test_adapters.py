"""Adapters: traces written by OpenInference, the GenAI conventions and OpenLLMetry
become a RagRecord; TraceBuffer holds their spans within its bounds.

Spans are built with the SDK's ReadableSpan constructor, with the attributes and
events each instrumentation writes (the OpenAI and LangChain OpenInference
instrumentors, the GenAI semantic conventions, OpenLLMetry's decorators and its
Chroma/Pinecone instrumentations).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from itertools import count
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse.adapters import (
    TraceBuffer,
    detect_convention,
    estimate_bytes,
    is_buffered,
    read_trace,
    record_from_trace,
)
from ragpulse.adapters._common import Issues
from ragpulse.evaluation.types import Context

TRACE_ID = 0x5B8EFFF798038103D269B633813FC60C
_span_ids = count(0x1000)
_clock = count(1_700_000_000_000_000_000, 1_000_000)

QUESTION = "When did the Eiffel Tower open?"
PASSAGE_1 = "The Eiffel Tower opened to the public on 31 March 1889."
PASSAGE_2 = "It was built for the 1889 World's Fair in Paris."
ANSWER = "The Eiffel Tower opened on 31 March 1889."


def make_span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    parent: ReadableSpan | None = None,
    events: Sequence[Event] = (),
    trace_id: int = TRACE_ID,
    start: int | None = None,
    end: int | None = None,
) -> ReadableSpan:
    """A finished span as the SDK hands it to a processor's on_end."""
    context = SpanContext(trace_id, next(_span_ids), is_remote=False, trace_flags=TraceFlags(1))
    start_time = start if start is not None else next(_clock)
    return ReadableSpan(
        name=name,
        context=context,
        parent=parent.context if parent is not None else None,
        attributes=dict(attributes or {}),
        events=events,
        start_time=start_time,
        end_time=end if end is not None else start_time + 500_000,
    )


def texts(contexts: Sequence[Context]) -> list[str]:
    return [c.text for c in contexts]


# --- OpenInference -------------------------------------------------------------------


def oi_chain(question_value: str, answer_value: str | None, *, json_input: bool) -> ReadableSpan:
    attributes: dict[str, Any] = {
        "openinference.span.kind": "CHAIN",
        "input.value": question_value,
        "input.mime_type": "application/json" if json_input else "text/plain",
    }
    if answer_value is not None:
        attributes.update({"output.value": answer_value, "output.mime_type": "text/plain"})
    return make_span("RunnableSequence", attributes)


def oi_retriever(
    parent: ReadableSpan, query: str, docs: Sequence[Mapping[str, Any]]
) -> ReadableSpan:
    attributes: dict[str, Any] = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": query,
        "input.mime_type": "text/plain",
    }
    for i, doc in enumerate(docs):
        for field, value in doc.items():
            attributes[f"retrieval.documents.{i}.document.{field}"] = value
    return make_span("VectorStoreRetriever", attributes, parent=parent)


def oi_openai_llm(parent: ReadableSpan | None, user: str, reply: str) -> ReadableSpan:
    """An LLM span as openinference-instrumentation-openai writes it."""
    messages = [
        {"role": "system", "content": "Answer from the context."},
        {"role": "user", "content": user},
    ]
    response = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": reply},
            }
        ],
    }
    return make_span(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "input.value": json.dumps({"messages": messages, "model": "gpt-4o-mini"}),
            "input.mime_type": "application/json",
            "output.value": json.dumps(response),
            "output.mime_type": "application/json",
            "llm.invocation_parameters": json.dumps({"model": "gpt-4o-mini"}),
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Answer from the context.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": user,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": reply,
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 40,
            "llm.token_count.completion": 12,
        },
        parent=parent,
    )


def test_openinference_langchain_trace_gives_question_contexts_and_answer() -> None:
    root = oi_chain(json.dumps({"question": QUESTION, "chat_history": []}), ANSWER, json_input=True)
    retriever = oi_retriever(
        root,
        QUESTION,
        [
            {"content": PASSAGE_1, "metadata": json.dumps({"source": "wiki"})},
            {"content": PASSAGE_2, "metadata": json.dumps({"source": "wiki"})},
        ],
    )
    llm = oi_openai_llm(root, f"Context: {PASSAGE_1}\n{PASSAGE_2}\nQuestion: {QUESTION}", ANSWER)

    record = record_from_trace(root, [retriever, llm])

    assert record is not None
    assert record.question == QUESTION
    assert texts(record.contexts) == [PASSAGE_1, PASSAGE_2]
    assert record.answer == ANSWER
    assert record.name == "RunnableSequence"
    assert record.span_context == root.context


def test_openinference_documents_keep_their_id_and_score() -> None:
    root = oi_chain(QUESTION, ANSWER, json_input=False)
    retriever = oi_retriever(
        root,
        QUESTION,
        [
            {"id": "doc-7", "score": 0.91, "content": PASSAGE_1},
            {"id": 42, "score": 0.5, "content": PASSAGE_2},
        ],
    )

    record = record_from_trace(root, [retriever])

    assert record is not None
    assert record.contexts == (
        Context(PASSAGE_1, id="doc-7", score=0.91),
        Context(PASSAGE_2, id="42", score=0.5),
    )


def test_openinference_llm_root_reads_user_message_and_reply() -> None:
    llm = oi_openai_llm(None, QUESTION, ANSWER)

    record = record_from_trace(llm, [])

    assert record is not None
    assert record.question == QUESTION
    assert record.answer == ANSWER
    assert record.contexts == ()


def test_openinference_request_body_is_read_when_messages_are_not_flattened() -> None:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]}
    response = {"choices": [{"message": {"role": "assistant", "content": ANSWER}}]}
    llm = make_span(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "input.value": json.dumps(body),
            "input.mime_type": "application/json",
            "output.value": json.dumps(response),
            "output.mime_type": "application/json",
        },
    )

    record = record_from_trace(llm, [])

    assert record is not None
    assert (record.question, record.answer) == (QUESTION, ANSWER)


def test_openinference_multipart_user_content_is_joined() -> None:
    llm = make_span(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.contents.0.message_content.type": "text",
            "llm.input_messages.0.message.contents.0.message_content.text": "When did the ",
            "llm.input_messages.0.message.contents.1.message_content.type": "text",
            "llm.input_messages.0.message.contents.1.message_content.text": "Eiffel Tower open?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
    )

    record = record_from_trace(llm, [])

    assert record is not None
    assert record.question == QUESTION


def test_openinference_chain_json_output_gives_its_answer_field() -> None:
    root = make_span(
        "rag_chain",
        {
            "openinference.span.kind": "CHAIN",
            "input.value": QUESTION,
            "output.value": json.dumps({"answer": ANSWER, "context": [PASSAGE_1]}),
            "output.mime_type": "application/json",
        },
    )
    retriever = oi_retriever(root, QUESTION, [{"content": PASSAGE_1}])

    record = record_from_trace(root, [retriever])

    assert record is not None
    assert record.answer == ANSWER


# --- GenAI semantic conventions ----------------------------------------------------


def genai_retrieval(
    parent: ReadableSpan | None, query: str, docs: list[dict[str, Any]]
) -> ReadableSpan:
    return make_span(
        "retrieval knowledge-base",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": "knowledge-base",
            "gen_ai.retrieval.query.text": query,
            "gen_ai.retrieval.documents": json.dumps(docs),
        },
        parent=parent,
    )


def genai_chat(parent: ReadableSpan | None, user: str, reply: str, **extra: Any) -> ReadableSpan:
    input_messages = [
        {"role": "system", "parts": [{"type": "text", "content": "Answer briefly."}]},
        {"role": "user", "parts": [{"type": "text", "content": user}]},
    ]
    output_messages = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": reply}],
            "finish_reason": "stop",
        }
    ]
    return make_span(
        "chat gpt-4o-mini",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps(input_messages),
            "gen_ai.output.messages": json.dumps(output_messages),
        },
        parent=parent,
        **extra,
    )


def test_genai_trace_under_a_plain_root_reads_user_message_documents_and_reply() -> None:
    root = make_span("POST /ask", {"http.request.method": "POST", "http.route": "/ask"})
    retrieval = genai_retrieval(
        root,
        QUESTION,
        [
            {"id": "d1", "score": 0.8, "content": PASSAGE_1},
            {"id": "d2", "score": 0.4, "content": PASSAGE_2},
        ],
    )
    chat = genai_chat(root, QUESTION, ANSWER)

    record = record_from_trace(root, [retrieval, chat])

    assert record is not None
    assert record.question == QUESTION
    assert record.contexts == (
        Context(PASSAGE_1, id="d1", score=0.8),
        Context(PASSAGE_2, id="d2", score=0.4),
    )
    assert record.answer == ANSWER
    assert record.name == "POST /ask"


def test_genai_prompt_stuffed_with_passages_gives_way_to_the_retrieval_query() -> None:
    root = make_span("POST /ask")
    retrieval = genai_retrieval(root, QUESTION, [{"id": "d1", "score": 0.8, "content": PASSAGE_1}])
    chat = genai_chat(root, f"Use this context:\n{PASSAGE_1}\n\nNow answer: {QUESTION}", ANSWER)

    record = record_from_trace(root, [retrieval, chat])

    assert record is not None
    assert record.question == QUESTION


def test_genai_older_prompt_and_completion_attributes_are_read() -> None:
    chat = make_span(
        "openai.chat",
        {
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Answer briefly.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": QUESTION,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": ANSWER,
            "gen_ai.completion.0.finish_reason": "stop",
        },
    )

    record = record_from_trace(chat, [])

    assert record is not None
    assert (record.question, record.answer) == (QUESTION, ANSWER)
    assert detect_convention(chat) == "genai"


def test_genai_messages_on_the_operation_details_event_are_read() -> None:
    details = Event(
        "gen_ai.client.inference.operation.details",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": ANSWER}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        },
    )
    chat = make_span("chat gpt-4o-mini", {"gen_ai.operation.name": "chat"}, events=[details])

    record = record_from_trace(chat, [])

    assert record is not None
    assert (record.question, record.answer) == (QUESTION, ANSWER)


def test_answer_comes_from_the_llm_span_that_ended_last() -> None:
    root = make_span("agent")
    rewrite = genai_chat(root, QUESTION, "eiffel tower opening date")
    final = genai_chat(root, QUESTION, ANSWER)

    # Buffered in the order they ended, which is the order the processor sees.
    record = record_from_trace(root, [rewrite, final])

    assert record is not None
    assert record.answer == ANSWER


def test_contexts_follow_span_start_order_not_buffer_order() -> None:
    root = make_span("rag")
    first = genai_retrieval(root, QUESTION, [{"id": "a", "score": 1.0, "content": PASSAGE_1}])
    second = genai_retrieval(root, QUESTION, [{"id": "b", "score": 1.0, "content": PASSAGE_2}])

    record = record_from_trace(root, [second, first])

    assert record is not None
    assert texts(record.contexts) == [PASSAGE_1, PASSAGE_2]


# --- OpenLLMetry ---------------------------------------------------------------------


def chroma_query(parent: ReadableSpan, matches: list[dict[str, Any]]) -> ReadableSpan:
    events = [
        Event("db.query.result", {f"db.query.result.{key}": value for key, value in match.items()})
        for match in matches
    ]
    return make_span(
        "chroma.query",
        {"db.system": "chroma", "db.operation": "query", "db.chroma.query.n_results": len(matches)},
        parent=parent,
        events=events,
    )


def openllmetry_chat(parent: ReadableSpan, user: str, reply: str) -> ReadableSpan:
    return make_span(
        "openai.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": user,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": reply,
            "gen_ai.completion.0.finish_reason": "stop",
        },
        parent=parent,
    )


def test_openllmetry_workflow_with_chroma_results_becomes_a_record() -> None:
    root = make_span(
        "answer_question.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "answer_question",
            "traceloop.workflow.name": "answer_question",
            "traceloop.entity.input": json.dumps({"args": [QUESTION], "kwargs": {}}),
            "traceloop.entity.output": json.dumps(ANSWER),
        },
    )
    chroma = chroma_query(
        root,
        [
            {
                "id": "doc-1",
                "distance": 0.21,
                "document": PASSAGE_1,
                "metadata": '{"source": "wiki"}',
            },
            {"id": "doc-2", "distance": 0.35, "document": PASSAGE_2},
        ],
    )
    chat = openllmetry_chat(root, f"{PASSAGE_1}\n{PASSAGE_2}\n{QUESTION}", ANSWER)

    record = record_from_trace(root, [chroma, chat])

    assert record is not None
    assert record.question == QUESTION
    assert record.contexts == (Context(PASSAGE_1, id="doc-1"), Context(PASSAGE_2, id="doc-2"))
    assert record.answer == ANSWER


def test_openllmetry_langchain_workflow_reads_inputs_and_outputs() -> None:
    root = make_span(
        "RunnableSequence.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": json.dumps(
                {
                    "inputs": {"question": QUESTION},
                    "tags": [],
                    "metadata": {},
                    "kwargs": {"name": "RunnableSequence"},
                }
            ),
            "traceloop.entity.output": json.dumps(
                {"outputs": {"answer": ANSWER}, "kwargs": {"tags": []}}
            ),
        },
    )
    chroma = chroma_query(root, [{"id": "doc-1", "document": PASSAGE_1}])

    record = record_from_trace(root, [chroma])

    assert record is not None
    assert (record.question, record.answer) == (QUESTION, ANSWER)


def test_openllmetry_pinecone_match_text_is_taken_from_its_metadata() -> None:
    root = make_span("rag.workflow", {"traceloop.span.kind": "workflow"})
    pinecone = chroma_query(
        root,
        [
            # Pinecone's instrumentation writes str(metadata): a Python literal, not JSON.
            {"id": "vec-1", "score": 0.93, "metadata": str({"text": PASSAGE_1, "source": "wiki"})},
        ],
    )

    record = record_from_trace(root, [pinecone])

    assert record is not None
    assert record.contexts == (Context(PASSAGE_1, id="vec-1", score=0.93),)


def test_openllmetry_llm_span_reads_the_older_genai_attributes() -> None:
    root = make_span("rag.workflow", {"traceloop.span.kind": "workflow"})
    chat = openllmetry_chat(root, QUESTION, ANSWER)

    record = record_from_trace(root, [chat])

    assert detect_convention(chat) == "openllmetry"
    assert record is not None
    assert (record.question, record.answer) == (QUESTION, ANSWER)


# --- ragpulse's own spans --------------------------------------------------------------


def test_ragpulse_unit_with_its_retrieval_child_is_read() -> None:
    root = make_span(
        "rag answer",
        {
            "ragpulse.eval.unit": True,
            "ragpulse.rag.name": "answer",
            "openinference.span.kind": "CHAIN",
            "ragpulse.input.question": QUESTION,
            "ragpulse.output.answer": ANSWER,
        },
    )
    retrieval = make_span(
        "retrieval search",
        {
            "gen_ai.operation.name": "retrieval",
            "openinference.span.kind": "RETRIEVER",
            "gen_ai.retrieval.query.text": QUESTION,
            "gen_ai.retrieval.documents": json.dumps(
                [{"id": "1", "score": 0.7, "content": PASSAGE_1}]
            ),
        },
        parent=root,
    )

    record = record_from_trace(root, [retrieval])

    assert detect_convention(root) == "ragpulse"
    assert record is not None
    assert (record.question, record.answer) == (QUESTION, ANSWER)
    assert record.contexts == (Context(PASSAGE_1, id="1", score=0.7),)


# --- across conventions ------------------------------------------------------------------


def test_trace_without_retrieval_or_answer_gives_no_record() -> None:
    root = make_span("POST /health", {"http.route": "/health"})
    embedding = make_span("embeddings", {"openinference.span.kind": "EMBEDDING"}, parent=root)

    assert record_from_trace(root, [embedding]) is None


def test_passage_reported_by_nested_spans_is_kept_once() -> None:
    root = oi_chain(QUESTION, ANSWER, json_input=False)
    retriever = oi_retriever(root, QUESTION, [{"id": "doc-1", "content": PASSAGE_1}])
    store = chroma_query(
        retriever, [{"id": "doc-1", "document": PASSAGE_1}, {"id": "doc-2", "document": PASSAGE_2}]
    )

    record = record_from_trace(root, [store, retriever])

    assert record is not None
    assert [(c.id, c.text) for c in record.contexts] == [("doc-1", PASSAGE_1), ("doc-2", PASSAGE_2)]


def test_a_hundred_thousand_unreadable_documents_are_counted_and_only_the_first_kept() -> None:
    # One issue line per unreadable element, all held, made such a trace cost hundreds of
    # megabytes; every one is still counted.
    root = make_span("POST /ask")
    unreadable = make_span(
        "retrieval kb",
        {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": (7,) * 100_000},
        parent=root,
    )
    good = genai_retrieval(root, QUESTION, [{"id": "d2", "content": PASSAGE_2}])

    reading = read_trace(root, [unreadable, good])

    assert reading.skipped == 100_000
    assert 0 < len(reading.issues) <= 20
    assert reading.record is not None and texts(reading.record.contexts) == [PASSAGE_2]


def test_issues_hold_the_first_lines_and_count_them_all() -> None:
    issues = Issues(keep=20)
    for n in range(100_000):
        issues.append(f"gen_ai.retrieval.documents[{n}]: no document text")

    assert (len(issues), issues.total) == (20, 100_000)
    assert issues[-1] == "gen_ai.retrieval.documents[19]: no document text"


def test_max_text_length_cuts_question_contexts_and_answer() -> None:
    root = oi_chain(QUESTION, ANSWER, json_input=False)
    retriever = oi_retriever(root, QUESTION, [{"content": PASSAGE_1}])

    record = record_from_trace(root, [retriever], max_text_length=10)

    assert record is not None
    assert record.question == QUESTION[:10]
    assert texts(record.contexts) == [PASSAGE_1[:10]]
    assert record.answer == ANSWER[:10]


def test_malformed_json_is_skipped_and_counted() -> None:
    root = make_span("POST /ask")
    broken = make_span(
        "retrieval kb",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": '[{"id": "d1", "content": ',
        },
        parent=root,
    )
    good = genai_retrieval(root, QUESTION, [{"id": "d2", "score": 0.5, "content": PASSAGE_2}])
    chat = make_span(
        "chat gpt-4o-mini",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": "{not json",
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            ),
        },
        parent=root,
    )

    reading = read_trace(root, [broken, good, chat])

    assert reading.record is not None
    assert texts(reading.record.contexts) == [PASSAGE_2]
    assert reading.record.answer == ANSWER
    assert reading.record.question == QUESTION
    assert reading.skipped == 2
    assert any("gen_ai.retrieval.documents" in issue for issue in reading.issues)


@pytest.mark.parametrize(
    "attributes",
    [
        {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": 5},
        {"openinference.span.kind": "RETRIEVER", "retrieval.documents.x.document.content": "a"},
        {
            "openinference.span.kind": "LLM",
            "input.value": "{",
            "input.mime_type": "application/json",
        },
        {
            "openinference.span.kind": "LLM",
            "output.value": "[1, 2",
            "output.mime_type": "application/json",
        },
        {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps({"id": 1})},
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": json.dumps([1, None, "x"]),
        },
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": ("{bad", '{"content": 3}'),
        },
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps({"role": "user"})},
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.output.messages": json.dumps([{"parts": "text"}]),
        },
        {"gen_ai.prompt.0.content": "[{broken", "gen_ai.completion.0.content": 7},
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": "{",
            "traceloop.entity.output": "]",
        },
    ],
)
def test_malformed_attributes_are_handled_where_they_are_read(attributes: dict[str, Any]) -> None:
    span = make_span("odd", attributes)

    reading = read_trace(span, [span])

    # The last-resort guard in read_trace must not be what caught it.
    assert not [issue for issue in reading.issues if issue.startswith("unreadable trace")]
    assert reading.record is None or all(context.text for context in reading.record.contexts)


# JSON nested past the interpreter's recursion limit: json.loads raises RecursionError.
DEEP_LIST = "[" * 10_000
DEEP_OBJECT = '[{"a":' * 5_000


@pytest.mark.parametrize(
    ("attributes", "events"),
    [
        ({"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": DEEP_LIST}, []),
        (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": DEEP_LIST,
                "gen_ai.output.messages": DEEP_LIST,
            },
            [],
        ),
        ({"gen_ai.prompt.0.content": DEEP_OBJECT, "gen_ai.completion.0.content": DEEP_OBJECT}, []),
        (
            {
                "openinference.span.kind": "LLM",
                "input.value": DEEP_LIST,
                "output.value": DEEP_LIST,
                "output.mime_type": "application/json",
            },
            [],
        ),
        (
            {
                "traceloop.span.kind": "workflow",
                "traceloop.entity.input": DEEP_LIST,
                "traceloop.entity.output": DEEP_LIST,
            },
            [],
        ),
        ({}, [Event("db.query.result", {"db.query.result.metadata": DEEP_LIST})]),
    ],
)
def test_json_nested_ten_thousand_levels_deep_is_read_as_invalid_json(
    attributes: dict[str, Any], events: list[Event]
) -> None:
    span = make_span("deep", attributes, events=events)

    reading = read_trace(span, [span])

    assert not [issue for issue in reading.issues if issue.startswith("unreadable trace")]


@pytest.mark.parametrize("index", ["²", "١", "9" * 5_000])
def test_a_list_key_whose_index_is_not_ascii_digits_is_left_out(index: str) -> None:
    root = make_span(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            f"llm.input_messages.{index}.message.role": "user",
            f"llm.input_messages.{index}.message.content": "not a message",
            "llm.input_messages.0.message.role": "user",
            f"llm.input_messages.0.message.contents.{index}.message_content.text": "not a part",
            "llm.input_messages.0.message.contents.0.message_content.type": "text",
            "llm.input_messages.0.message.contents.0.message_content.text": QUESTION,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
    )
    retriever = make_span(
        "VectorStoreRetriever",
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.content": PASSAGE_1,
            f"retrieval.documents.{index}.document.content": PASSAGE_2,
        },
        parent=root,
    )

    reading = read_trace(root, [retriever])

    assert reading.record is not None, reading.issues
    assert texts(reading.record.contexts) == [PASSAGE_1]
    assert (reading.record.question, reading.record.answer) == (QUESTION, ANSWER)


@pytest.mark.parametrize("kind", ["gen_ai.operation.name", "llm.request.type"])
@pytest.mark.parametrize("value", [["chat"], {"name": "chat"}, ("chat", {"n": 1})])
def test_an_operation_name_that_is_not_a_string_is_no_llm_span(kind: str, value: object) -> None:
    root = make_span("POST /ask")
    retrieval = genai_retrieval(root, QUESTION, [{"id": "d1", "content": PASSAGE_1}])
    odd = make_span("odd", {kind: value}, parent=root)
    chat = genai_chat(root, QUESTION, ANSWER)

    reading = read_trace(root, [retrieval, odd, chat])

    assert not is_buffered(odd)
    assert reading.record is not None, reading.issues
    assert (reading.record.question, reading.record.answer) == (QUESTION, ANSWER)


def test_a_score_past_a_floats_range_and_an_id_past_the_int_digit_limit_are_read() -> None:
    root = make_span("POST /ask")
    # JSON integers have no bound; an SDK attribute may hold any Python int.
    documents = '[{"id": "d1", "score": 1' + "0" * 400 + ', "content": "' + PASSAGE_1 + '"}]'
    genai = make_span(
        "retrieval kb",
        {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": documents},
        parent=root,
    )
    oi = make_span(
        "VectorStoreRetriever",
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.content": PASSAGE_2,
            "retrieval.documents.0.document.id": 10**5_000,
            "retrieval.documents.0.document.score": -(10**400),
        },
        parent=root,
    )
    chat = genai_chat(root, QUESTION, ANSWER)

    reading = read_trace(root, [genai, oi, chat])

    assert reading.record is not None, reading.issues
    assert reading.record.contexts == (
        Context(PASSAGE_1, id="d1", score=float("inf")),
        Context(PASSAGE_2, id=None, score=float("-inf")),
    )


def test_documents_sent_as_bytes_are_one_unreadable_value_not_one_per_byte() -> None:
    # OTLP has a bytes value; a span attribute may hold bytes too.
    span = make_span(
        "retrieval kb",
        {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": b"[]" * 50_000},
    )

    reading = read_trace(span, [span])

    assert reading.skipped == 1
    assert reading.issues == ("gen_ai.retrieval.documents: unexpected bytes",)


class _BrokenSpan(ReadableSpan):
    """A span whose events cannot be read: a shape no adapter foresaw."""

    @property
    def events(self) -> Sequence[Event]:
        raise RuntimeError("events unavailable")


def test_a_span_that_cannot_be_inspected_costs_its_record_not_an_exception() -> None:
    context = SpanContext(TRACE_ID, next(_span_ids), is_remote=False)
    broken = _BrokenSpan(name="odd", context=context, attributes={"openinference.span.kind": "LLM"})

    reading = read_trace(broken, [])

    assert reading.record is None
    assert reading.issues == ("unreadable trace: RuntimeError",)
    assert not is_buffered(broken)


def test_unreadable_result_events_are_counted() -> None:
    root = make_span("rag.workflow", {"traceloop.span.kind": "workflow"})
    store = chroma_query(root, [{"id": "v1", "score": 0.9, "metadata": "{'source': 'wiki'}"}])

    reading = read_trace(root, [store])

    assert reading.record is None
    assert reading.skipped == 1


def test_detect_convention_names_each_instrumentation() -> None:
    root = make_span("root")
    assert detect_convention(oi_openai_llm(None, QUESTION, ANSWER)) == "openinference"
    assert detect_convention(genai_chat(None, QUESTION, ANSWER)) == "genai"
    assert detect_convention(chroma_query(root, [{"document": PASSAGE_1}])) == "openllmetry"
    assert detect_convention(make_span("GET /", {"http.route": "/"})) is None


def test_retrieval_and_llm_spans_are_buffered_and_others_are_not() -> None:
    root = make_span("root")
    assert is_buffered(oi_retriever(root, QUESTION, [{"content": PASSAGE_1}]))
    assert is_buffered(oi_openai_llm(root, QUESTION, ANSWER))
    assert is_buffered(genai_retrieval(root, QUESTION, []))
    assert is_buffered(genai_chat(root, QUESTION, ANSWER))
    assert is_buffered(chroma_query(root, [{"document": PASSAGE_1}]))
    assert is_buffered(openllmetry_chat(root, QUESTION, ANSWER))
    assert not is_buffered(oi_chain(QUESTION, ANSWER, json_input=False))
    assert not is_buffered(make_span("embeddings", {"gen_ai.operation.name": "embeddings"}))
    assert not is_buffered(make_span("GET /", {"http.route": "/"}))


# --- TraceBuffer -------------------------------------------------------------------------


def span_in(trace_id: int, payload: str = "x") -> ReadableSpan:
    return make_span("retrieval kb", {"gen_ai.retrieval.documents": payload}, trace_id=trace_id)


def test_buffer_groups_spans_by_trace_and_pop_takes_them_out() -> None:
    buffer = TraceBuffer()
    a1, a2, b1 = span_in(1), span_in(1), span_in(2)
    for span in (a1, b1, a2):
        assert buffer.add(span)

    assert buffer.pop_trace(1) == [a1, a2]
    assert (buffer.traces, buffer.spans, buffer.bytes) == (1, 1, estimate_bytes(b1))
    assert buffer.pop_trace(1) == []


def test_buffer_refuses_spans_past_the_per_trace_limit_and_counts_them() -> None:
    buffer = TraceBuffer(max_spans_per_trace=2)

    accepted = [buffer.add(span_in(1)) for _ in range(3)]

    assert accepted == [True, True, False]
    assert (buffer.spans, buffer.dropped) == (2, 1)
    assert buffer.add(span_in(2))


def test_buffer_past_its_byte_limit_evicts_the_oldest_trace_and_counts_it() -> None:
    small = span_in(1, "x" * 100)
    buffer = TraceBuffer(max_bytes=estimate_bytes(small) * 2)

    assert buffer.add(small)
    assert buffer.add(span_in(2, "x" * 100))
    assert buffer.add(span_in(3, "x" * 100))  # trace 1, the oldest, makes room
    assert buffer.bytes <= buffer.max_bytes
    assert (buffer.traces, buffer.evicted, buffer.dropped) == (2, 1, 1)
    # The evicted trace is lost, not judged on part of its evidence: its later spans are
    # refused and its root finds nothing.
    assert not buffer.add(span_in(1, "x" * 100))
    assert buffer.pop_trace(1) == []
    assert buffer.dropped == 2


def test_a_span_larger_than_the_whole_buffer_is_refused_and_nothing_is_evicted() -> None:
    small = span_in(1, "x" * 100)
    buffer = TraceBuffer(max_bytes=estimate_bytes(small) * 2)
    assert buffer.add(small)

    assert not buffer.add(span_in(2, "x" * 1000))

    assert (buffer.traces, buffer.evicted, buffer.dropped) == (1, 0, 1)


def test_traces_whose_root_never_ends_here_do_not_stop_later_traces_from_being_held() -> None:
    # Retrieval spans of traces whose local root ends in another process fill the bytes;
    # before, every later span was refused for good and no trace was judged again.
    one = span_in(1, "x" * 100)
    buffer = TraceBuffer(max_bytes=estimate_bytes(one) * 4)
    for trace_id in range(100, 140):
        buffer.add(span_in(trace_id, "x" * 100))

    fresh = [span_in(7, "x" * 100), span_in(7, "x" * 100)]
    assert all(buffer.add(span) for span in fresh)
    assert buffer.pop_trace(7) == fresh
    assert buffer.bytes <= buffer.max_bytes


def test_buffer_evicts_the_oldest_trace_when_max_traces_are_open() -> None:
    buffer = TraceBuffer(max_traces=2)
    buffer.add(span_in(1))
    buffer.add(span_in(1))
    buffer.add(span_in(2))

    assert buffer.add(span_in(3))

    assert buffer.pop_trace(1) == []
    assert (buffer.traces, buffer.spans, buffer.evicted, buffer.dropped) == (2, 2, 1, 2)


def test_buffer_byte_estimate_grows_with_attribute_and_event_text() -> None:
    plain = make_span("s", {"k": "v"})
    with_text = make_span("s", {"k": "v" * 1000})
    with_event = make_span(
        "s", {"k": "v"}, events=[Event("db.query.result", {"db.query.result.document": "d" * 1000})]
    )

    assert estimate_bytes(with_text) >= estimate_bytes(plain) + 999
    assert estimate_bytes(with_event) >= estimate_bytes(plain) + 1000


def test_buffer_counts_stay_consistent_under_concurrent_adds() -> None:
    buffer = TraceBuffer(max_traces=50, max_spans_per_trace=20)
    per_thread = 200
    results: list[bool] = []
    lock = threading.Lock()

    def add_many(worker: int) -> None:
        outcomes = [
            buffer.add(span_in(1 + (worker * per_thread + i) % 80)) for i in range(per_thread)
        ]
        with lock:
            results.extend(outcomes)

    threads = [threading.Thread(target=add_many, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 8 * per_thread
    assert buffer.traces <= 50
    assert buffer.spans + buffer.dropped == 8 * per_thread
    held = sum(len(buffer.pop_trace(trace_id)) for trace_id in range(1, 81))
    assert held == results.count(True) - buffer.dropped + results.count(False)
    assert (buffer.spans, buffer.bytes, buffer.traces) == (0, 0, 0)
