"""The offline judge on extents: a claim saying a quantity has no bound where its passage
bounds it with a number ("a lifetime warranty" against "a 2-year limited warranty"), and the
reverse; only when both speak of the same thing, and never for an extent the claim denies."""

from __future__ import annotations

import pytest

from ragpulse.evaluation import Context, RagRecord, Verdict
from ragpulse.evaluation.types import ClaimVerdict
from ragpulse.judges.lexical._extent import is_quantity, unbounded_extents
from ragpulse.judges.lexical._tokens import tokenize
from ragpulse.judges.lexical.judge import LexicalJudge

WARRANTY = "The X200 headphones come with a 2-year limited warranty covering manufacturing defects."
PLAN = "The Basic plan includes unlimited data and calls on up to 3 devices."


def judged(answer: str, *contexts: str) -> tuple[float | None, ClaimVerdict]:
    """The answer's faithfulness and its first claim's verdict."""
    record = RagRecord(
        question=None, contexts=tuple(Context(c, id=str(i)) for i, c in enumerate(contexts)),
        answer=answer,
    )  # fmt: skip
    evaluation = LexicalJudge().evaluate_sync(record, ("faithfulness",))
    return evaluation.score("faithfulness"), evaluation.claims[0]


def marked(answer: str, found: ClaimVerdict) -> str:
    return " ".join(answer[start:end] for start, end in found.unsupported)


# --- an unbounded claim against a bounded passage ----------------------------------------


def test_a_lifetime_warranty_against_a_2_year_limited_warranty_is_contradicted() -> None:
    answer = "The X200 headphones come with a lifetime warranty."
    score, found = judged(answer, WARRANTY)
    assert score == 0.0
    assert found.verdict is Verdict.CONTRADICTED
    # Explained as the number check explains: the passage's value, cited from the passage.
    assert found.reason is not None and "'2-year'" in found.reason and "lifetime" in found.reason
    assert found.evidence is not None and found.evidence.context_id == "0"
    assert "2-year limited warranty" in found.evidence.text
    assert found.evidence.text == WARRANTY[found.evidence.start : found.evidence.end]
    assert "lifetime" in marked(answer, found)


def test_the_warranty_the_passage_states_is_supported() -> None:
    score, found = judged("The X200 headphones come with a 2-year warranty.", WARRANTY)
    assert score == 1.0
    assert found.verdict is Verdict.SUPPORTED


def test_an_extent_stated_after_its_head_is_read_too() -> None:
    score, found = judged("The X200 headphones' warranty is lifetime.", WARRANTY)
    assert score == 0.0 and found.verdict is Verdict.CONTRADICTED


@pytest.mark.parametrize(
    ("answer", "passage", "bound"),
    [
        ("Gift codes never expire.", "Gift codes expire after 30 days.", "30 days"),
        ("Deleted files are kept forever.", "Deleted files are kept for 30 days.", "30 days"),
        ("The player was banned permanently.", "The player was banned for 6 months.", "6 months"),
    ],
)
def test_a_negated_end_or_an_adverb_of_no_end_against_a_bound_is_contradicted(
    answer: str, passage: str, bound: str
) -> None:
    score, found = judged(answer, passage)
    assert score == 0.0 and found.verdict is Verdict.CONTRADICTED
    assert found.evidence is not None and bound in found.evidence.text


def test_a_number_bounding_another_thing_does_not_contradict_an_unbounded_claim() -> None:
    # The passage's number is the battery's, not the warranty's: the claim is unstated
    # (lifetime is nowhere), not contradicted.
    passage = "The X200 headphones come with a limited warranty. The battery lasts 30 hours."
    _, found = judged("The X200 headphones come with a lifetime warranty.", passage)
    assert found.verdict is not Verdict.CONTRADICTED
    same_sentence = "The X200 headphones weigh 250 grams and come with a limited warranty."
    _, found = judged("The X200 headphones come with a lifetime warranty.", same_sentence)
    assert found.verdict is not Verdict.CONTRADICTED


