"""The offline judge's rule table: each named rule on its own, then the table's order."""

from __future__ import annotations

import json

import pytest

from ragpulse.evaluation import Context, RagRecord, Verdict
from ragpulse.judges.lexical._align import ClaimAlignment, record_facts
from ragpulse.judges.lexical._checkable import (
    align_name_forms,
    align_surface_forms,
    checkable_claims,
    index_context,
)
from ragpulse.judges.lexical._rules import (
    BASE,
    RULES,
    decide,
    extent,
    flag_value,
    flags_agree,
    inferred,
    negation,
    other_value,
    supported,
    widening,
    window_flag,
)
from ragpulse.judges.lexical.judge import LexicalJudge

TOWER = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in 1889 "
    "and is 330 metres tall. Gustave Eiffel's company designed and built the tower."
)


def align(answer: str, *contexts: str, question: str | None = None) -> ClaimAlignment:
    """The first claim of ``answer`` aligned as the judge aligns it."""
    indexed = [index_context(i, Context(c), 200_000) for i, c in enumerate(contexts)]
    claims = align_surface_forms(align_name_forms(checkable_claims(answer), indexed), indexed)
    facts = record_facts(question, indexed)
    return ClaimAlignment(claims[0], indexed, [c.context for c in indexed], LexicalJudge(), facts)


# --- each rule -------------------------------------------------------------------------


def test_flag_value_contradicts_a_claim_the_datas_yes_no_value_denies() -> None:
    record = json.dumps({"name": "Trail Watch", "waterproof": False})
    found = flag_value(align("The Trail Watch is waterproof.", record))
    assert found is not None and found.verdict is Verdict.CONTRADICTED
    assert found.evidence is not None and "waterproof" in found.evidence.text


def test_flag_value_lets_a_claim_the_data_agrees_with_pass() -> None:
    record = json.dumps({"name": "Trail Watch", "waterproof": True})
    assert flag_value(align("The Trail Watch is waterproof.", record)) is None


def test_window_flag_contradicts_a_supported_claim_beside_a_false_value() -> None:
    text = 'Policy excerpt: "pets_allowed": false, "smoking": false.'
    found = window_flag(align("Pets are allowed.", text))
    assert found is not None and found.verdict is Verdict.CONTRADICTED


def test_window_flag_lets_a_negated_claim_beside_a_false_value_pass() -> None:
    text = 'Policy excerpt: "pets_allowed": false, "smoking": false.'
    assert window_flag(align("Pets are not allowed.", text)) is None


def test_other_value_contradicts_another_number_in_the_matching_span() -> None:
    found = other_value(align("The tower was completed in 1887.", TOWER))
    assert found is not None and found.verdict is Verdict.CONTRADICTED
    assert found.evidence is not None and "1889" in found.evidence.text


def test_other_value_lets_the_stated_number_pass() -> None:
    assert other_value(align("The tower was completed in 1889.", TOWER)) is None


def test_extent_contradicts_a_claim_leaving_unbounded_what_the_span_bounds() -> None:
    text = "The X200 comes with a 2-year limited warranty that covers parts and labour."
    found = extent(align("The X200 comes with a lifetime warranty.", text))
    assert found is not None and found.verdict is Verdict.CONTRADICTED
    assert found.evidence is not None and "2-year" in found.evidence.text


def test_extent_lets_the_spans_own_bound_pass() -> None:
    text = "The X200 comes with a 2-year limited warranty that covers parts and labour."
    assert extent(align("The X200 comes with a 2-year limited warranty.", text)) is None


def test_negation_contradicts_a_claim_affirming_what_its_sentence_denies() -> None:
    text = "Sale items can be exchanged. Personalised items cannot be returned."
    found = negation(align("Personalised items can be returned.", text))
    assert found is not None and found.verdict is Verdict.CONTRADICTED
    assert found.evidence is not None and "cannot" in found.evidence.text


def test_negation_lets_a_claim_keeping_the_sentences_polarity_pass() -> None:
    text = "Sale items can be exchanged. Personalised items cannot be returned."
    assert negation(align("Personalised items cannot be returned.", text)) is None


def test_widening_withholds_support_for_a_claim_dropping_the_passages_condition() -> None:
    text = "Return shipping is free for members."
    found = widening(align("Return shipping is free for everyone.", text))
    assert found is not None and found.verdict is Verdict.NOT_FOUND


def test_widening_lets_the_passages_own_scope_pass() -> None:
    text = "Return shipping is free for members."
    assert widening(align("Return shipping is free for members.", text)) is None


def test_supported_needs_one_window_with_the_claims_words_numbers_and_names() -> None:
    found = supported(align("It was completed in 1889.", TOWER))
    assert found is not None and found.verdict is Verdict.SUPPORTED
    assert supported(align("It was completed in 1887.", TOWER)) is None


def test_flags_agree_infers_a_claim_the_datas_yes_values_state() -> None:
    record = json.dumps({"name": "Cafe Rio", "outdoor_seating": True, "takeout": True})
    found = flags_agree(align("They have outdoor seating and takeout.", record))
    assert found is not None and found.verdict is Verdict.INFERRED


