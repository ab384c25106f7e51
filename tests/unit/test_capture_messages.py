"""``@generation`` given a conversation: its structure on the span, its tool results in the
record, in either convention and without content."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import semconv
from ragpulse.adapters import ToolPolicy
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.capture._record import handoff
from ragpulse.capture._roles import set_tool_roles
from ragpulse.evaluation.types import RagRecord

WARRANTY = "The X200 comes with a 2-year limited warranty that covers parts and labour."
QUESTION = "What warranty does the X200 have?"
FOLLOW_UP = "And is it two years for parts and labour?"
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": QUESTION},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search_docs", "arguments": '{"query": "X200 warranty"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": WARRANTY},
    {"role": "assistant", "content": "The X200 comes with a 2-year limited warranty."},
]


pytestmark = pytest.mark.usefixtures("capture_records")


@ragpulse.generation(model="test-model")
def chat(messages: Any) -> str:
    return "Yes, the 2-year limited warranty covers parts and labour."


@ragpulse.rag(name="turn")
def turn(question: str, conversation_id: str, messages: Any) -> str:
    return chat(messages)


def run(exporter: InMemorySpanExporter, messages: Any) -> tuple[dict[str, Any], RagRecord]:
    turn(FOLLOW_UP, "conv-1", messages)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    record = handoff.take(spans["turn"].context)
    assert record is not None
    return dict(spans["chat test-model"].attributes or {}), record


def test_genai_messages_keep_tool_calls_and_results_with_their_ids(
    exporter: InMemorySpanExporter,
) -> None:
    chat_span, _ = run(exporter, [*HISTORY, {"role": "user", "content": FOLLOW_UP}])

    messages = json.loads(chat_span[semconv.GEN_AI_INPUT_MESSAGES])
    assert messages[1] == {
        "role": "assistant",
        "parts": [
            {
                "type": "tool_call",
                "id": "call_1",
                "name": "search_docs",
                "arguments": {"query": "X200 warranty"},
            }
        ],
    }
    assert messages[2] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_1", "response": WARRANTY}],
    }


def test_openinference_messages_keep_tool_calls_and_results_with_their_ids(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(conventions=("openinference",)))
    chat_span, _ = run(exporter, [*HISTORY, {"role": "user", "content": FOLLOW_UP}])

    prefix = "llm.input_messages.1.message.tool_calls.0.tool_call"
    assert chat_span[f"{prefix}.id"] == "call_1"
    assert chat_span[f"{prefix}.function.name"] == "search_docs"
    assert chat_span[f"{prefix}.function.arguments"] == '{"query": "X200 warranty"}'
    assert chat_span["llm.input_messages.2.message.role"] == "tool"
    assert chat_span["llm.input_messages.2.message.tool_call_id"] == "call_1"
    assert chat_span["llm.input_messages.2.message.content"] == WARRANTY


def test_the_historys_tool_result_is_evidence_and_the_follow_up_joins_its_turn(
    exporter: InMemorySpanExporter,
) -> None:
    _, record = run(exporter, [*HISTORY, {"role": "user", "content": FOLLOW_UP}])

    [context] = record.contexts
    assert (context.text, context.id, context.tool) == (WARRANTY, "call_1", "search_docs")
    assert record.question == f"{QUESTION}\n{FOLLOW_UP}"
    assert record.attributes[semconv.RAG_ADAPTER_AGENT] is True


def test_a_failed_tool_result_of_this_turn_names_its_tool(
    exporter: InMemorySpanExporter,
) -> None:
    failed = json.dumps({"error": "search backend unavailable"})
    messages = [*HISTORY[:2], {"role": "tool", "tool_call_id": "call_1", "content": failed}]
    _, record = run(exporter, [{"role": "user", "content": FOLLOW_UP}, *messages[1:]])

    assert record.failed_tools == ("search_docs",)
    assert record.contexts == ()


def test_an_acting_tools_result_is_not_evidence(exporter: InMemorySpanExporter) -> None:
    set_tool_roles(ToolPolicy(action=("search_*",)))
    _, record = run(exporter, [*HISTORY, {"role": "user", "content": FOLLOW_UP}])

    assert record.contexts == ()


def test_message_objects_and_langchain_messages_are_read_alike(
    exporter: InMemorySpanExporter,
) -> None:
    function = SimpleNamespace(name="search_docs", arguments='{"query": "X200 warranty"}')
    messages = [
        SimpleNamespace(type="human", content=QUESTION),
        SimpleNamespace(role="assistant", content=None, tool_calls=[
            SimpleNamespace(id="call_1", function=function)
        ]),
        SimpleNamespace(type="tool", content=WARRANTY, tool_call_id="call_1"),
        SimpleNamespace(type="ai", content="2 years.", tool_calls=[
            {"id": "call_2", "name": "search_docs", "args": {"query": "labour"}}
        ]),
        SimpleNamespace(type="human", content=FOLLOW_UP),
    ]  # fmt: skip
    chat_span, record = run(exporter, messages)

    roles = [m["role"] for m in json.loads(chat_span[semconv.GEN_AI_INPUT_MESSAGES])]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    parts = json.loads(chat_span[semconv.GEN_AI_INPUT_MESSAGES])[3]["parts"]
    assert parts[1]["arguments"] == {"query": "labour"}
    assert [c.id for c in record.contexts] == ["call_1"]


def test_without_content_the_messages_leave_as_ragpulses_length_only(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(capture_content=False))
    chat_span, record = run(exporter, [*HISTORY, {"role": "user", "content": FOLLOW_UP}])

    assert semconv.GEN_AI_INPUT_MESSAGES not in chat_span
    assert semconv.GEN_AI_OUTPUT_MESSAGES not in chat_span
    assert chat_span["ragpulse.input.messages.length"] > len(WARRANTY)
    assert not any(WARRANTY in str(value) for value in chat_span.values())
    # The evaluator still reads the history.
    assert [c.text for c in record.contexts] == [WARRANTY]


def test_messages_past_the_byte_bound_keep_the_newest_turns(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(max_documents_bytes=600))
    padding = [{"role": "user", "content": "x" * 200} for _ in range(10)]
    chat_span, _ = run(exporter, [*padding, *HISTORY, {"role": "user", "content": FOLLOW_UP}])

    messages = json.loads(chat_span[semconv.GEN_AI_INPUT_MESSAGES])
    assert messages[-1]["parts"][0]["content"] == FOLLOW_UP
    assert len(messages) < 15
    truncated = ragpulse_truncated(exporter)
    assert semconv.GEN_AI_INPUT_MESSAGES in truncated


def ragpulse_truncated(exporter: InMemorySpanExporter) -> list[str]:
    [span] = [s for s in exporter.get_finished_spans() if s.name == "chat test-model"]
    return list((span.attributes or {}).get(semconv.RAG_CAPTURE_TRUNCATED, ()))