def test_an_unbounded_word_the_contexts_use_for_the_thing_is_supported() -> None:
    passage = "The X200 has a lifetime warranty on the frame and a 2-year warranty on the battery."
    score, found = judged("The X200 has a lifetime warranty on the frame.", passage)
    assert score == 1.0 and found.verdict is Verdict.SUPPORTED


# --- a bounded claim against an unbounded passage ----------------------------------------


def test_a_number_where_the_passage_says_unlimited_is_contradicted() -> None:
    answer = "The Basic plan includes 5 GB of data."
    score, found = judged(answer, PLAN)
    assert score == 0.0
    assert found.verdict is Verdict.CONTRADICTED
    assert found.reason is not None and "'unlimited'" in found.reason and "5 GB" in found.reason
    assert found.evidence is not None and "unlimited data" in found.evidence.text
    assert "5 GB" in marked(answer, found)


def test_a_number_for_another_thing_than_the_unlimited_one_is_not_contradicted_by_it() -> None:
    passage = "The Basic plan includes unlimited calls, and data is sold separately."
    _, found = judged("The Basic plan includes 5 GB of data.", passage)
    assert found.verdict is Verdict.NOT_FOUND
    assert found.reason is not None and "unlimited" not in found.reason


def test_an_unlimited_the_passage_denies_is_no_extent_against_the_claims_number() -> None:
    passage = "Storage is not unlimited on the Basic plan."
    _, found = judged("Storage is limited to 5 GB on the Basic plan.", passage)
    assert found.verdict is Verdict.NOT_FOUND


# --- negation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "The X200 headphones come with no lifetime warranty.",
        "The X200 headphones do not come with a lifetime warranty.",
        "The X200 headphones' warranty is not lifetime.",
    ],
)
def test_a_claim_denying_the_unbounded_extent_is_not_contradicted(answer: str) -> None:
    _, found = judged(answer, WARRANTY)
    assert found.verdict is not Verdict.CONTRADICTED


def test_a_double_negation_states_no_unbounded_extent() -> None:
    text = "It is not true that codes never expire."
    assert unbounded_extents(tokenize(text, names=False), text) == []


# --- the words ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a lifetime warranty", {"lifetime"}),
        ("unlimited cloud storage", {"unlimit"}),
        ("the data is stored indefinitely", {"indefinitely"}),
        ("there is no data cap", {"cap"}),
        ("codes do not expire", {"expire"}),
        ("it includes, but is not limited to, cables and chargers", set()),
        ("a limited warranty", set()),
    ],
)
def test_the_unbounded_extents_a_text_states(text: str, words: set[str]) -> None:
    found = unbounded_extents(tokenize(text, names=False), text)
    assert {e.word for e in found} == words


@pytest.mark.parametrize(
    ("text", "number", "bounds"),
    [
        ("a 2-year limited warranty", "2", True),
        ("kept for 30 days", "2592000s", True),
        ("5 GB of storage", "5", True),
        ("on up to 3 devices", "3", True),
        ("the 2019 season", "2019", False),
        ("a 1500 mAh battery", "1500", True),
        ("on March 3", "3", False),
        ("at 5:30 sharp", "5", False),
    ],
)
def test_a_bounded_quantity_is_a_number_with_what_it_counts(
    text: str, number: str, bounds: bool
) -> None:
    tokens = tokenize(text, names=False)
    at = next(i for i, t in enumerate(tokens) if t.norm == number)
    assert is_quantity(tokens, at, text) is bounds


# --- against a reference ----------------------------------------------------------------------


def test_a_lifetime_warranty_is_contradicted_by_a_reference_stating_two_years() -> None:
    record = RagRecord(
        question="What warranty do the X200 headphones have?",
        contexts=(Context(WARRANTY),),
        answer="The X200 headphones come with a lifetime warranty.",
        reference="The X200 headphones come with a 2-year limited warranty.",
    )
    correctness = LexicalJudge().evaluate_sync(record, ("correctness",)).metrics["correctness"]
    assert correctness.score == 0.0
    assert correctness.explanation is not None
    assert "contradicted by the reference" in correctness.explanation
    assert "2-year limited warranty" in correctness.explanation
