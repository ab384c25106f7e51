"""Reading agents' traces: tool results are evidence wherever the conventions put them, the
final answer is the unit, the history counts within bounds, and bad input is bounded."""

from __future__ import annotations

import itertools
import json
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from ragpulse import errors, semconv
from ragpulse.adapters import (
    ToolPolicy,
    TraceBuffer,
    is_buffered,
    is_unit_record,
    read_trace,
    span_facts,
    unjudged_reason,
)
from ragpulse.adapters._agent import (
    MAX_HISTORY_RESULTS,
    MAX_RESOLVED_CHARS,
    is_follow_up,
)
from ragpulse.adapters._tools import MAX_RESULT_CHARS
from ragpulse.evaluation.diagnosis import TOOL_FAILURE, diagnose
from ragpulse.evaluation.types import (
    Claim,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    RagRecord,
    Verdict,
)

TRACE_ID = 0xABC
_ids = itertools.count(1)
_clock = itertools.count(1_000_000_000, 1_000_000)
WARRANTY = "The X200 comes with a 2-year limited warranty."
QUESTION = "What warranty does the X200 have?"
ANSWER = "It has a 2-year limited warranty."


def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    parent: ReadableSpan | None = None,
    status: StatusCode = StatusCode.UNSET,
    start: int | None = None,
    end: int | None = None,
) -> ReadableSpan:
    begin = start if start is not None else next(_clock)
    return ReadableSpan(
        name=name,
        context=SpanContext(TRACE_ID, next(_ids), is_remote=False, trace_flags=TraceFlags(1)),
        parent=parent.context if parent is not None else None,
        attributes=dict(attributes or {}),
        status=Status(status),
        start_time=begin,
        end_time=end if end is not None else begin + 500_000,
    )


def root() -> ReadableSpan:
    return span("agent")


def oi_llm(
    parent: ReadableSpan,
    messages: Sequence[Mapping[str, Any]],
    reply: str | None,
    calls: Sequence[tuple[str, str]] = (),
) -> ReadableSpan:
    attributes: dict[str, Any] = {"openinference.span.kind": "LLM"}
    for i, message in enumerate(messages):
        for key, value in message.items():
            attributes[f"llm.input_messages.{i}.message.{key}"] = value
    attributes["llm.output_messages.0.message.role"] = "assistant"
    if reply is not None:
        attributes["llm.output_messages.0.message.content"] = reply
    for i, (call_id, name) in enumerate(calls):
        prefix = f"llm.output_messages.0.message.tool_calls.{i}.tool_call"
        attributes[f"{prefix}.id"] = call_id
        attributes[f"{prefix}.function.name"] = name
    return span("ChatCompletion", attributes, parent=parent)


def genai_chat(parent: ReadableSpan, messages: list[dict[str, Any]], reply: str) -> ReadableSpan:
    return span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": reply}]}]
            ),
        },
        parent=parent,
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def call(call_id: str, name: str = "search_docs") -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": name}]}


def response(call_id: str, result: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": result}],
    }


def tool_span(parent: ReadableSpan, attributes: Mapping[str, Any], **options: Any) -> ReadableSpan:
    return span("execute_tool search_docs", attributes, parent=parent, **options)


def read(top: ReadableSpan, parts: Sequence[ReadableSpan], **options: Any) -> RagRecord:
    reading = read_trace(top, parts, **options)
    assert reading.record is not None, reading.issues
    return reading.record


# --- where tool results are read --------------------------------------------------------


def test_openinference_tool_span_output_is_evidence_with_its_name_and_source() -> None:
    top = root()
    tool = tool_span(
        top,
        {"openinference.span.kind": "TOOL", "tool.name": "search_docs", "output.value": WARRANTY},
    )
    llm = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)

    record = read(top, [tool, llm])

    [context] = record.contexts
    assert (context.text, context.tool) == (WARRANTY, "search_docs")
    assert record.sources == ((tool.context.span_id, 0, 0, 1),)
    assert record.question == QUESTION
    assert record.answer == ANSWER


