"""LexicalJudge: the same fact in other words (periods, counts, yes/no wording, negation,
units) and wording that claims more than the context states."""

from __future__ import annotations

import pytest

from ragpulse.evaluation import Context, RagRecord, Verdict
from ragpulse.judges.lexical._tokens import tokenize
from ragpulse.judges.lexical.judge import LexicalJudge


def _verdicts(answer: str, *contexts: str) -> list[Verdict]:
    record = RagRecord(
        question=None,
        contexts=tuple(Context(c, id=f"doc-{i}") for i, c in enumerate(contexts)),
        answer=answer,
    )
    return [c.verdict for c in LexicalJudge().evaluate_sync(record, ("faithfulness",)).claims]


# --- periods and counts in words -----------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        (
            "Library members may keep a borrowed laptop for twelve months.",
            "Library members may keep a borrowed laptop for 1 year.",
        ),
        (
            "Gym lockers are emptied after a week without use.",
            "Gym lockers are emptied after 7 days without use.",
        ),
        (
            "The parking permit stays valid for a day after purchase.",
            "The parking permit stays valid for 24 hours after purchase.",
        ),
        (
            "Loaned tools must come back within two months.",
            "Loaned tools must come back within 60 days.",
        ),
        (
            "The kiln cools down for one hour before it can be opened.",
            "The kiln cools down for 60 minutes before it can be opened.",
        ),
        (
            "Each starter kit holds a dozen seed packets.",
            "Each starter kit holds 12 seed packets.",
        ),
    ],
)
def test_a_period_or_count_in_other_words_is_supported(answer: str, context: str) -> None:
    assert _verdicts(answer, context) == [Verdict.SUPPORTED]


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        (
            "Library members may keep a borrowed laptop for twelve months.",
            "Library members may keep a borrowed laptop for 2 years.",
        ),
        (
            "Gym lockers are emptied after a week without use.",
            "Gym lockers are emptied after 10 days without use.",
        ),
    ],
)
def test_a_different_period_in_other_words_is_flagged(answer: str, context: str) -> None:
    assert _verdicts(answer, context)[0] in (Verdict.CONTRADICTED, Verdict.NOT_FOUND)


def test_a_rate_and_an_age_are_not_periods() -> None:
    """A rate ("600 calls a minute") and an age ("a 19-year-old") are not lengths of time."""
    assert [t.norm for t in tokenize("600 calls a minute", names=False)] == [
        "600",
        "call",
        "a",
        "minute",
    ]
    assert [t.norm for t in tokenize("a 19-year-old rider", names=False)] == [
        "a",
        "19",
        "year",
        "old",
        "rider",
    ]
    assert _verdicts(
        "The API allows 600 calls a minute.", "The API allows 600 calls per minute."
    ) == [Verdict.SUPPORTED]


# --- yes/no values stated by polarity words ------------------------------------------

_CAMERA = '{"model": "Vista 4K", "night_vision": true, "cloud_upload": false, "ir_filter": true}'


@pytest.mark.parametrize(
    "answer",
    [
        "The Vista 4K has night vision disabled.",
        "Night vision is switched off on the Vista 4K.",
        "The Vista 4K uploads to the cloud: cloud upload is enabled.",
    ],
)
def test_a_polarity_word_against_a_yes_no_value_is_contradicted(answer: str) -> None:
    assert Verdict.CONTRADICTED in _verdicts(answer, _CAMERA)


@pytest.mark.parametrize(
    "answer",
    [
        "The Vista 4K records to local storage only, with non-cloud upload.",
        "Cloud upload is disabled on the Vista 4K.",
        "The Vista 4K has night vision.",
    ],
)
def test_a_polarity_word_that_agrees_with_a_yes_no_value_is_not_contradicted(
    answer: str,
) -> None:
    assert Verdict.CONTRADICTED not in _verdicts(answer, _CAMERA)


def test_a_key_named_by_a_polarity_word_is_not_its_own_negation() -> None:
    data = '{"printer": "Inkjet P5", "duplex_disabled": true}'
    assert Verdict.CONTRADICTED not in _verdicts("On the Inkjet P5, duplex is disabled.", data)


# --- negation in prose -----------------------------------------------------------------