def test_inferred_needs_the_words_across_contexts_and_a_share_in_one_window() -> None:
    contexts = (
        "The lattice tower stands in Paris. Many visitors come in summer.",
        "Engineers finished the structure in 1889 after two years of work.",
    )
    found = inferred(align("The Paris lattice tower was finished in 1889.", *contexts))
    assert found is not None and found.verdict is Verdict.INFERRED
    assert inferred(align("Tickets can be bought online at a discount.", *contexts)) is None


def test_a_number_under_a_key_naming_its_unit_of_time_is_that_duration() -> None:
    record = json.dumps({"model": "X2", "battery_hours": 12, "weight_g": 300})
    assert decide(align("The X2 battery lasts 12 hours.", record)).verdict is Verdict.SUPPORTED
    wrong = decide(align("The X2 battery lasts 14 hours.", record)).verdict
    assert wrong in (Verdict.NOT_FOUND, Verdict.CONTRADICTED)


def test_a_duration_already_written_under_a_key_naming_its_unit_is_read_once() -> None:
    record = json.dumps({"model": "X2", "battery_hours": "12 hours"})
    assert decide(align("The X2 battery lasts 12 hours.", record)).verdict is Verdict.SUPPORTED


def test_a_question_asking_how_long_is_addressed_by_an_answer_giving_the_time() -> None:
    record = RagRecord(
        question="How long do refunds take?",
        contexts=(Context("Refunds are issued within 14 days of purchase."),),
        answer="Refunds are issued within 14 days of purchase.",
    )
    assert LexicalJudge().evaluate_sync(record, ("relevancy",)).score("relevancy") == 1.0


# --- the table -------------------------------------------------------------------------


def test_rule_names_are_unique_and_the_base_verdicts_are_in_the_table() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert set(names) >= BASE


def test_a_contradiction_outranks_the_support_the_same_window_gives() -> None:
    text = 'Policy excerpt: "pets_allowed": false, "smoking": false.'
    alignment = align("Pets are allowed.", text)
    assert supported(alignment) is not None
    assert decide(alignment).verdict is Verdict.CONTRADICTED


def test_a_claim_no_rule_decides_is_not_found() -> None:
    assert decide(align("Its lifts came from the Otis company.", TOWER)).verdict is (
        Verdict.NOT_FOUND
    )


def test_a_rule_switched_off_no_longer_decides() -> None:
    answer = "Personalised items can be returned."
    text = "Sale items can be exchanged. Personalised items cannot be returned."
    record = RagRecord(question=None, contexts=(Context(text),), answer=answer)
    without = LexicalJudge(rules=tuple(r for r in RULES if r.name != "negation"))
    assert LexicalJudge().evaluate_sync(record).claims[0].verdict is Verdict.CONTRADICTED
    assert without.evaluate_sync(record).claims[0].verdict is Verdict.SUPPORTED


# --- confidence ------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["It was completed in 1889.", "The tower is in Paris."])
def test_a_claim_stated_word_for_word_is_supported_with_full_confidence(answer: str) -> None:
    found = decide(align(answer, TOWER))
    assert found.verdict is Verdict.SUPPORTED
    assert found.confidence == pytest.approx(1.0)


def test_support_missing_a_rare_word_is_less_sure_than_support_missing_a_common_one() -> None:
    context = (
        "The museum opens at nine. The museum shop sells the museum guide. The museum "
        "cafe serves the museum lunch. The museum garden hosts the museum concerts."
    )
    rare = align("The museum garden hosts concerts with fireworks.", context).confidence
    common = align("The garden hosts the museum concerts.", context).confidence
    assert 0 < rare < common


def test_faithful_answers_tied_at_one_differ_in_confidence() -> None:
    contexts = (Context(TOWER), Context("Visitors climb the stairs to the second floor."))
    close = RagRecord(question=None, contexts=contexts, answer="It was completed in 1889.")
    loose = RagRecord(
        question=None, contexts=contexts, answer="Visitors climb the tower of Paris to its floor."
    )
    judge = LexicalJudge()
    first, second = judge.evaluate_sync(close), judge.evaluate_sync(loose)
    assert first.score("faithfulness") == second.score("faithfulness") == 1.0
    assert first.claims[0].confidence is not None and second.claims[0].confidence is not None
    assert first.claims[0].confidence > second.claims[0].confidence


def test_a_claim_with_none_of_its_words_in_the_contexts_is_surely_not_found() -> None:
    found = decide(align("Tickets can be bought online at a discount.", TOWER))
    assert found.verdict is Verdict.NOT_FOUND
    assert found.confidence == pytest.approx(1.0)


def test_negation_contradicts_a_claim_denying_what_its_sentence_states() -> None:
    text = "Sale items can be exchanged. Personalised items can be returned."
    found = negation(align("Personalised items cannot be returned.", text))
    assert found is not None and found.verdict is Verdict.CONTRADICTED
    assert found.evidence is not None and "can be returned" in found.evidence.text


def test_a_negative_claim_with_words_of_its_own_is_not_called_a_contradiction() -> None:
    # It may restate the sentence in part: the store opens on the days it names.
    text = "The store opens Monday to Saturday."
    assert negation(align("The store does not open on Sundays.", text)) is None


def test_a_negated_noun_restating_a_number_is_not_called_a_contradiction() -> None:
    text = "There were 0 incidents in 2020."
    assert negation(align("There were no incidents in 2020.", text)) is None