def test_openinference_tool_message_is_evidence_named_by_the_assistant_call() -> None:
    top = root()
    llm = oi_llm(
        top,
        [
            {"role": "user", "content": QUESTION},
            {
                "role": "assistant",
                "tool_calls.0.tool_call.id": "c1",
                "tool_calls.0.tool_call.function.name": "search_docs",
            },
            {"role": "tool", "tool_call_id": "c1", "content": WARRANTY},
        ],
        ANSWER,
    )

    [context] = read(top, [llm]).contexts

    assert (context.text, context.id, context.tool) == (WARRANTY, "c1", "search_docs")


def test_genai_execute_tool_result_and_message_part_count_once() -> None:
    top = root()
    tool = tool_span(
        top,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search_docs",
            "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.result": WARRANTY,
        },
    )
    chat = genai_chat(top, [user(QUESTION), call("c1"), response("c1", WARRANTY)], ANSWER)

    record = read(top, [tool, chat])

    [context] = record.contexts
    assert (context.id, context.tool) == ("c1", "search_docs")
    # Sourced to both the tool span and the message that handed it to the model.
    assert {source[0] for source in record.sources} == {
        tool.context.span_id,
        chat.context.span_id,
    }


def test_genai_tool_call_response_in_the_operation_details_event_is_read() -> None:
    from opentelemetry.sdk.trace import Event

    top = root()
    messages = json.dumps([user(QUESTION), call("c1"), response("c1", WARRANTY)])
    chat = ReadableSpan(
        name="chat m",
        context=SpanContext(TRACE_ID, next(_ids), is_remote=False),
        parent=top.context,
        attributes={"gen_ai.operation.name": "chat"},
        events=[
            Event(
                "gen_ai.client.inference.operation.details",
                {
                    "gen_ai.input.messages": messages,
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
                    ),
                },
            )
        ],
        start_time=next(_clock),
        end_time=next(_clock),
    )

    record = read(top, [chat])

    assert [c.text for c in record.contexts] == [WARRANTY]
    assert record.answer == ANSWER


def test_openllmetry_older_prompt_attributes_with_a_tool_role_are_evidence() -> None:
    top = root()
    chat = span(
        "openai.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": QUESTION,
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.tool_calls.0.id": "c1",
            "gen_ai.prompt.1.tool_calls.0.name": "search_docs",
            "gen_ai.prompt.2.role": "tool",
            "gen_ai.prompt.2.tool_call_id": "c1",
            "gen_ai.prompt.2.content": WARRANTY,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": ANSWER,
        },
        parent=top,
    )

    [context] = read(top, [chat]).contexts

    assert (context.text, context.tool) == (WARRANTY, "search_docs")


def test_mcp_tools_call_span_result_is_evidence_and_is_error_a_failure() -> None:
    top = root()
    ok = tool_span(
        top,
        {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": "search_docs",
            "jsonrpc.request.id": "7",
            "gen_ai.tool.call.result": json.dumps(
                {"content": [{"type": "text", "text": WARRANTY}], "isError": False}
            ),
        },
    )
    bad = tool_span(
        top,
        {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": "lookup_price",
            "gen_ai.tool.call.result": json.dumps(
                {"content": [{"type": "text", "text": "boom"}], "isError": True}
            ),
        },
    )
    llm = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)

    record = read(top, [ok, bad, llm])

    assert [(c.text, c.id) for c in record.contexts] == [(WARRANTY, "7")]
    assert record.failed_tools == ("lookup_price",)
    assert is_buffered(ok)


def test_a_json_list_of_documents_gives_one_context_each() -> None:
    top = root()
    result = json.dumps([{"title": "a", "content": WARRANTY}, {"content": "Batteries: 1 year."}])
    tool = tool_span(
        top,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search_docs",
            "gen_ai.tool.call.result": result,
        },
    )
    llm = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)

    record = read(top, [tool, llm])

    assert [c.text for c in record.contexts] == [WARRANTY, "Batteries: 1 year."]
    assert record.sources == ((tool.context.span_id, 0, 0, 2),)


