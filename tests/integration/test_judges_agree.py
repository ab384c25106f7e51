"""Both judges, the offline one and the LLM one on the local Chat Completions server,
agree on the cases an operator checks first: short references, contradictions with
their evidence, and answers without claims."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from tests.servers.chat_server import ChatServer

from ragpulse.evaluation.types import (
    CORRECTNESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    Context,
    EvalStatus,
    Evaluation,
    RagRecord,
    Verdict,
)
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judges.llm.openai import OpenAIJudge
from ragpulse.metrics import ALL_METRICS

pytestmark = pytest.mark.integration

UNRELATED = (Context("Opening hours are posted at the front desk.", id="desk"),)


@pytest.fixture(scope="module")
def server() -> Iterator[ChatServer]:
    with ChatServer(mode="echo-judge") as chat_server:
        yield chat_server


@pytest.fixture(params=["lexical", "llm"])
async def judge(request: pytest.FixtureRequest, server: ChatServer) -> AsyncIterator[object]:
    if request.param == "lexical":
        yield LexicalJudge()
        return
    llm = OpenAIJudge("echo", base_url=server.url, api_key="k")
    yield llm
    await llm.aclose()


async def _evaluate(judge: object, record: RagRecord) -> Evaluation:
    return await judge.evaluate(record, ALL_METRICS)  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize(
    ("question", "answer", "reference"),
    [
        ("What is the capital of France?", "The capital of France is Paris.", "Paris."),
        (
            "How many seats does the Oak room have?",
            "The Oak room has 17 seats.",
            "It has 17 seats.",
        ),
        (
            "How long do I have to return an item?",
            "You can return items within 30 days.",
            "Returns are accepted for 30 days.",
        ),
    ],
)
async def test_a_correct_answer_to_a_short_reference_scores_high(
    judge: object, question: str, answer: str, reference: str
) -> None:
    evaluation = await _evaluate(judge, RagRecord(question, UNRELATED, answer, reference))
    score = evaluation.score(CORRECTNESS)
    assert score is not None and score >= 0.99


@pytest.mark.parametrize(
    ("question", "answer", "reference"),
    [
        (
            "How many seats does the Oak room have?",
            "The Oak room has 19 seats.",
            "It has 17 seats.",
        ),
        ("When did the store open?", "The store opened in 2019.", "It opened in 2021."),
    ],
)
async def test_a_changed_number_or_date_scores_low(
    judge: object, question: str, answer: str, reference: str
) -> None:
    evaluation = await _evaluate(judge, RagRecord(question, UNRELATED, answer, reference))
    score = evaluation.score(CORRECTNESS)
    assert score is not None and score <= 0.5


async def test_a_contradicted_claim_carries_the_conflicting_span(judge: object) -> None:
    contexts = (Context("Postage: a standard letter stamp costs 25 cents.", id="post"),)
    record = RagRecord("How much is a stamp?", contexts, "A standard letter stamp costs 50 cents.")
    evaluation = await _evaluate(judge, record)
    [claim] = evaluation.claims
    assert claim.verdict is Verdict.CONTRADICTED
    assert claim.evidence is not None
    assert "25 cents" in claim.evidence.text
    assert contexts[0].text[claim.evidence.start : claim.evidence.end] == claim.evidence.text


@pytest.mark.parametrize("answer", ["Hello! How can I help you today?", "I don't know."])
async def test_an_answer_without_claims_has_undefined_scores(judge: object, answer: str) -> None:
    # Contexts that cannot answer: an abstention here is no claim at all (one the contexts
    # could answer scores groundedness 0.0, see the answerability tests).
    contexts = (Context("The office is on the third floor of the harbour building.", id="desk"),)
    evaluation = await _evaluate(judge, RagRecord("Can I get a refund?", contexts, answer))
    assert evaluation.status is EvalStatus.NO_CLAIMS
    assert evaluation.score(FAITHFULNESS) is None
    assert evaluation.score(GROUNDEDNESS) is None