_HOSTEL = (
    "Check-in opens at 15:00 and luggage can be stored at reception for free. "
    "Pets cannot stay in the dormitories unless they are registered assistance animals. "
    "Breakfast is served from 07:00 to 10:00 in the garden room."
)


def test_a_claim_affirming_what_the_context_denies_is_contradicted() -> None:
    claim = (
        LexicalJudge()
        .evaluate_sync(
            RagRecord(
                question=None,
                contexts=(Context(_HOSTEL, id="doc-0"),),
                answer="Pets can stay in the dormitories.",
            ),
            ("faithfulness",),
        )
        .claims[0]
    )
    assert claim.verdict is Verdict.CONTRADICTED
    assert claim.evidence is not None and "cannot stay" in claim.evidence.text


@pytest.mark.parametrize(
    "answer",
    [
        "Pets cannot stay in the dormitories.",
        "Pets may not stay in the dormitories unless they are assistance animals.",
        "Pets can only stay in the dormitories if they are registered assistance animals.",
        "Luggage can be stored at reception for free.",
    ],
)
def test_a_claim_keeping_the_contexts_polarity_is_not_contradicted(answer: str) -> None:
    assert Verdict.CONTRADICTED not in _verdicts(answer, _HOSTEL)


def test_a_negated_noun_restated_in_other_words_is_not_a_flip() -> None:
    """ "no charger" in the context and "bring your own charger" say the same."""
    context = "The Trailcam 2 ships with a strap and a memory card but no charger."
    assert Verdict.CONTRADICTED not in _verdicts(
        "For the Trailcam 2 you need to bring your own charger.", context
    )


# --- wording wider than the passage ----------------------------------------------------

_CLINIC = (
    "Flu vaccinations are free only for patients over 65; other patients pay a fee of 12 euros. "
    "Appointments can be moved online up to 24 hours before the visit."
)


@pytest.mark.parametrize(
    "answer",
    [
        "Flu vaccinations are free for everyone.",
        "Appointments can always be moved online before the visit.",
    ],
)
def test_a_universal_word_dropping_the_passages_condition_is_not_found(answer: str) -> None:
    assert Verdict.NOT_FOUND in _verdicts(answer, _CLINIC)


def test_the_widening_word_is_what_is_marked() -> None:
    answer = "Flu vaccinations are free for everyone."
    record = RagRecord(question=None, contexts=(Context(_CLINIC, id="doc-0"),), answer=answer)
    claim = LexicalJudge().evaluate_sync(record, ("faithfulness",)).claims[0]
    assert [answer[a:b] for a, b in claim.unsupported] == ["everyone"]


@pytest.mark.parametrize(
    "answer",
    [
        "Flu vaccinations are free for patients over 65; everyone else pays 12 euros.",
        "Appointments can be moved online up to 24 hours before the visit.",
    ],
)
def test_a_narrowed_or_restated_scope_is_not_flagged(answer: str) -> None:
    assert Verdict.NOT_FOUND not in _verdicts(answer, _CLINIC)


def test_a_universal_word_without_a_condition_in_the_passage_is_harmless() -> None:
    context = "The museum's three galleries are on the ground floor."
    assert _verdicts("All three galleries of the museum are on the ground floor.", context) == [
        Verdict.SUPPORTED
    ]


def test_a_superlative_no_prose_context_states_is_not_found() -> None:
    context = "The Riverside route is 14 km long and passes two bridges."
    assert _verdicts("The Riverside route is the longest, at 14 km.", context) == [
        Verdict.NOT_FOUND
    ]
    # Against data, a superlative is what a summary computes from the values.
    table = "route,length_km,bridges\nRiverside,14,2\nHilltop,9,0\nLakeside,11,1\n"
    assert Verdict.NOT_FOUND not in _verdicts("Riverside is the longest route at 14 km.", table)


# --- units ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        (
            "The heater switches on below 8 degrees Celsius.",
            "The heater switches on below 8 °C and off above 15 °C.",
        ),
        ("Each project can hold 500 gigabytes of files.", "Each project can hold 500 GB of files."),
    ],
)
def test_one_unit_written_two_ways_is_supported(answer: str, context: str) -> None:
    assert _verdicts(answer, context) == [Verdict.SUPPORTED]