# --- the final answer is the unit ---------------------------------------------------------


def test_an_llm_call_that_asks_for_tools_is_a_step_not_the_answer() -> None:
    top = root()
    step = oi_llm(
        top,
        [{"role": "user", "content": QUESTION}],
        "Let me look that up.",
        calls=[("c1", "search_docs")],
    )
    tool = tool_span(
        top,
        {"openinference.span.kind": "TOOL", "tool.name": "search_docs", "output.value": WARRANTY},
    )
    final = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)

    record = read(top, [step, tool, final])

    assert record.answer == ANSWER
    assert record.attributes[semconv.RAG_ADAPTER_AGENT] is True


def test_a_nested_agents_answer_to_its_caller_is_not_the_unit() -> None:
    top = root()
    outer = tool_span(
        top,
        {"openinference.span.kind": "TOOL", "tool.name": "ask_expert", "output.value": WARRANTY},
        start=next(_clock),
    )
    inner = oi_llm(outer, [{"role": "user", "content": "warranty?"}], WARRANTY)
    # The inner call ends inside the tool span; the outer agent answers later.
    final = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)
    tool = ReadableSpan(
        name=outer.name,
        context=outer.context,
        parent=top.context,
        attributes=outer.attributes,
        start_time=outer.start_time,
        end_time=(inner.end_time or 0) + 1,
    )

    record = read(top, [tool, inner, final])

    assert record.answer == ANSWER


def test_a_trace_whose_last_call_still_asks_for_tools_has_no_answer() -> None:
    top = root()
    step = oi_llm(top, [{"role": "user", "content": QUESTION}], None, calls=[("c1", "search")])

    reading = read_trace(top, [step])

    assert reading.record is None or reading.record.answer is None
    assert not is_unit_record(reading.record)


def test_an_agent_answer_without_evidence_is_a_unit_skipped_no_evidence() -> None:
    top = root()
    llm = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)
    llm_attributes = dict(llm.attributes or {})
    llm_attributes["llm.tools.0.tool.json_schema"] = "{}"
    offered = span("ChatCompletion", llm_attributes, parent=top)

    record = read(top, [offered])

    assert is_unit_record(record)
    assert unjudged_reason(record) == (errors.NO_EVIDENCE, unjudged_reason(record)[1])  # type: ignore[index]


@pytest.mark.parametrize("operation", ["invoke_agent", "invoke_workflow", "create_agent", "plan"])
def test_a_root_of_any_agent_operation_makes_an_answer_without_evidence_an_agents(
    operation: str,
) -> None:
    top = span("support", {semconv.GEN_AI_OPERATION_NAME: operation})
    chat = genai_chat(top, [user(QUESTION)], ANSWER)

    record = read(top, [chat])

    assert is_unit_record(record)
    assert unjudged_reason(record) is not None
    assert unjudged_reason(record)[0] == errors.NO_EVIDENCE  # type: ignore[index]


def test_the_answering_calls_response_id_travels_with_the_record() -> None:
    top = root()
    chat = genai_chat(top, [user(QUESTION), call("c1"), response("c1", WARRANTY)], ANSWER)
    attributes = {**(chat.attributes or {}), semconv.GEN_AI_RESPONSE_ID: "chatcmpl-42"}
    answered = span("chat m", attributes, parent=top)

    record = read(top, [answered])

    assert record.attributes[semconv.GEN_AI_RESPONSE_ID] == "chatcmpl-42"


def test_a_plain_chat_without_tools_or_passages_is_not_a_unit() -> None:
    top = root()
    llm = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)

    assert not is_unit_record(read_trace(top, [llm]).record)


# --- failures -------------------------------------------------------------------------------


