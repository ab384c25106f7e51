"""The whole vector from ``OpenAIJudge``, against a real Chat Completions server on loopback.

The server answers as a model would (scripted JSON); what is tested is what the
judge asks, what it makes of the replies, and that it stays within two calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.cases import parts_missed, worked_example
from tests.servers.chat_server import ChatServer, Reply, chat_server_fixture

from ragpulse.evaluation.types import (
    CITATION,
    COMPLETENESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    RELEVANCY,
    Context,
    EvalStatus,
    RagRecord,
)
from ragpulse.judges.llm.openai import OpenAIJudge

pytestmark = pytest.mark.integration

chat_server = chat_server_fixture()

# The answer's metrics: at most two calls. The context metrics' call is tested on its own.
METRICS = (FAITHFULNESS, GROUNDEDNESS, "correctness", RELEVANCY, COMPLETENESS, CITATION)
CONTEXT_METRICS = ("context_relevance", "context_precision", "context_recall")


@pytest.fixture
async def judge(chat_server: ChatServer) -> AsyncIterator[OpenAIJudge]:
    judge = OpenAIJudge("judge-model", base_url=chat_server.url, api_key="test-key", timeout=5.0)
    yield judge
    await judge.aclose()


def _claim(text: str, context: int | None, quote: str | None, supported_by: list[int]) -> Any:
    verdict = "SUPPORTED" if quote else "NOT_FOUND"
    return {
        "claim": text,
        "context": context,
        "quote": quote,
        "reason": "",
        "verdict": verdict,
        "supported_by": supported_by,
    }


def _first_reply(**extra: Any) -> dict[str, Any]:
    claims = [
        _claim(text, context, quote, [context] if context else [])
        for text, context, quote in worked_example.JUDGED_CLAIMS
    ]
    return {
        "claims": claims,
        "question_parts": [
            {"part": "What are the side effects of Lumarex", "addressed": True},
            {"part": "what dose should I take", "addressed": True},
        ],
        "abstained": False,
        "answerable": True,
        **extra,
    }


SECOND_REPLY = {
    "answer_claims": [{"number": n, "supported": True} for n in range(1, 5)],
    "reference_claims": [
        {"claim": "Lumarex can cause nausea, headache, dizziness and hair loss", "covered": True},
        {"claim": "The recommended dose is 200 mg", "covered": True},
    ],
    "required_points": [
        {"number": 1, "covered": True, "quote": "nausea and headache"},
        {"number": 2, "covered": True, "quote": "200 mg"},
        {"number": 3, "covered": False, "quote": None},
    ],
}


async def test_worked_example_gives_the_five_scores_in_two_calls(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    chat_server.script(Reply.json(_first_reply()), Reply.json(SECOND_REPLY))
    evaluation = await judge.evaluate(worked_example.record(), METRICS)
    assert evaluation.status is EvalStatus.OK, evaluation.explanation
    for metric, expected in worked_example.EXPECTED.items():
        assert evaluation.score(metric) == pytest.approx(expected), metric
    assert chat_server.request_count == 2
    assert evaluation.usage.calls == 2


async def test_the_first_call_asks_for_supporters_parts_and_answerability(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    chat_server.script(Reply.json(_first_reply()), Reply.json(SECOND_REPLY))
    await judge.evaluate(worked_example.record(), METRICS)
    first, second = chat_server.chat_requests
    schema = first.body["response_format"]["json_schema"]["schema"]
    assert {"claims", "question_parts", "abstained", "answerable"} <= set(schema["properties"])
    assert "supported_by" in first.system
    # The rubric is checked in the reference's call, fenced as data like the rest.
    assert "REQUIRED_POINTS" in second.user
    assert "frequency: once daily" in second.user
    assert "nonce=" in second.user.split("REQUIRED_POINTS", 1)[1]


async def test_a_citation_holds_only_where_the_cited_passage_supports_the_claim(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    chat_server.script(Reply.json(_first_reply()), Reply.json(SECOND_REPLY))
    evaluation = await judge.evaluate(worked_example.record(), METRICS)
    assert [c.cited for c in evaluation.claims] == [(0,), (0,), (1,), (1,)]
    assert [c.citation_holds for c in evaluation.claims] == [True, True, False, True]
    assert evaluation.score(CITATION) == 0.75


async def test_a_citation_to_the_wrong_passage_does_not_hold_though_another_supports_it(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    record = RagRecord(
        worked_example.QUESTION, worked_example.CONTEXTS, "Lumarex can cause dizziness [2]."
    )
    reply = {
        "claims": [
            _claim(
                "Lumarex can cause dizziness", 1, "it can cause nausea, headache and dizziness", [1]
            )
        ],
        "question_parts": [{"part": worked_example.QUESTION, "addressed": False}],
        "abstained": False,
        "answerable": True,
    }
    chat_server.script(Reply.json(reply))
    evaluation = await judge.evaluate(record, (GROUNDEDNESS, CITATION))
    assert evaluation.score(GROUNDEDNESS) == 1.0
    assert evaluation.score(CITATION) == 0.0
    assert chat_server.request_count == 1


async def test_an_off_question_answer_scores_low_relevancy(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    record = RagRecord(
        "What dose of Lumarex should I take?",
        worked_example.CONTEXTS,
        "Lumarex can cause nausea, headache and dizziness.",
    )
    reply = {
        "claims": [_claim(record.answer or "", 1, "it can cause nausea, headache", [1])],
        "question_parts": [{"part": "What dose of Lumarex should I take", "addressed": False}],
        "abstained": False,
        "answerable": True,
    }
    chat_server.script(Reply.json(reply))
    evaluation = await judge.evaluate(record, (FAITHFULNESS, RELEVANCY))
    assert evaluation.score(FAITHFULNESS) == 1.0
    assert evaluation.score(RELEVANCY) == 0.0


async def test_an_unwarranted_abstention_scores_groundedness_zero(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    record = RagRecord(
        "What dose of Lumarex should I take?", worked_example.CONTEXTS, "I do not know."
    )
    chat_server.script(Reply.json({"claims": [], "abstained": True, "answerable": True}))
    evaluation = await judge.evaluate(record, (FAITHFULNESS, GROUNDEDNESS))
    assert evaluation.score(GROUNDEDNESS) == 0.0
    assert (evaluation.abstained, evaluation.answerable) == (True, True)


async def test_an_abstention_the_contexts_cannot_answer_leaves_groundedness_undefined(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    record = RagRecord(
        "Is Lumarex safe for children?",
        (Context("Lumarex is sold in blue boxes."),),
        "I don't know.",
    )
    chat_server.script(Reply.json({"claims": [], "abstained": True, "answerable": False}))
    evaluation = await judge.evaluate(record, (FAITHFULNESS, GROUNDEDNESS))
    assert evaluation.score(GROUNDEDNESS) is None
    assert evaluation.status is EvalStatus.NO_CLAIMS
    assert (evaluation.abstained, evaluation.answerable) == (True, False)


async def test_a_rubric_without_reference_is_checked_in_the_second_call(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    record = RagRecord(
        worked_example.QUESTION,
        worked_example.CONTEXTS,
        worked_example.ANSWER,
        rubric=worked_example.RUBRIC,
    )
    chat_server.script(
        Reply.json(_first_reply()),
        Reply.json({"required_points": SECOND_REPLY["required_points"]}),
    )
    evaluation = await judge.evaluate(record, METRICS)
    assert evaluation.score(COMPLETENESS) == pytest.approx(2 / 3)
    assert chat_server.request_count == 2
    assert "frequency: once daily" in (evaluation.metrics[COMPLETENESS].explanation or "")


async def test_completeness_without_rubric_or_reference_is_undefined(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    record = RagRecord(worked_example.QUESTION, worked_example.CONTEXTS, worked_example.ANSWER)
    chat_server.script(Reply.json(_first_reply()))
    evaluation = await judge.evaluate(record, METRICS)
    assert evaluation.score(COMPLETENESS) is None
    assert chat_server.request_count == 1


async def test_completeness_without_rubric_uses_the_reference_claims_from_the_second_call(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    record = RagRecord(
        worked_example.QUESTION,
        worked_example.CONTEXTS,
        worked_example.ANSWER,
        reference=worked_example.REFERENCE,
    )
    second = {
        "answer_claims": SECOND_REPLY["answer_claims"],
        "reference_claims": [
            {"claim": "Lumarex can cause nausea, headache and dizziness", "covered": True},
            {"claim": "It is taken once daily", "covered": False},
        ],
    }
    chat_server.script(Reply.json(_first_reply()), Reply.json(second))
    evaluation = await judge.evaluate(record, (FAITHFULNESS, COMPLETENESS))
    assert evaluation.score(COMPLETENESS) == 0.5
    assert chat_server.request_count == 2


async def test_slices_are_the_same_cuts_as_the_offline_judge_makes(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    chat_server.script(Reply.json(_first_reply()), Reply.json(SECOND_REPLY))
    evaluation = await judge.evaluate(worked_example.record(), METRICS)
    assert evaluation.slices == {
        "sources": "multi",
        "question": "multi_part",
        "abstained": "false",
        "cited": "true",
    }


async def test_strict_mode_counts_the_llm_judges_inferred_claims_as_unfaithful(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    from ragpulse.metrics._assemble import apply_strict

    reply = _first_reply()
    reply["claims"][1]["verdict"] = "INFERRED"
    chat_server.script(Reply.json(reply), Reply.json(SECOND_REPLY))
    evaluation = await judge.evaluate(worked_example.record(), METRICS)
    assert evaluation.score(FAITHFULNESS) == 0.75
    assert apply_strict(evaluation).score(FAITHFULNESS) == 0.5


async def test_an_abstention_covers_none_of_the_reference_claims(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    record = RagRecord(
        worked_example.QUESTION,
        worked_example.CONTEXTS,
        "I don't know.",
        reference=worked_example.REFERENCE,
    )
    second = {
        "answer_claims": [],
        "reference_claims": [
            {"claim": "Lumarex can cause nausea, headache and dizziness", "covered": False},
            {"claim": "The recommended dose is 200 mg", "covered": False},
        ],
    }
    chat_server.script(
        Reply.json({"claims": [], "abstained": True, "answerable": True}), Reply.json(second)
    )
    evaluation = await judge.evaluate(record, METRICS)
    assert evaluation.score(COMPLETENESS) == 0.0
    assert evaluation.score(GROUNDEDNESS) == 0.0
    assert evaluation.score("correctness") is None
    assert chat_server.request_count == 2
    # The offline judge says the same.
    from ragpulse.judges.lexical.judge import LexicalJudge

    offline = LexicalJudge().evaluate_sync(record, METRICS)
    assert offline.score(COMPLETENESS) == 0.0
    assert offline.score(GROUNDEDNESS) == 0.0


async def test_the_context_metrics_add_one_call_for_all_three(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    passages = {
        "contexts": [
            {"number": 1, "relevance": 0.9, "helps": True},
            {"number": 2, "relevance": 0.6, "helps": True},
        ],
        "reference_claims": [
            {"claim": "Lumarex can cause nausea", "context": 1, "quote": "it can cause nausea"},
            {"claim": "It causes hair loss", "context": 1, "quote": "hair loss"},
        ],
    }
    chat_server.script(Reply.json(_first_reply()), Reply.json(SECOND_REPLY), Reply.json(passages))
    evaluation = await judge.evaluate(worked_example.record(), (*METRICS, *CONTEXT_METRICS))
    assert chat_server.request_count == 3
    assert evaluation.usage.calls == 3
    assert evaluation.score("context_relevance") == pytest.approx(0.75)
    # "hair loss" is not in the passage the model names: not verified, not recalled.
    assert evaluation.score("context_recall") == 0.5
    # Only the first passage holds a verified reference claim; it is ranked first.
    assert [c.relevant for c in evaluation.contexts] == [True, False]
    assert evaluation.score("context_precision") == 1.0
    third = chat_server.chat_requests[2]
    assert "REFERENCE" in third.user and "nonce=" in third.user


async def test_the_context_call_is_not_made_when_no_context_metric_is_asked(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    chat_server.script(Reply.json(_first_reply()))
    await judge.evaluate(worked_example.record(), (FAITHFULNESS, GROUNDEDNESS))
    assert chat_server.request_count == 1


async def test_context_relevance_alone_is_one_call(
    chat_server: ChatServer, judge: OpenAIJudge
) -> None:
    chat_server.script(
        Reply.json(
            {
                "contexts": [
                    {"number": 1, "relevance": 1.0, "helps": True},
                    {"number": 2, "relevance": 0.0, "helps": False},
                ]
            }
        )
    )
    record = worked_example.record()
    record = RagRecord(record.question, record.contexts, record.answer)
    evaluation = await judge.evaluate(record, ("context_relevance", "context_precision"))
    assert chat_server.request_count == 1
    assert evaluation.score("context_relevance") == 0.5
    assert evaluation.score("context_precision") == 1.0


async def test_a_new_metric_reading_question_parts_is_scored_from_the_first_call_alone(
    chat_server: ChatServer, judge: OpenAIJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts_missed.register(monkeypatch)
    reply = _first_reply(
        question_parts=[
            {"part": "What are the side effects of Lumarex", "addressed": True},
            {"part": "what dose should I take", "addressed": False},
        ]
    )
    chat_server.script(Reply.json(reply))
    evaluation = await judge.evaluate(worked_example.record(), (parts_missed.NAME,))
    assert evaluation.score(parts_missed.NAME) == 0.5
    assert chat_server.request_count == 1
    (first,) = chat_server.chat_requests
    assert "question_parts" in first.body["response_format"]["json_schema"]["schema"]["properties"]
    assert "supported_by" not in first.system
