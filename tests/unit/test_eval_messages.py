"""``ragpulse eval`` records that carry an agent's chat ``messages`` instead of ``contexts``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ragpulse import errors
from ragpulse.adapters import ToolPolicy
from ragpulse.evaluation.types import Context, EvalStatus, Evaluation
from ragpulse.judges.lexical import LexicalJudge
from ragpulse.offline.evaluate import (
    BadLine,
    InputRecord,
    evaluate_stream,
    read_records,
    result_to_json,
)
from ragpulse.offline.messages import MAX_TOOL_RESULTS, UNNAMED_TOOL, read_messages

WARRANTY = "The X200 comes with a 2-year limited warranty covering parts and labour."
CHARGER = "The X200 fast charger fills the battery to 80 percent in 30 minutes."


def call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def agent_turn(
    question: str, call_id: str, tool: str, result: str, answer: str
) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": "Let me look that up.",
            "tool_calls": [call(call_id, tool)],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
        {"role": "assistant", "content": answer},
    ]


SYSTEM = {"role": "system", "content": "You answer questions about our products."}
GROUNDED = [
    SYSTEM,
    *agent_turn(
        "What warranty does the X200 have?",
        "call_1",
        "search_docs",
        WARRANTY,
        "The X200 has a 2-year limited warranty covering parts and labour.",
    ),
]


def parse(*lines: dict[str, Any] | str, roles: ToolPolicy | None = None) -> list[Any]:
    text = [line if isinstance(line, str) else json.dumps(line) for line in lines]
    return list(read_records(text, roles=roles))


def one(line: dict[str, Any], roles: ToolPolicy | None = None) -> InputRecord:
    (item,) = parse(line, roles=roles)
    assert isinstance(item, InputRecord), item
    return item


def bad(line: dict[str, Any] | str) -> BadLine:
    (item,) = parse(line)
    assert isinstance(item, BadLine), item
    return item


def evaluate(*items: InputRecord) -> list[Evaluation]:
    async def run() -> list[Evaluation]:
        found = []
        async for _, evaluation in evaluate_stream(items, LexicalJudge(), ["groundedness"]):
            assert evaluation is not None
            found.append(evaluation)
        return found

    return asyncio.run(run())


def test_question_answer_and_tool_results_are_read_from_the_messages() -> None:
    record = one({"id": "a", "messages": GROUNDED}).record
    assert record.question == "What warranty does the X200 have?"
    assert record.answer == "The X200 has a 2-year limited warranty covering parts and labour."
    assert list(record.contexts) == [Context(WARRANTY, "call_1", tool="search_docs")]


def test_text_beside_a_tool_call_is_not_the_answer() -> None:
    messages = [*GROUNDED[:3]]  # the turn ends at the tool call: no final answer yet
    item = bad({"id": "a", "messages": messages})
    assert "no answer" in item.reason


def test_the_records_own_answer_wins_over_the_messages() -> None:
    record = one({"messages": GROUNDED, "answer": "Two years."}).record
    assert record.answer == "Two years."


def test_the_latest_user_turn_is_the_question_and_earlier_results_are_evidence() -> None:
    messages = [
        *GROUNDED,
        *agent_turn(
            "And with the fast charger?",
            "call_2",
            "search_docs",
            CHARGER,
            "The fast charger reaches 80 percent in 30 minutes.",
        ),
    ]
    record = one({"messages": messages, "conversation_id": "c1"}).record
    assert record.question == "And with the fast charger?"
    assert record.answer == "The fast charger reaches 80 percent in 30 minutes."
    # The most recent result first, the earlier turn's still there.
    assert [(c.text, c.id) for c in record.contexts] == [(CHARGER, "call_2"), (WARRANTY, "call_1")]
    assert record.conversation_id == "c1"


def test_content_parts_are_read_as_their_text() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "What warranty?"}]},
        {"role": "assistant", "content": None, "tool_calls": [call("c", "search_docs")]},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": WARRANTY}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Two years."}]},
    ]
    record = one({"messages": messages}).record
    assert record.question == "What warranty?"
    assert record.contexts[0].text == WARRANTY
    assert record.answer == "Two years."


def test_parallel_tool_calls_each_keep_their_tool_name() -> None:
    messages = [
        {"role": "user", "content": "Warranty and charging?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("a", "search_docs"), call("b", "get_specs")],
        },
        {"role": "tool", "tool_call_id": "b", "content": CHARGER},
        {"role": "tool", "tool_call_id": "a", "content": WARRANTY},
        {"role": "assistant", "content": "Two years; 80 percent in 30 minutes."},
    ]
    contexts = one({"messages": messages}).record.contexts
    assert [(c.tool, c.id) for c in contexts] == [("search_docs", "a"), ("get_specs", "b")]


def test_a_tool_call_id_that_matches_nothing_is_still_evidence() -> None:
    messages = [
        {"role": "user", "content": "Warranty?"},
        {"role": "tool", "tool_call_id": "ghost", "content": WARRANTY},
        {"role": "tool", "tool_call_id": "ghost2", "name": "lookup", "content": CHARGER},
        {"role": "assistant", "content": "Two years."},
    ]
    contexts = one({"messages": messages}).record.contexts
    assert [(c.tool, c.id) for c in contexts] == [("lookup", "ghost2"), (UNNAMED_TOOL, "ghost")]


def test_an_acting_tool_is_no_evidence() -> None:
    messages = [
        {"role": "user", "content": "Book a repair and tell me the warranty."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("a", "book_repair"), call("b", "search_docs")],
        },
        {"role": "tool", "tool_call_id": "a", "content": "Repair booked for Monday."},
        {"role": "tool", "tool_call_id": "b", "content": WARRANTY},
        {"role": "assistant", "content": "Booked; the warranty is 2 years."},
    ]
    record = one({"messages": messages}, roles=ToolPolicy(action=("book_*",))).record
    assert [c.tool for c in record.contexts] == ["search_docs"]


@pytest.mark.parametrize(
    "result",
    ["", "   ", "null", "[]", '{"error": "index offline"}', '{"isError": true, "content": []}'],
)
def test_an_empty_or_error_result_names_the_tool_as_failed(result: str) -> None:
    messages = [
        {"role": "user", "content": "Warranty?"},
        {"role": "assistant", "content": None, "tool_calls": [call("a", "search_docs")]},
        {"role": "tool", "tool_call_id": "a", "content": result},
        {"role": "assistant", "content": "It has a lifetime warranty."},
    ]
    item = one({"messages": messages})
    assert item.record.failed_tools == ("search_docs",)
    assert item.record.contexts == ()
    assert item.skip is None  # judged: its diagnosis says the tool failed


def test_a_result_that_reports_an_error_field_beside_its_data_is_evidence() -> None:
    result = json.dumps({"results": [WARRANTY], "error": None})
    messages = [
        {"role": "user", "content": "Warranty?"},
        {"role": "assistant", "content": None, "tool_calls": [call("a", "search_docs")]},
        {"role": "tool", "tool_call_id": "a", "content": result},
        {"role": "assistant", "content": "Two years."},
    ]
    record = one({"messages": messages}).record
    assert record.failed_tools == () and record.contexts[0].text == result


def test_a_failure_in_an_earlier_turn_does_not_fail_a_later_answer() -> None:
    messages = [
        {"role": "user", "content": "Warranty?"},
        {"role": "assistant", "content": None, "tool_calls": [call("a", "search_docs")]},
        {"role": "tool", "tool_call_id": "a", "content": ""},
        {"role": "assistant", "content": "I could not find it."},
        *agent_turn("Try again?", "b", "search_docs", WARRANTY, "Two years."),
    ]
    record = one({"messages": messages}).record
    assert record.failed_tools == ()
    assert [c.id for c in record.contexts] == ["b"]


def test_messages_without_any_evidence_are_skipped_no_evidence() -> None:
    messages = [
        {"role": "user", "content": "What is 17 times 23?"},
        {"role": "assistant", "content": "391."},
    ]
    item = one({"id": "calc", "messages": messages})
    assert item.skip == errors.NO_EVIDENCE
    (evaluation,) = evaluate(item)
    assert evaluation.status is EvalStatus.SKIPPED
    assert evaluation.error_type == errors.NO_EVIDENCE
    row = result_to_json(item, evaluation)
    assert (row["status"], row["error_type"]) == ("skipped", "no_evidence")


def test_a_grounded_agent_answer_scores_high_and_an_invented_one_low() -> None:
    invented = json.loads(json.dumps(GROUNDED))
    invented[-1]["content"] = "The X200 has a lifetime warranty and free annual servicing."
    good, made_up = evaluate(one({"messages": GROUNDED}), one({"messages": invented}))
    assert good.status is EvalStatus.OK and made_up.status is EvalStatus.OK
    assert good.score("groundedness") == 1.0
    assert (made_up.score("groundedness") or 0.0) < 0.5


def test_the_conversation_id_is_written_with_the_result_only_when_given() -> None:
    with_id = one({"id": "t2", "messages": GROUNDED, "conversation_id": "conv-9"})
    without = one({"id": "t3", "messages": GROUNDED})
    first, second = evaluate(with_id, without)
    assert result_to_json(with_id, first)["conversation_id"] == "conv-9"
    assert "conversation_id" not in result_to_json(without, second)


def test_a_plain_record_carries_its_conversation_id_too() -> None:
    record = one({"contexts": [WARRANTY], "answer": "Two years.", "conversation_id": 12}).record
    assert record.conversation_id == "12"


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ("hello", "'messages' must be a list"),
        ([1], "'messages[0]' must be an object"),
        ([{"content": "hi"}], "'messages[0].role' must be one of"),
        ([{"role": "robot", "content": "hi"}], "'messages[0].role' must be one of"),
        ([{"role": "user", "content": 5}], "'messages[0].content' must be a string"),
        ([{"role": "user", "content": [{"type": "text"}]}], "'messages[0].content[0]' has no text"),
        ([{"role": "assistant", "content": "x", "tool_calls": {}}], "'messages[0].tool_calls'"),
        ([{"role": "tool", "tool_call_id": 3, "content": "x"}], "'messages[0].tool_call_id'"),
    ],
)
def test_malformed_messages_are_an_invalid_line_saying_what_is_wrong(
    messages: Any, says: str
) -> None:
    item = bad({"id": "m", "messages": messages, "answer": "a"})
    assert says in item.reason
    assert item.record_id == "m"


def test_a_malformed_line_among_good_ones_leaves_them_evaluated() -> None:
    items = parse(
        {"id": "1", "messages": GROUNDED},
        {"id": "2", "messages": [{"role": 7}], "answer": "x"},
        {"id": "3", "messages": GROUNDED},
    )
    assert [type(i).__name__ for i in items] == ["InputRecord", "BadLine", "InputRecord"]


def test_a_long_history_is_read_whole_and_its_evidence_bounded() -> None:
    messages: list[dict[str, Any]] = []
    for turn in range(1_000):
        messages.extend(
            agent_turn(
                f"Question {turn}?", f"call_{turn}", "search_docs", f"Result {turn}.", f"A{turn}."
            )
        )
    record = one({"messages": messages}).record
    assert record.question == "Question 999?"
    assert record.answer == "A999."
    assert len(record.contexts) == MAX_TOOL_RESULTS
    assert record.contexts[0].id == "call_999"


def test_ten_thousand_tool_messages_in_one_turn_keep_the_most_recent() -> None:
    calls = [call(f"c{i}", "search_docs") for i in range(10_000)]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Everything?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *(
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"Result {i}."}
            for i in range(10_000)
        ),
        {"role": "assistant", "content": "Done."},
    ]
    conversation = read_messages(messages)
    assert conversation.tool_results == 10_000
    assert len(conversation.contexts) == MAX_TOOL_RESULTS
    assert conversation.omitted == 10_000 - MAX_TOOL_RESULTS
    assert conversation.contexts[0].id == "c9999"