def test_a_tool_span_with_error_status_or_empty_result_is_a_failed_tool() -> None:
    top = root()
    errored = tool_span(
        top,
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_docs"},
        status=StatusCode.ERROR,
    )
    empty = tool_span(
        top,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "faq",
            "gen_ai.tool.call.result": "[]",
        },
    )
    llm = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)

    record = read(top, [errored, empty, llm])

    assert record.failed_tools == ("search_docs", "faq")
    assert record.contexts == ()
    assert unjudged_reason(record) is None  # judged: diagnosed tool_failure


def test_tool_failure_diagnosis_names_the_failed_tool() -> None:
    record = RagRecord(QUESTION, (), ANSWER, failed_tools=("search_docs",))
    evaluation = Evaluation(
        status=EvalStatus.OK,
        metrics={},
        judge="t",
        annotator_kind="CODE",
        claims=(ClaimVerdict(Claim(ANSWER), Verdict.NOT_FOUND),),
    )

    diagnosed = diagnose(evaluation, record)

    assert diagnosed.diagnosis == TOOL_FAILURE
    assert "search_docs" in (diagnosed.diagnosis_reason or "")


def test_a_supported_answer_despite_a_failed_tool_is_not_a_tool_failure() -> None:
    record = RagRecord(QUESTION, (), ANSWER, failed_tools=("search_docs",))
    evaluation = Evaluation(
        status=EvalStatus.OK,
        metrics={},
        judge="t",
        annotator_kind="CODE",
        claims=(ClaimVerdict(Claim(ANSWER), Verdict.SUPPORTED),),
    )

    assert diagnose(evaluation, record).diagnosis != TOOL_FAILURE


def test_action_tools_are_never_evidence_nor_failures() -> None:
    top = root()
    calc = tool_span(
        top,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "calculator",
            "gen_ai.tool.call.result": "42",
        },
    )
    booking = tool_span(
        top,
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "book_flight"},
        status=StatusCode.ERROR,
    )
    marked = tool_span(
        top,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "notes",
            "gen_ai.tool.call.result": "saved",
            "ragpulse.tool.evidence": False,
        },
    )
    llm = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)

    record = read(
        top, [calc, booking, marked, llm], tools=ToolPolicy(action=("calculator", "book_*"))
    )

    assert record.contexts == ()
    assert record.failed_tools == ()


# --- conversations --------------------------------------------------------------------------


def test_history_results_count_most_recent_first_within_the_bound() -> None:
    top = root()
    messages: list[dict[str, Any]] = []
    for turn in range(MAX_HISTORY_RESULTS + 10):
        messages += [
            user(f"question {turn}"),
            call(f"c{turn}"),
            response(f"c{turn}", f"fact {turn}"),
        ]
    messages.append(user("And the next one?"))
    chat = genai_chat(top, messages, ANSWER)

    reading = read_trace(top, [chat])

    assert reading.record is not None
    got = [c.text for c in reading.record.contexts]
    latest = MAX_HISTORY_RESULTS + 9
    assert got == [f"fact {latest - i}" for i in range(MAX_HISTORY_RESULTS)]
    assert any("history" in issue for issue in reading.issues)


def test_a_follow_up_is_judged_with_the_turn_it_follows() -> None:
    top = root()
    messages = [
        user("How long does the X200 take to charge?"),
        response("c1", "Two hours."),
        user("And with the fast charger?"),
    ]
    chat = genai_chat(top, messages, "With the fast charger it takes 40 minutes.")

    record = read(top, [chat])

    assert record.question == "How long does the X200 take to charge?\nAnd with the fast charger?"


def test_a_self_contained_question_is_judged_alone() -> None:
    assert not is_follow_up("What is the return policy for the X200 headphones?")
    assert is_follow_up("And with the fast charger?")
    assert is_follow_up("Does it float?")


def test_the_resolved_question_keeps_at_most_the_bound_of_the_earlier_turn() -> None:
    top = root()
    chat = genai_chat(top, [user("x " * 5000), response("c", WARRANTY), user("And it?")], ANSWER)

    record = read(top, [chat])

    assert record.question is not None
    assert len(record.question) <= MAX_RESOLVED_CHARS + len("\nAnd it?")


