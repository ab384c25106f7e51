"""LexicalJudge: general rules any user's data meets (structured data, time, correctness)."""

from __future__ import annotations

import json

import pytest

from ragpulse.evaluation import Context, EvalStatus, RagRecord, Verdict
from ragpulse.judges.lexical._structured import read_facts
from ragpulse.judges.lexical.judge import LexicalJudge

ALL = ("faithfulness", "groundedness", "correctness")


def _evaluate(
    answer: str, *contexts: str, question: str | None = None, reference: str | None = None
):
    record = RagRecord(
        question=question,
        contexts=tuple(Context(c, id=f"doc-{i}") for i, c in enumerate(contexts)),
        answer=answer,
        reference=reference,
    )
    return LexicalJudge().evaluate_sync(record, ALL)


def _verdicts(answer: str, *contexts: str) -> list[Verdict]:
    return [c.verdict for c in _evaluate(answer, *contexts).claims]


# --- correctness: the question is the shared premise ----------------------------------


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
            "When does the refund window close?",
            "You can get a refund within 30 days of purchase.",
            "Refunds are accepted for 30 days after purchase.",
        ),
    ],
)
def test_a_correct_answer_to_a_short_reference_scores_high(
    question: str, answer: str, reference: str
) -> None:
    evaluation = _evaluate(answer, "Unrelated context.", question=question, reference=reference)
    score = evaluation.score("correctness")
    assert score is not None and score >= 0.99, evaluation.metrics["correctness"].explanation


@pytest.mark.parametrize(
    ("question", "answer", "reference"),
    [
        (
            "How many seats does the Oak room have?",
            "The Oak room has 19 seats.",
            "It has 17 seats.",
        ),
        ("What is the capital of France?", "The capital of France is Lyon.", "Paris."),
        (
            "When did the store open?",
            "The store opened on 3 March 2019.",
            "It opened on 3 March 2021.",
        ),
        ("Who founded the company?", "Maria Lopez founded the company.", "Anna Berg founded it."),
    ],
)
def test_a_changed_number_date_or_person_scores_low(
    question: str, answer: str, reference: str
) -> None:
    evaluation = _evaluate(answer, "Unrelated context.", question=question, reference=reference)
    score = evaluation.score("correctness")
    assert score is not None and score <= 0.5


def test_a_number_only_the_question_states_does_not_make_the_answer_correct() -> None:
    evaluation = _evaluate(
        "The tower is 500 metres tall.",
        "Unrelated context.",
        question="Is the tower 500 metres tall?",
        reference="No, the tower is 330 metres tall.",
    )
    assert evaluation.score("correctness") == 0.0


# --- evidence for contradictions --------------------------------------------------------


def test_a_contradicted_claim_cites_the_conflicting_span() -> None:
    context = "Postage: a standard letter stamp costs 25 cents in this town."
    evaluation = _evaluate("A standard letter stamp costs 50 cents.", context)
    [claim] = evaluation.claims
    assert claim.verdict is Verdict.CONTRADICTED
    assert claim.evidence is not None
    assert "25 cents" in claim.evidence.text
    assert context[claim.evidence.start : claim.evidence.end] == claim.evidence.text
    assert claim.evidence.context_id == "doc-0"


def test_a_contradicted_yes_no_value_cites_its_key_and_value() -> None:
    context = json.dumps({"name": "Harbor Grill", "features": {"outdoor_seating": True}})
    evaluation = _evaluate("Harbor Grill does not have outdoor seating.", context)
    [claim] = evaluation.claims
    assert claim.verdict is Verdict.CONTRADICTED
    assert claim.evidence is not None
    assert claim.evidence.text == '"outdoor_seating": true'


# --- no claims ---------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["Hello! How can I help you today?", "I don't know."])
def test_an_answer_without_claims_has_undefined_scores(answer: str) -> None:
    evaluation = _evaluate(answer, "Refunds are accepted within 30 days.")
    assert evaluation.status is EvalStatus.NO_CLAIMS
    assert evaluation.score("faithfulness") is None
    assert evaluation.score("groundedness") is None


