"""Claim splitting and anchoring: claims are sentences and coordinated clauses of the answer."""

from __future__ import annotations

from ragpulse.evaluation import anchor, split_claims


def _texts(answer: str) -> list[str]:
    return [c.text for c in split_claims(answer)]


def test_each_claim_maps_to_its_range_in_the_answer() -> None:
    answer = "Paris is the capital of France. It has 2.1 million inhabitants."
    claims = split_claims(answer)
    assert [answer[c.answer_start : c.answer_end] for c in claims] == [c.text for c in claims]
    assert len(claims) == 2


def test_abbreviations_initials_and_decimals_do_not_end_a_sentence() -> None:
    answer = "Dr. Smith met J. K. Rowling in the U.S. in 2001. The fee was 3.5 million dollars."
    assert _texts(answer) == [
        "Dr. Smith met J. K. Rowling in the U.S. in 2001.",
        "The fee was 3.5 million dollars.",
    ]


def test_coordinated_clauses_become_separate_claims() -> None:
    answer = "The tower opened in 1889, and it was the tallest structure in the world."
    assert _texts(answer) == [
        "The tower opened in 1889",
        "it was the tallest structure in the world.",
    ]


def test_short_list_items_stay_in_their_sentence() -> None:
    answer = "The bar serves beer, wine, and cocktails."
    assert _texts(answer) == ["The bar serves beer, wine, and cocktails."]


def test_semicolons_separate_claims() -> None:
    answer = "The museum opens at nine every day; the cafe opens an hour later."
    assert _texts(answer) == ["The museum opens at nine every day", "the cafe opens an hour later."]


def test_list_markers_are_not_part_of_a_claim() -> None:
    answer = "Key facts:\n- The river is 300 km long.\n2. It flows into the sea."
    assert _texts(answer) == ["Key facts:", "The river is 300 km long.", "It flows into the sea."]


def test_an_empty_answer_has_no_claims() -> None:
    assert split_claims("") == []
    assert split_claims("  \n - \n") == []


def test_anchor_finds_an_exact_claim_case_and_whitespace_folded() -> None:
    answer = "Paris is the capital of France.  It has two airports."
    claim = anchor("it has   TWO airports", answer)
    assert claim.answer_start is not None and claim.answer_end is not None
    assert answer[claim.answer_start : claim.answer_end] == "It has two airports"


def test_anchor_maps_a_paraphrased_claim_to_the_closest_range() -> None:
    answer = "Paris is the capital of France. The city has two big airports."
    claim = anchor("The city has two airports", answer)
    assert claim.answer_start is not None and claim.answer_end is not None
    assert "two big airports" in answer[claim.answer_start : claim.answer_end]
    assert claim.text == "The city has two airports"


def test_anchor_leaves_an_unrelated_claim_without_offsets() -> None:
    claim = anchor("Quantum chromodynamics explains gluon confinement", "Paris is in France.")
    assert (claim.answer_start, claim.answer_end) == (None, None)
