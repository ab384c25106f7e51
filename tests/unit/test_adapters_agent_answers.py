"""Which answers of an agent's trace are final answers to the user: one unit each, with its
own question, its own evidence and its own span; steps, rewrites, retries and a nested
agent's answer to its caller are not."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.trace import StatusCode
from tests.unit.test_adapters_agents import (
    QUESTION,
    WARRANTY,
    call,
    genai_chat,
    response,
    root,
    tool_span,
    user,
)

from ragpulse.adapters import is_unit_record, read_trace, records_from_trace
from ragpulse.evaluation.types import RagRecord

WATER = "The limited warranty does not cover water damage."
FIRST = "It has a 2-year limited warranty."
SECOND = "No, water damage is not covered."
FOLLOW_UP = "Does the warranty cover water damage?"


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def genai_tool(parent: Any, call_id: str, result: str | None, **options: Any) -> Any:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_docs",
        "gen_ai.tool.call.id": call_id,
    }
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result
    return tool_span(parent, attributes, **options)


def step(parent: Any, messages: list[dict[str, Any]], call_id: str) -> Any:
    """A chat call whose output asks for the search tool."""
    span = genai_chat(parent, messages, "")
    attributes = dict(span.attributes or {})
    attributes["gen_ai.output.messages"] = json.dumps([call(call_id)])
    attributes["gen_ai.response.finish_reasons"] = ("tool_calls",)
    return type(span)(
        name=span.name,
        context=span.context,
        parent=span.parent,
        attributes=attributes,
        start_time=span.start_time,
        end_time=span.end_time,
    )


def two_turns(*, first_tool_fails: bool = False) -> tuple[Any, list[Any], dict[str, Any]]:
    """One root serving two user turns; each turn calls the tool, then answers."""
    top = root()
    turn1 = [user(QUESTION)]
    step1 = step(top, turn1, "c1")
    tool1 = genai_tool(
        top,
        "c1",
        None if first_tool_fails else WARRANTY,
        status=StatusCode.ERROR if first_tool_fails else StatusCode.UNSET,
    )
    turn1 = [*turn1, call("c1"), response("c1", "search failed" if first_tool_fails else WARRANTY)]
    answer1 = genai_chat(top, turn1, FIRST)
    turn2 = [*turn1, assistant(FIRST), user(FOLLOW_UP)]
    step2 = step(top, turn2, "c2")
    tool2 = genai_tool(top, "c2", WATER)
    answer2 = genai_chat(top, [*turn2, call("c2"), response("c2", WATER)], SECOND)
    spans = [step1, tool1, answer1, step2, tool2, answer2]
    named = {"top": top, "answer1": answer1, "answer2": answer2, "tool1": tool1, "tool2": tool2}
    return top, spans, named


def units(top: Any, spans: list[Any]) -> list[RagRecord]:
    return [record for record in records_from_trace(top, spans) if is_unit_record(record)]


def test_two_user_turns_under_one_root_are_two_units_in_the_order_given() -> None:
    top, spans, named = two_turns()

    first, second = units(top, spans)

    assert (first.question, first.answer) == (QUESTION, FIRST)
    assert (second.question, second.answer) == (FOLLOW_UP, SECOND)
    # The earlier answer's scores go onto the call that gave it; the last one's on the root.
    assert first.span_context == named["answer1"].context
    assert second.span_context == top.context
    assert read_trace(top, spans).record == second


def test_each_answer_has_the_evidence_fetched_for_it_then_the_history() -> None:
    top, spans, named = two_turns()

    first, second = units(top, spans)

    assert [c.text for c in first.contexts] == [WARRANTY]
    assert {source[0] for source in first.sources} == {
        named["tool1"].context.span_id,
        named["answer1"].context.span_id,
    }
    # The second turn's own result first; the first turn's from the history after it.
    assert [c.text for c in second.contexts] == [WATER, WARRANTY]
    assert named["tool1"].context.span_id not in {source[0] for source in second.sources}


def test_a_tool_that_failed_in_one_turn_is_that_answers_failure_only() -> None:
    top, spans, _ = two_turns(first_tool_fails=True)

    first, second = units(top, spans)

    assert first.failed_tools == ("search_docs",)
    assert second.failed_tools == ()


def test_an_earlier_answer_nobody_replied_to_is_not_a_unit() -> None:
    # A call that rewrites the question answers no user: its output never comes back as the
    # assistant's turn, and the trace stays one unit, the last answer.
    top = root()
    rewrite = genai_chat(top, [user(f"Rewrite as a search query: {QUESTION}")], "X200 warranty")
    tool = genai_tool(top, "c1", WARRANTY)
    final = genai_chat(top, [user(QUESTION), call("c1"), response("c1", WARRANTY)], FIRST)

    [unit] = units(top, [rewrite, tool, final])

    assert unit.span_context == top.context
    assert unit.answer == FIRST
    assert [c.text for c in unit.contexts] == [WARRANTY]


def test_a_nested_agents_answer_handed_back_as_a_tool_result_is_not_a_final_answer() -> None:
    # The sub-agent runs without a tool span around it; its answer reaches the parent as a
    # tool message, never as the assistant's turn the user replied to.
    top = root()
    inner = genai_chat(top, [user("Find the X200 warranty terms.")], WARRANTY)
    turn1 = [user(QUESTION), call("c1", "ask_expert"), response("c1", WARRANTY)]
    answer1 = genai_chat(top, turn1, FIRST)
    answer2 = genai_chat(top, [*turn1, assistant(FIRST), user(FOLLOW_UP)], SECOND)

    records = units(top, [inner, answer1, answer2])

    assert [record.answer for record in records] == [FIRST, SECOND]
    assert records[0].span_context == answer1.context


def test_a_final_call_retried_for_the_same_turn_is_one_unit() -> None:
    top = root()
    turn1 = [user(QUESTION), call("c1"), response("c1", WARRANTY)]
    failed_try = genai_chat(top, turn1, FIRST)
    retried = genai_chat(top, turn1, FIRST)
    answer2 = genai_chat(top, [*turn1, assistant(FIRST), user(FOLLOW_UP)], SECOND)

    first, second = units(top, [failed_try, retried, answer2])

    assert first.span_context == retried.context
    assert second.answer == SECOND


def test_a_conversation_carried_from_earlier_traces_is_history_not_units() -> None:
    # The earlier answers were given in other traces: this trace has one answer, its own.
    top = root()
    history = [user(QUESTION), call("c1"), response("c1", WARRANTY), assistant(FIRST)]
    answer = genai_chat(top, [*history, user(FOLLOW_UP)], SECOND)

    [unit] = units(top, [answer])

    assert unit.span_context == top.context
    assert unit.question == FOLLOW_UP
    assert [c.text for c in unit.contexts] == [WARRANTY]


def test_every_answer_of_a_long_conversation_under_one_root_is_a_unit() -> None:
    top = root()
    messages: list[dict[str, Any]] = []
    spans = []
    for turn in range(50):
        messages += [user(f"question {turn} about the X200"), call(f"c{turn}")]
        messages.append(response(f"c{turn}", f"fact {turn} of the X200"))
        spans.append(genai_chat(top, list(messages), f"answer {turn}"))
        messages.append(assistant(f"answer {turn}"))

    records = units(top, spans)

    assert [record.answer for record in records] == [f"answer {turn}" for turn in range(50)]
    assert len({record.span_context.span_id for record in records if record.span_context}) == 50
    assert records[7].contexts[0].text == "fact 7 of the X200"