@pytest.mark.parametrize(
    "answer",
    [
        "I could not find this in the documentation.",
        "I couldn't locate any information about refunds.",
        "That information is not available in the provided context.",
        "The documentation does not mention refunds.",
    ],
)
def test_saying_the_sources_do_not_hold_it_is_an_abstention(answer: str) -> None:
    evaluation = _evaluate(answer, "Shipping takes 5 days.")
    assert evaluation.status is EvalStatus.NO_CLAIMS
    assert evaluation.abstained is True
    assert evaluation.score("faithfulness") is None


def test_a_fact_about_availability_is_still_a_claim() -> None:
    evaluation = _evaluate("The X200 is not available in Europe.", "Shipping takes 5 days.")
    assert evaluation.status is EvalStatus.OK
    assert evaluation.abstained is False


# --- structured contexts of any schema ---------------------------------------------------


@pytest.mark.parametrize(
    "context",
    [
        "Product: Trail Runner X\nWaterproof: no\nWeight: 310 g\n",
        "| Feature | Value |\n|---|---|\n| Waterproof | no |\n| Weight | 310 g |\n",
        json.dumps({"product": "Trail Runner X", "specs": {"waterproof": False}}),
        json.dumps({"product": "Trail Runner X", "specs": {"isWaterproof": "false"}}),
    ],
)
def test_a_yes_no_value_of_any_schema_is_read_against_the_claims_polarity(context: str) -> None:
    assert _verdicts("The Trail Runner X is waterproof.", context) == [Verdict.CONTRADICTED]
    assert Verdict.CONTRADICTED not in _verdicts("The Trail Runner X is not waterproof.", context)


def test_facts_keep_their_place_in_the_context() -> None:
    text = "plan: Pro\nseats: 25\nsso: yes\n"
    facts = read_facts(text)
    by_key = {f.key: f for f in facts}
    assert by_key["sso"].value is True
    assert text[by_key["seats"].start : by_key["seats"].end] == "seats: 25"


# --- numbers, units, durations, times ----------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "context"),
    [
        (
            "The battery charges fully in 90 minutes.",
            "A full charge of the battery takes 1.5 hours.",
        ),
        ("The trail is 12 km long.", "The trail is 12 kilometres long."),
        ("The office is open on Mondays.", "Office hours: Mon 9-5."),
    ],
)
def test_units_durations_and_day_abbreviations_match_their_other_forms(
    claim: str, context: str
) -> None:
    assert _verdicts(claim, context) in ([Verdict.SUPPORTED], [Verdict.INFERRED])


def test_a_different_duration_is_not_supported() -> None:
    verdicts = _verdicts("The battery charges fully in 2 hours.", "A full charge takes 90 minutes.")
    assert verdicts in ([Verdict.NOT_FOUND], [Verdict.CONTRADICTED])


def test_a_flagged_claim_marks_the_unstated_words_rather_than_the_whole_sentence() -> None:
    answer = (
        "Harbor Grill is a seafood restaurant on the pier that many visitors love, "
        "and it has an average rating of 4.5 stars."
    )
    context = "Harbor Grill is a seafood restaurant on the pier that many visitors love."
    evaluation = _evaluate(answer, context)
    flagged = [c for c in evaluation.claims if c.verdict is Verdict.NOT_FOUND]
    assert flagged
    [(start, end)] = flagged[-1].unsupported
    assert "4.5" in answer[start:end]
    assert "Harbor Grill" not in answer[start:end]


def test_in_a_record_another_fields_name_beside_the_claims_is_no_contradiction() -> None:
    context = json.dumps({"name": "Harbor Grill", "city": "Santa Barbara", "state": "CA"})
    verdicts = _verdicts("Harbor Grill is in Santa Barbara, California.", context)
    assert verdicts == [Verdict.NOT_FOUND]


def test_in_a_record_a_different_number_is_still_a_contradiction() -> None:
    context = json.dumps({"name": "Harbor Grill", "seats": 40, "city": "Santa Barbara"})
    assert _verdicts("Harbor Grill has 60 seats.", context) == [Verdict.CONTRADICTED]