def test_the_conversation_id_is_read_from_the_root_or_session_id() -> None:
    top = span("agent", {"session.id": "s-1"})
    chat = genai_chat(top, [user(QUESTION), call("c1"), response("c1", WARRANTY)], ANSWER)

    assert read(top, [chat]).conversation_id == "s-1"


# --- bad input ------------------------------------------------------------------------------


def test_malformed_tool_results_are_counted_never_raised() -> None:
    top = root()
    parts = [
        tool_span(top, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": 17}),
        tool_span(
            top, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": "{bad"}
        ),
        tool_span(
            top, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": "[" * 100_000}
        ),
        tool_span(
            top,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.result": "x" * (MAX_RESULT_CHARS + 10),
            },
        ),
        genai_chat(
            top,
            [
                user(QUESTION),
                {
                    "role": "tool",
                    "parts": [
                        {"type": "tool_call_response", "id": ["not", "an", "id"], "response": None}
                    ],
                },
            ],
            ANSWER,
        ),
    ]

    reading = read_trace(top, parts)

    assert reading.record is not None
    assert reading.skipped >= 2
    assert all(len(c.text) <= MAX_RESULT_CHARS for c in reading.record.contexts)


def test_tool_results_whose_call_id_matches_nothing_are_evidence_and_noted() -> None:
    top = root()
    chat = genai_chat(top, [user(QUESTION), response("ghost", WARRANTY)], ANSWER)

    reading = read_trace(top, [chat])

    assert reading.record is not None
    assert [c.id for c in reading.record.contexts] == ["ghost"]
    assert any("ghost" in issue for issue in reading.issues)


def test_ten_thousand_tool_calls_are_read_in_bounded_time_and_memory() -> None:
    top = root()
    parts = [
        tool_span(
            top,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_docs",
                "gen_ai.tool.call.id": f"c{i}",
                "gen_ai.tool.call.result": f"fact {i % 50}",
            },
        )
        for i in range(10_000)
    ]
    parts.append(oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER))
    tracemalloc.start()
    started = time.process_time()

    reading = read_trace(top, parts)

    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert reading.record is not None
    # The same text from 200 calls is one context; its sources are bounded by the calls.
    assert len(reading.record.contexts) == 50
    assert len(reading.record.sources) == 10_000
    assert peak < 64 * 1024 * 1024
    assert time.process_time() - started < 60  # a bound for a hang, not a timing


def test_a_trace_past_the_buffer_bounds_is_a_unit_skipped_too_large() -> None:
    buffer = TraceBuffer(max_spans_per_trace=16)
    top = root()
    parts = [
        tool_span(
            top,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_docs",
                "gen_ai.tool.call.result": f"fact {i}",
            },
        )
        for i in range(10_000)
    ]
    held = [buffer.add(part) for part in parts]
    spans, refused = buffer.take(TRACE_ID)

    record = read_trace(top, spans, refused=refused).record

    assert sum(held) == 16 and refused == 10_000 - 16
    assert record is not None and is_unit_record(record)
    assert unjudged_reason(record) is not None
    assert unjudged_reason(record)[0] == errors.TOO_LARGE  # type: ignore[index]


def test_a_thousand_turn_history_is_read_in_bounded_time() -> None:
    top = root()
    messages: list[dict[str, Any]] = []
    for turn in range(1000):
        messages += [
            user(f"question {turn}"),
            call(f"c{turn}"),
            response(f"c{turn}", f"fact {turn} " * 20),
            {"role": "assistant", "parts": [{"type": "text", "content": f"answer {turn}"}]},
        ]
    messages.append(user(QUESTION))
    chat = genai_chat(top, messages, ANSWER)

    reading = read_trace(top, [chat])

    assert reading.record is not None
    assert reading.record.question == QUESTION
    assert len(reading.record.contexts) == MAX_HISTORY_RESULTS
    assert span_facts(chat).agent
