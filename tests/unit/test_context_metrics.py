"""Context relevance, precision, recall and utilisation: the arithmetic and the offline judge."""

from __future__ import annotations

import pytest

from ragpulse.evaluation.types import Context, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.metrics.context_precision import average_precision

CONTEXT = ("context_relevance", "context_precision", "context_recall", "context_utilisation")
QUESTION = "When did the Larkspur office in Lyon open?"
RIGHT = "The Larkspur office in Lyon opened in March 2019 with twelve engineers."
WRONG = "The cafeteria menu changes every Monday and offers a vegetarian dish."


def _evaluate(contexts: tuple[str, ...], reference: str | None = None, answer: str = "") -> dict:
    record = RagRecord(
        QUESTION,
        tuple(Context(text, id=f"doc-{i}") for i, text in enumerate(contexts)),
        answer or "The Lyon office opened in March 2019.",
        reference=reference,
    )
    evaluation = LexicalJudge().evaluate_sync(record, ("groundedness", *CONTEXT))
    return {"evaluation": evaluation, **{m: evaluation.score(m) for m in CONTEXT}}


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([True, False, False], 1.0),
        ([False, False, True], 1 / 3),
        ([True, False, True], (1 + 2 / 3) / 2),
        ([False, False], 0.0),
        ([], None),
    ],
)
def test_context_precision_is_ragas_average_precision(
    flags: list[bool], expected: float | None
) -> None:
    assert average_precision(flags) == pytest.approx(expected)


def test_a_relevant_chunk_ranked_first_scores_higher_precision_than_ranked_last() -> None:
    reference = "It opened in March 2019."
    first = _evaluate((RIGHT, WRONG, WRONG), reference)
    last = _evaluate((WRONG, WRONG, RIGHT), reference)
    assert first["context_precision"] == 1.0
    assert last["context_precision"] == pytest.approx(1 / 3)


def test_each_retrieved_chunk_gets_its_relevance_to_the_question() -> None:
    evaluation = _evaluate((RIGHT, WRONG))["evaluation"]
    right, wrong = evaluation.contexts
    assert (right.id, wrong.id) == ("doc-0", "doc-1")
    assert right.relevance is not None and wrong.relevance is not None
    assert right.relevance > 0.5 > wrong.relevance
    assert evaluation.score("context_relevance") == pytest.approx(
        (right.relevance + wrong.relevance) / 2
    )


def test_context_recall_is_the_share_of_reference_claims_the_chunks_hold() -> None:
    reference = "The office opened in March 2019. It had a rooftop garden."
    scores = _evaluate((RIGHT, WRONG), reference)
    assert scores["context_recall"] == 0.5
    explanation = scores["evaluation"].metrics["context_recall"].explanation
    assert "rooftop garden" in explanation


def test_context_recall_is_undefined_without_a_reference() -> None:
    scores = _evaluate((RIGHT,))
    assert scores["context_recall"] is None
    assert scores["evaluation"].metrics["context_recall"].status.value == "no_claims"


def test_utilisation_says_which_chunks_the_answer_drew_on() -> None:
    evaluation = _evaluate((WRONG, RIGHT))["evaluation"]
    assert [c.used for c in evaluation.contexts] == [False, True]
    assert evaluation.score("context_utilisation") == 0.5


def test_context_metrics_do_not_name_data_set_fields() -> None:
    # The same judgement over another domain's wording: the rules are generic.
    record = RagRecord(
        "What is the boiling point of ethanol at sea level?",
        (Context("Ethanol boils at 78.37 degrees Celsius at sea level."), Context(WRONG)),
        "Ethanol boils at 78.37 degrees Celsius.",
        reference="78.37 degrees Celsius.",
    )
    evaluation = LexicalJudge().evaluate_sync(record, CONTEXT)
    assert evaluation.score("context_recall") == 1.0
    assert evaluation.score("context_precision") == 1.0