def test_structured_contexts_of_any_size_and_shape_never_raise() -> None:
    hostile = [
        "[" * 100_000 + "]" * 100_000,
        json.dumps({f"k\u00e9{i}": i % 2 == 0 for i in range(20_000)}),
        "a,b,c\n" + "\n".join(f'{i},yes,"x, y"' for i in range(20_000)),
        "| a | b\n|--\n| x",
    ]
    for context in hostile:
        evaluation = _evaluate("The shop is closed on Tuesdays.", context)
        assert evaluation.status is EvalStatus.OK


# --- which words a flagged claim marks, and when scattered words state nothing --------

_SCATTERED = (
    "The gateway has two antennas.",
    "Updates replace the firmware.",
    "Each report carries telemetry.",
    "Backups run overnight.",
    "Traffic is encrypted.",
)


def test_words_scattered_one_by_one_over_the_contexts_state_nothing() -> None:
    answer = "The gateway encrypts firmware telemetry overnight."
    [claim] = _evaluate(answer, *_SCATTERED).claims
    assert claim.verdict is Verdict.NOT_FOUND
    assert "scattered" in (claim.reason or "")
    record = RagRecord(
        question=None,
        contexts=tuple(Context(c, id=str(i)) for i, c in enumerate(_SCATTERED)),
        answer=answer,
    )
    lenient = LexicalJudge(span_coverage=0.0).evaluate_sync(record, ALL)
    assert [c.verdict for c in lenient.claims] == [Verdict.INFERRED]


def test_a_summary_of_a_records_fields_is_not_held_to_one_window() -> None:
    context = json.dumps(
        {
            "product": "Trail Runner 2",
            "upper": "mesh",
            "notes": "Ships in recycled packaging from the regional warehouse.",
            "sole": "rubber",
            "category": "running shoes",
        }
    )
    verdicts = _verdicts("The Trail Runner 2 running shoes have a rubber sole.", context)
    assert verdicts in ([Verdict.SUPPORTED], [Verdict.INFERRED])


def test_the_flagged_phrase_reaches_its_clause_but_not_the_next_one() -> None:
    answer = (
        "The Z9 blender has a 1200-watt motor and a glass jar, with an average customer "
        "rating of 4.5 stars, and it is sold in three colours."
    )
    context = "The Z9 blender has a 1200-watt motor and a glass jar. It is sold in three colours."
    evaluation = _evaluate(answer, context)
    ranges = [answer[a:b] for c in evaluation.claims for a, b in c.unsupported]
    assert ranges == ["with an average customer rating of 4.5 stars"]


def test_a_number_the_aligned_passage_states_beside_a_claim_word_is_stated() -> None:
    context = (
        "The export job failed after the upgrade, the on-call engineer wrote in the incident "
        "channel late on Monday night, and the logs were attached to the ticket for review by "
        "the platform group the next morning before the release meeting. The team later "
        "confirmed the failure on three servers."
    )
    verdicts = _verdicts("The export job failed on three servers after the upgrade.", context)
    assert verdicts in ([Verdict.SUPPORTED], [Verdict.INFERRED])


def test_a_comma_separated_context_with_a_quote_left_open_is_read_as_text() -> None:
    context = 'Model,Notes\nX1,"ships with a USB-C cable\nX2,charges in 90 minutes'
    evaluation = _evaluate("The X1 ships with a USB-C cable.", context)
    assert evaluation.status is EvalStatus.OK
    assert [c.verdict for c in evaluation.claims] in ([Verdict.SUPPORTED], [Verdict.INFERRED])


def test_a_wrong_yes_no_value_in_a_list_marks_its_own_item() -> None:
    answer = "The cafe offers outdoor seating, free parking, and takeout."
    context = json.dumps(
        {"name": "Corner Cafe", "amenities": {"outdoor_seating": True, "parking": False}}
    )
    [claim] = _evaluate(answer, context).claims
    assert claim.verdict is Verdict.CONTRADICTED
    assert [answer[a:b] for a, b in claim.unsupported] == ["free parking"]
