"""LexicalJudge: offline verdicts from fuzzy alignment, with numbers and names exact."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from ragpulse.evaluation import Context, EvalStatus, RagRecord, Verdict
from ragpulse.judges.lexical.judge import LexicalJudge

ALL = ("faithfulness", "groundedness", "correctness")
TOWER = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in 1889 "
    "and is 330 metres tall. Gustave Eiffel's company designed and built the tower."
)


def _record(answer: str | None, *contexts: str, reference: str | None = None) -> RagRecord:
    return RagRecord(
        question="Tell me about the tower.",
        contexts=tuple(Context(c, id=f"doc-{i}") for i, c in enumerate(contexts)),
        answer=answer,
        reference=reference,
    )


def _verdicts(answer: str, *contexts: str) -> list[Verdict]:
    evaluation = LexicalJudge().evaluate_sync(_record(answer, *contexts), ALL)
    return [c.verdict for c in evaluation.claims]


def test_a_claim_stated_by_a_context_is_supported_with_verified_evidence() -> None:
    evaluation = LexicalJudge().evaluate_sync(_record("It was completed in 1889.", TOWER), ALL)
    (claim,) = evaluation.claims
    assert claim.verdict is Verdict.SUPPORTED
    assert claim.evidence is not None
    assert TOWER[claim.evidence.start : claim.evidence.end] == claim.evidence.text
    assert "completed in 1889" in claim.evidence.text
    assert claim.evidence.context_id == "doc-0"
    assert evaluation.score("groundedness") == 1.0


def test_a_different_number_in_a_matching_span_is_contradicted() -> None:
    assert _verdicts("The tower was completed in 1887.", TOWER) == [Verdict.CONTRADICTED]


def test_a_different_name_in_a_matching_span_is_contradicted() -> None:
    assert _verdicts("The tower was designed by Antoni Gaudi.", TOWER) == [Verdict.CONTRADICTED]


def test_a_name_absent_from_the_contexts_is_not_found() -> None:
    assert _verdicts("Its lifts came from the Otis company.", TOWER) == [Verdict.NOT_FOUND]


def test_a_claim_on_a_topic_the_contexts_never_mention_is_not_found() -> None:
    assert _verdicts("Tickets can be bought online at a discount.", TOWER) == [Verdict.NOT_FOUND]


def test_a_claim_combining_facts_from_separate_passages_is_inferred() -> None:
    contexts = (
        "The lattice tower stands in Paris. Many visitors come in summer.",
        "Engineers finished the structure in 1889 after two years of work.",
    )
    assert _verdicts("The Paris lattice tower was finished in 1889.", *contexts) == [
        Verdict.INFERRED
    ]


def test_numbers_match_across_spellings() -> None:
    context = "The library holds 1,000 rare books and 25 manuscripts."
    assert _verdicts("The library holds one thousand rare books.", context) == [Verdict.SUPPORTED]
    assert _verdicts("The library holds 1000 rare books.", context) == [Verdict.SUPPORTED]
    assert _verdicts("The library holds twenty-five manuscripts.", context) == [Verdict.SUPPORTED]


def test_a_number_past_a_floats_range_is_compared_as_written() -> None:
    # 400 digits: no float holds it; the claim is judged, not failed with OverflowError.
    huge, other = "9" * 400, "8" + "9" * 399
    context = f"The ledger counts {huge} grains."
    evaluation = LexicalJudge().evaluate_sync(_record(f"The ledger counts {huge} grains.", context))
    assert evaluation.status is EvalStatus.OK
    assert [c.verdict for c in evaluation.claims] == [Verdict.SUPPORTED]
    assert _verdicts(f"The ledger counts {other} grains.", context) == [Verdict.CONTRADICTED]
    # ... and so before a scale, a unit of time or a clock word.
    for tail in ("thousand grains", "minutes", "pm"):
        said = f"It took {huge} {tail}."
        assert LexicalJudge().evaluate_sync(_record(said, said)).status is EvalStatus.OK
    # Past the digits Python turns into an int, too.
    assert LexicalJudge().evaluate_sync(_record("9" * 5000 + " pm.", "noon")).status is (
        EvalStatus.OK
    )


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        # A superscript is a digit to str.isdigit, not a number int() reads.
        ("The talk starts at ² pm.", "The talk starts at ² pm."),
        # A duration whose seconds pass a float's range.
        ("It lasted " + "9" * 305 + " weeks.", "It lasted " + "9" * 305 + " weeks."),
        # "İ".lower() is two characters: offsets of the lowered text are not the text's.
        ("The İİİİ tower stands in İstanbul", "Visitors say the İİİİ tower stands in İstanbul"),
    ],
    ids=["superscript-before-pm", "duration-past-float-range", "dotted-capital-i"],
)
def test_text_that_once_raised_inside_the_judge_is_judged(answer: str, context: str) -> None:
    evaluation = LexicalJudge().evaluate_sync(_record(answer, context), ALL)
    assert evaluation.status is EvalStatus.OK, evaluation.explanation
    assert [c.verdict for c in evaluation.claims] == [Verdict.SUPPORTED]
    for claim in evaluation.claims:
        assert claim.evidence is not None
        assert context[claim.evidence.start : claim.evidence.end] == claim.evidence.text


def test_clock_times_match_between_12_and_24_hour_forms() -> None:
    context = json.dumps({"name": "Cafe Rio", "hours": {"Monday": "9:0-17:0"}}, indent=2)
    assert _verdicts("On Monday Cafe Rio is open from 9 am to 5 pm.", context) == [
        Verdict.SUPPORTED
    ]
    assert _verdicts("On Monday Cafe Rio is open from 9 am to 8 pm.", context) == [
        Verdict.CONTRADICTED
    ]


def test_a_structured_flag_with_the_opposite_value_is_contradicted() -> None:
    context = json.dumps({"name": "Cafe Rio", "attributes": {"OutdoorSeating": True}}, indent=2)
    assert _verdicts("Cafe Rio has outdoor seating.", context) == [Verdict.SUPPORTED]
    assert _verdicts("Cafe Rio does not have outdoor seating.", context) == [Verdict.CONTRADICTED]


def test_an_empty_answer_has_no_claims_and_undefined_scores() -> None:
    for answer in ("", None, "   "):
        evaluation = LexicalJudge().evaluate_sync(_record(answer, TOWER), ALL)
        assert evaluation.status is EvalStatus.NO_CLAIMS
        assert evaluation.score("groundedness") is None
        assert evaluation.score("faithfulness") is None


def test_without_contexts_every_claim_is_not_found() -> None:
    evaluation = LexicalJudge().evaluate_sync(_record("It was completed in 1889."), ALL)
    assert evaluation.status is EvalStatus.OK
    assert [c.verdict for c in evaluation.claims] == [Verdict.NOT_FOUND]
    assert evaluation.score("groundedness") == 0.0


def test_a_lead_in_line_is_not_a_claim() -> None:
    evaluation = LexicalJudge().evaluate_sync(
        _record("Here is what the passages say:\nIt was completed in 1889.", TOWER), ALL
    )
    assert [c.claim.text for c in evaluation.claims] == ["It was completed in 1889."]


def test_non_ascii_text_is_matched() -> None:
    context = "Der Kölner Dom wurde 1880 fertiggestellt. Er ist 157 Meter hoch."
    evaluation = LexicalJudge().evaluate_sync(
        _record("Der Kölner Dom ist 157 Meter hoch.", context), ALL
    )
    (claim,) = evaluation.claims
    assert claim.verdict is Verdict.SUPPORTED
    assert claim.evidence is not None and "157 Meter hoch" in claim.evidence.text


def test_a_five_megabyte_context_is_evaluated_within_the_read_bound() -> None:
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 90_000
    context = TOWER + " " + filler
    assert len(context) > 5_000_000
    evaluation = LexicalJudge().evaluate_sync(_record("It was completed in 1889.", context), ALL)
    assert evaluation.status is EvalStatus.OK
    assert [c.verdict for c in evaluation.claims] == [Verdict.SUPPORTED]


def test_correctness_compares_the_answer_with_the_reference_both_ways() -> None:
    reference = "The tower was completed in 1889. It is 330 metres tall."
    answer = "The tower was completed in 1889. It is painted bright green."
    record = _record(answer, TOWER, reference=reference)
    evaluation = LexicalJudge(correctness_mode="f1").evaluate_sync(record, ALL)
    # precision 1 of 2 answer claims, recall 1 of 2 reference claims.
    assert evaluation.score("correctness") == 0.5
    assert len(evaluation.reference_claims) == 2
    for mode in ("precision", "recall"):
        judge = LexicalJudge(correctness_mode=mode)
        assert judge.evaluate_sync(record, ALL).score("correctness") == 0.5
    # Agreement: the colour is not addressed by the reference, so precision is 1 of 1.
    agreement = LexicalJudge().evaluate_sync(record, ALL).metrics["correctness"]
    assert agreement.score == pytest.approx(2 / 3)
    assert "not covered by the reference: 'It is painted bright green.'" in agreement.explanation


def _capital(answer: str, reference: str) -> RagRecord:
    return RagRecord(
        question="What is the capital of France?",
        contexts=(Context("Paris, the capital of France, lies on the Seine."),),
        answer=answer,
        reference=reference,
    )


def test_agreement_does_not_punish_grounded_detail_beyond_a_short_reference() -> None:
    record = _capital("The capital of France is Paris, on the Seine.", "Paris.")
    assert LexicalJudge().evaluate_sync(record, ALL).score("correctness") == 1.0
    # Ragas' f1 counts the detail as a precision miss.
    assert LexicalJudge(correctness_mode="f1").evaluate_sync(record, ALL).score(
        "correctness"
    ) == pytest.approx(0.0)


def test_agreement_ignores_extra_claims_the_reference_does_not_address() -> None:
    record = RagRecord(
        question="How long do refunds take?",
        contexts=(Context("Refunds take 5 business days. They are paid to the original card."),),
        answer="Refunds take 5 business days. They are paid to the original card.",
        reference="Refunds take 5 business days.",
    )
    result = LexicalJudge().evaluate_sync(record, ALL).metrics["correctness"]
    assert result.score == 1.0
    assert "not covered by the reference: 'They are paid to the original card.'" in (
        result.explanation
    )
    f1 = LexicalJudge(correctness_mode="f1").evaluate_sync(record, ALL)
    assert f1.score("correctness") == pytest.approx(2 / 3)


def test_agreement_names_an_answer_claim_that_changes_the_reference_number() -> None:
    record = RagRecord(
        question="How long do refunds take?",
        contexts=(Context("Refunds take 5 business days."),),
        answer="Refunds take 7 business days. They are paid to the original card.",
        reference="Refunds take 5 business days.",
    )
    result = LexicalJudge().evaluate_sync(record, ALL).metrics["correctness"]
    assert result.score == 0.0
    assert result.explanation.startswith(
        "agreement: contradicted by the reference: 'Refunds take 7 business days.' "
        "(reference: 'Refunds take 5 business days')"
    )


def test_a_claim_about_another_thing_is_not_contradicted_by_the_reference() -> None:
    # Another plan at another price: the reference speaks of the Team plan only.
    record = RagRecord(
        question="How much does the Team plan cost?",
        contexts=(Context("The Team plan costs $11 per user. The Solo plan costs $6 per user."),),
        answer="The Team plan costs $11 per user. The Solo plan costs $6 per user.",
        reference="The Team plan costs $11 per user.",
    )
    result = LexicalJudge().evaluate_sync(record, ALL).metrics["correctness"]
    assert result.score == 1.0
    assert "contradicted" not in result.explanation


def test_the_question_alone_does_not_cover_a_reference_claim() -> None:
    record = RagRecord(
        question="Do excluded folders count towards the storage quota?",
        contexts=(Context("Version 4.0 was released on March 12, 2024."),),
        answer="Version 4.0 was released on March 12, 2024.",
        reference="Excluded folders count towards the storage quota.",
    )
    assert LexicalJudge().evaluate_sync(record, ALL).score("correctness") == 0.0


def test_an_unknown_correctness_mode_is_refused_by_the_constructor() -> None:
    with pytest.raises(ValueError, match="unknown correctness mode 'accuracy'"):
        LexicalJudge(correctness_mode="accuracy")
    with pytest.raises(TypeError):
        LexicalJudge(mode="f1")  # type: ignore[call-arg]  # no second name for it


def test_correctness_is_absent_without_a_reference() -> None:
    evaluation = LexicalJudge().evaluate_sync(_record("It was completed in 1889.", TOWER), ALL)
    assert "correctness" not in evaluation.metrics


def test_the_same_record_always_gets_the_same_evaluation() -> None:
    record = _record("It was completed in 1889 by Gustave Eiffel's company.", TOWER)
    judge = LexicalJudge()
    first = judge.evaluate_sync(record, ALL)
    second = judge.evaluate_sync(record, ALL)
    assert first.claims == second.claims
    assert first.metrics == second.metrics


def test_one_judge_gives_the_same_results_from_many_threads() -> None:
    judge = LexicalJudge()
    answers = [f"The tower is {n} metres tall. It is in Paris." for n in range(300, 340)]
    expected = [judge.evaluate_sync(_record(a, TOWER), ALL).claims for a in answers]
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda a: judge.evaluate_sync(_record(a, TOWER), ALL).claims, answers))
    assert got == expected


async def test_evaluate_is_the_async_form_of_evaluate_sync() -> None:
    judge = LexicalJudge()
    record = _record("It was completed in 1889.", TOWER)
    evaluation = await judge.evaluate(record, ALL)
    assert evaluation.claims == judge.evaluate_sync(record, ALL).claims
    assert (evaluation.judge, evaluation.annotator_kind) == ("lexical", "CODE")


def test_a_malformed_record_becomes_an_error_evaluation_instead_of_raising() -> None:
    record = RagRecord(question=None, contexts=(Context(None),), answer="It was built in 1889.")  # type: ignore[arg-type]
    evaluation = LexicalJudge().evaluate_sync(record, ALL)
    assert evaluation.status is EvalStatus.ERROR
    assert evaluation.error_type == "TypeError"


LISTING = json.dumps(
    {
        "name": "Harbor Grill",
        "attributes": {
            "RestaurantsReservations": None,
            "OutdoorSeating": True,
            "RestaurantsTakeOut": False,
            "WiFi": None,
            "Ambience": {"romantic": False, "casual": True},
            "BusinessParking": {"street": True, "lot": False},
        },
        "review_info": [{"review_text": "Great fish tacos and a friendly owner."}],
    },
    indent=2,
)


def test_a_claim_negating_a_true_record_flag_is_contradicted() -> None:
    assert _verdicts("Harbor Grill does not have outdoor seating.", LISTING) == [
        Verdict.CONTRADICTED
    ]


def test_a_claim_affirming_a_false_record_flag_is_contradicted() -> None:
    assert _verdicts("It offers takeout for busy diners.", LISTING) == [Verdict.CONTRADICTED]


def test_a_flag_in_a_group_is_read_by_its_own_word() -> None:
    assert _verdicts("Couples love its romantic atmosphere.", LISTING) == [Verdict.CONTRADICTED]


def test_a_negation_after_the_flag_word_counts() -> None:
    assert _verdicts("Takeout is not available there.", LISTING) != [Verdict.CONTRADICTED]


def test_a_contrast_ends_the_reach_of_a_negation() -> None:
    verdicts = _verdicts("Takeout is not offered, but there is outdoor seating.", LISTING)
    assert Verdict.CONTRADICTED not in verdicts


def test_saying_the_record_has_no_information_on_a_flag_is_not_flagged() -> None:
    verdicts = _verdicts("There is no information about WiFi at Harbor Grill.", LISTING)
    assert verdicts != [Verdict.NOT_FOUND]


def test_a_paraphrase_of_agreeing_record_flags_is_faithful() -> None:
    verdicts = _verdicts("Visitors will appreciate the convenient street parking.", LISTING)
    assert all(v in (Verdict.SUPPORTED, Verdict.INFERRED) for v in verdicts)


def test_a_short_grouped_flag_word_needs_its_group_word() -> None:
    # "lot" is a BusinessParking flag (false), but "a lot of" says nothing about parking.
    verdicts = _verdicts("A lot of reviewers praise the friendly owner.", LISTING)
    assert Verdict.CONTRADICTED not in verdicts


def _claim_texts(answer: str, *contexts: str) -> list[str]:
    evaluation = LexicalJudge().evaluate_sync(_record(answer, *contexts), ALL)
    return [c.claim.text for c in evaluation.claims]


def test_pleasantries_and_offers_of_help_are_not_claims() -> None:
    answer = "Sure! It was completed in 1889. I hope this helps! Let me know if you need more."
    assert _claim_texts(answer, TOWER) == ["It was completed in 1889."]


def test_references_to_passages_are_not_claims() -> None:
    assert _claim_texts("(Passage 1)\nIt was completed in 1889.", TOWER) == [
        "It was completed in 1889."
    ]


def test_saying_the_sources_are_silent_is_not_a_claim() -> None:
    answer = "The passages do not mention the ticket prices. It is 330 metres tall."
    assert _claim_texts(answer, TOWER) == ["It is 330 metres tall."]


def test_an_abstention_has_no_claims() -> None:
    evaluation = LexicalJudge().evaluate_sync(
        _record("Unable to answer based on the given passages.", TOWER), ALL
    )
    assert evaluation.status is EvalStatus.NO_CLAIMS


def test_a_name_in_a_derived_form_of_a_context_name_is_found() -> None:
    context = "Venezuela's president met the delegation in Caracas on Monday."
    assert _verdicts("The Venezuelan president met the delegation.", context) == [Verdict.SUPPORTED]


def test_accents_do_not_make_a_name_differ() -> None:
    context = "The mayor, Nicolas Moreno, opened the bridge in June."
    assert _verdicts("Mayor Nicolás Moreno opened the bridge.", context) == [Verdict.SUPPORTED]


def test_a_name_sharing_only_a_prefix_with_a_context_name_is_not_found() -> None:
    context = "The report was written by Johnson and reviewed in March."
    assert _verdicts("The report was written by Johnstone.", context) != [Verdict.SUPPORTED]


def test_a_plural_acronym_is_one_word() -> None:
    context = "The bar has six TVs above the counter for sports fans."
    assert _verdicts("Sports fans like the TVs above the counter.", context) == [Verdict.SUPPORTED]


def test_a_negation_does_not_reach_across_and_to_an_earlier_flag_word() -> None:
    # casual is true and romantic false: both halves agree with the record.
    verdicts = _verdicts("The grill is casual and not romantic.", LISTING)
    assert Verdict.CONTRADICTED not in verdicts


def test_a_negation_does_not_reach_across_and_to_a_later_flag_word() -> None:
    verdicts = _verdicts("It doesn't offer takeout and has street parking.", LISTING)
    assert Verdict.CONTRADICTED not in verdicts


def test_a_negation_before_a_list_reaches_every_item() -> None:
    assert _verdicts("There is no takeout or street parking.", LISTING) == [Verdict.CONTRADICTED]


def test_the_number_of_a_cited_passage_is_not_a_fact_to_find() -> None:
    for answer in (
        "It was completed in 1889 (Passage 2).",
        "As passage 3 states, it was completed in 1889.",
        "Documents 1 and 4 say it was completed in 1889.",
    ):
        assert _verdicts(answer, TOWER) == [Verdict.SUPPORTED], answer


def test_a_part_label_is_not_a_fact_to_find() -> None:
    assert _verdicts("Step 6: the tower is 330 metres tall.", TOWER) == [Verdict.SUPPORTED]


def test_a_title_before_a_name_is_not_a_name() -> None:
    context = "On Tuesday, Smith voted against the bill after a long debate."
    answer = "On Tuesday, Senator Smith voted against the bill."
    assert _verdicts(answer, context) in ([Verdict.SUPPORTED], [Verdict.INFERRED])


def test_a_count_the_sentence_refers_back_to_is_not_a_new_fact() -> None:
    context = "France and Spain signed the trade treaty in Madrid."
    assert _verdicts("The two countries signed the trade treaty.", context) != [Verdict.NOT_FOUND]
    assert _verdicts("Two countries signed the trade treaty.", context) == [Verdict.NOT_FOUND]


def test_a_name_matches_its_acronym_either_way() -> None:
    context = "The U.S. economy grew while the EEOC reviewed the complaint."
    faithful = ([Verdict.SUPPORTED], [Verdict.INFERRED])
    assert _verdicts("The United States economy grew.", context) in faithful
    spelled = "The Equal Employment Opportunity Commission reviewed the complaint."
    assert _verdicts(spelled, context) in faithful


def test_a_name_defined_by_an_acronym_in_brackets_matches_the_acronym() -> None:
    context = "The CDC has not yet found the cause of the illness."
    answer = "The Centers for Disease Control and Prevention (CDC) has not found the cause."
    assert _verdicts(answer, context) != [Verdict.NOT_FOUND]


def test_days_a_week_are_counted_from_the_days_the_record_names() -> None:
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    week = json.dumps({"name": "Cafe Rio", "hours": {d: "9:0-17:0" for d in days}})
    weekdays = json.dumps({"name": "Cafe Rio", "hours": {d: "9:0-17:0" for d in days[:5]}})
    answer = "Cafe Rio is open seven days a week."
    assert _verdicts(answer, week) != [Verdict.NOT_FOUND]
    assert _verdicts(answer, weekdays) in ([Verdict.NOT_FOUND], [Verdict.CONTRADICTED])


def _asked(question: str, answer: str, context: str) -> list[Verdict]:
    record = RagRecord(question=question, contexts=(Context(context),), answer=answer)
    return [c.verdict for c in LexicalJudge().evaluate_sync(record, ALL).claims]


def test_words_of_the_question_are_not_new_content_but_never_evidence() -> None:
    context = "Fold it into a triangle and burn it in a dignified ceremony."
    record = RagRecord(
        question="What is the proper way to dispose of a worn flag?",
        contexts=(Context(context),),
        answer="The proper way to dispose of a worn flag is to burn it in a dignified ceremony.",
    )
    (claim,) = LexicalJudge().evaluate_sync(record, ALL).claims
    assert claim.verdict is Verdict.INFERRED
    assert claim.evidence is None
    without_question = RagRecord(question=None, contexts=record.contexts, answer=record.answer)
    assert [c.verdict for c in LexicalJudge().evaluate_sync(without_question, ALL).claims] == [
        Verdict.NOT_FOUND
    ]


def test_a_false_premise_of_the_question_does_not_make_its_echo_faithful() -> None:
    assert _asked("Is the tower 500 metres tall?", "The tower is 500 metres tall.", TOWER) in (
        [Verdict.NOT_FOUND],
        [Verdict.CONTRADICTED],
    )
    assert _asked(
        "Did Antoni Gaudi design the tower?", "Antoni Gaudi designed the tower.", TOWER
    ) in ([Verdict.NOT_FOUND], [Verdict.CONTRADICTED])


def test_more_sentences_about_the_sources_are_not_claims() -> None:
    answer = (
        "Sure, I can help you with that! It is 330 metres tall. (Ref: Passage 1)\n"
        "Note that no ticket prices are mentioned in the passages provided. "
        "Passage 3 provides the necessary information to answer the question."
    )
    assert _claim_texts(answer, TOWER) == ["It is 330 metres tall."]


def test_advice_to_consult_a_professional_is_not_a_claim() -> None:
    answer = (
        "It is 330 metres tall. It is recommended to consult with a healthcare professional "
        "before climbing. It's best to check the manufacturer's instructions."
    )
    assert _claim_texts(answer, TOWER) == ["It is 330 metres tall."]


def test_a_degree_sign_and_the_name_of_the_scale_are_one_unit() -> None:
    context = "In July the average high in Tallahassee is 92°F and the low is 73°F."
    answer = "The average high in Tallahassee in July is 92 degrees Fahrenheit."
    assert _verdicts(answer, context) in ([Verdict.SUPPORTED], [Verdict.INFERRED])
