"""The oracle model behind bench/oracle_ceiling.py answers from the labels it is given."""

from __future__ import annotations

from tests.servers.oracle_judge import LabelledRecord, OracleJudge, oracle_claims

from ragpulse.evaluation.types import Context, RagRecord
from ragpulse.judges.llm._prompts import claims_prompt

CONTEXT = "The museum opens at 9 am. Entry is free on Sundays."
ANSWER = "The museum opens at 9 am. Entry is free on Sundays and parking costs $5."
LABELLED = LabelledRecord(ANSWER, (CONTEXT,), ((ANSWER.index("parking"), len(ANSWER) - 1),))


def test_the_perfect_oracle_names_exactly_the_labelled_phrase() -> None:
    clean, flagged = oracle_claims(LABELLED)
    assert (clean["verdict"], clean["quote"]) == ("SUPPORTED", "The museum opens at 9 am.")
    assert flagged["verdict"] == "NOT_FOUND"
    assert flagged["unsupported"] == ["parking costs $5"]


def test_the_oracle_answers_the_real_claims_prompt_and_leaves_others_alone() -> None:
    record = RagRecord("When does it open?", (Context(CONTEXT),), ANSWER)
    prompt = claims_prompt(record, atomicity="low", coverage="low", nonce="n0nce")
    body = {"messages": prompt.messages()}
    reply = OracleJudge([LABELLED])(body)
    assert reply is not None and "parking costs $5" in (reply.content or "")
    other = claims_prompt(
        RagRecord("?", (Context(CONTEXT),), "Something else."),
        atomicity="low",
        coverage="low",
        nonce="n0nce",
    )
    assert OracleJudge([LABELLED])({"messages": other.messages()}) is None


def test_the_noisy_oracle_is_the_same_for_the_same_seed() -> None:
    record = RagRecord("When does it open?", (Context(CONTEXT),), ANSWER)
    body = {
        "messages": claims_prompt(record, atomicity="low", coverage="low", nonce="x").messages()
    }
    replies = {
        seed: [OracleJudge([LABELLED], flip=0.5, paraphrase=0.5, seed=seed)(body) for _ in range(2)]
        for seed in (1, 2)
    }
    assert all(a == b for a, b in replies.values())
