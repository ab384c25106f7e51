"""The checks an LLM judge's verdict must pass before it counts (pure, no server)."""

from __future__ import annotations

import pytest

from ragpulse.evaluation.evidence import verify
from ragpulse.evaluation.types import Claim, ClaimVerdict, Context, Evidence, Verdict
from ragpulse.judges.llm._verify import check_quote, guard

CONTEXTS = (
    Context("The Eiffel Tower was completed in 1889. It is 330 metres tall.", id="a"),
    Context("Gustave Eiffel's company designed and built the tower.", id="b"),
)


def _verdict(
    text: str,
    verdict: Verdict,
    quote: str | None,
    context: int | None = 0,
    contexts: tuple[Context, ...] = CONTEXTS,
) -> ClaimVerdict:
    evidence = verify(quote, contexts, context)
    return ClaimVerdict(Claim(text, 0, len(text)), verdict, evidence, quote)


def test_a_related_verified_quote_counts() -> None:
    cv = _verdict("The tower is 330 metres tall.", Verdict.SUPPORTED, "It is 330 metres tall")
    assert check_quote(cv, CONTEXTS) is None


def test_a_quote_without_the_claims_number_does_not_support_it() -> None:
    cv = _verdict("The tower is 300 metres tall.", Verdict.SUPPORTED, "It is 330 metres tall")
    reason = check_quote(cv, CONTEXTS)
    assert reason is not None and "300" in reason


def test_a_name_the_quoted_context_never_mentions_does_not_count() -> None:
    cv = _verdict(
        "In 1889 Gustave Roux built the Eiffel Tower.",
        Verdict.SUPPORTED,
        "The Eiffel Tower was completed in 1889",
    )
    reason = check_quote(cv, CONTEXTS)
    assert reason is not None and "roux" in reason


def test_a_quote_that_shares_no_word_with_the_claim_does_not_count() -> None:
    cv = _verdict("The tower was painted gold.", Verdict.INFERRED, "completed in 1889")
    reason = check_quote(cv, CONTEXTS)
    assert reason is not None and "no content words in common" in reason


def test_not_found_needs_no_quote_but_every_other_verdict_does() -> None:
    assert check_quote(_verdict("It glows.", Verdict.NOT_FOUND, None), CONTEXTS) is None
    reason = check_quote(_verdict("It glows.", Verdict.CONTRADICTED, None), CONTEXTS)
    assert reason == "CONTRADICTED without a quote"


def test_answer_text_no_judge_claim_covers_is_merged_from_the_offline_verdicts() -> None:
    answer_claim = ClaimVerdict(Claim("It glows in the dark.", 40, 61), Verdict.NOT_FOUND)
    result = guard([], [answer_claim], CONTEXTS)
    [merged] = result.verdicts
    assert merged.verdict is Verdict.NOT_FOUND
    assert merged.reason is not None and merged.reason.startswith("not covered by the judge")


def test_a_claim_that_is_nowhere_in_the_answer_is_dropped() -> None:
    invented = ClaimVerdict(Claim("Paris is in France."), Verdict.SUPPORTED, quote="Paris")
    result = guard([invented], [], CONTEXTS)
    assert result.verdicts == []
    assert "not in the answer" in result.notes[0]


def test_a_verified_offline_contradiction_overrides_the_judges_support() -> None:
    judged = _verdict("It is 300 metres tall.", Verdict.INFERRED, "It is 330 metres tall")
    evidence = Evidence(0, 40, 61, CONTEXTS[0].text[40:61], "a")
    offline = ClaimVerdict(judged.claim, Verdict.CONTRADICTED, evidence, reason="330")
    result = guard([judged], [offline], CONTEXTS)
    assert result.disagreement is True
    assert [v.verdict for v in result.verdicts] == [Verdict.CONTRADICTED]
    assert result.verdicts[0].evidence == evidence


def test_a_supported_quote_must_state_most_of_the_claim_not_share_one_word() -> None:
    thin = _verdict("Eiffel towers come as gold bars.", Verdict.SUPPORTED, "The Eiffel Tower")
    reason = check_quote(thin, CONTEXTS)
    assert reason is not None and "does not state" in reason and "gold" in reason


def test_a_paraphrase_free_quote_that_states_the_claim_passes() -> None:
    cv = _verdict(
        "The Eiffel Tower was completed in 1889.",
        Verdict.SUPPORTED,
        "The Eiffel Tower was completed in 1889",
    )
    assert check_quote(cv, CONTEXTS) is None


def test_support_combined_from_the_quoted_context_stands_as_inferred() -> None:
    # The quote states the height; the tower's completion is elsewhere in the same context.
    text = "The tower, completed in 1889, is 330 metres tall."
    cv = _verdict(text, Verdict.SUPPORTED, "It is 330 metres tall")
    [settled] = guard([cv], [], CONTEXTS, answer=text).verdicts
    assert settled.verdict is Verdict.INFERRED
    assert settled.evidence is not None


def test_a_claim_listed_twice_counts_once_and_the_unfaithful_verdict_stands() -> None:
    text = "It is 330 metres tall."
    supported = _verdict(text, Verdict.SUPPORTED, "It is 330 metres tall")
    not_found = _verdict(text, Verdict.NOT_FOUND, None)
    result = guard([supported, supported, not_found], [], CONTEXTS, answer=text)
    [kept] = result.verdicts
    assert kept.verdict is Verdict.NOT_FOUND
    assert any("counted once" in note for note in result.notes)


def test_a_paraphrase_quoted_in_part_stands_as_inferred_not_supported() -> None:
    # The quote states part of the claim; the rest is in the quoted passage in its words.
    text = "The company of Gustave Eiffel designed and built the tower."
    cv = _verdict(text, Verdict.SUPPORTED, "built the tower", context=1)
    [settled] = guard([cv], [], CONTEXTS, answer=text).verdicts
    assert settled.verdict is Verdict.INFERRED
    assert settled.reason is not None and "inferred" in settled.reason


def test_under_strict_checks_a_paraphrase_with_words_of_its_own_is_not_found() -> None:
    # "built by Gustave Eiffel's company" in other words no passage holds: strict checks
    # (a request that addresses the judge) cannot tell it from an invented fact.
    text = (
        "The tower was designed and then constructed by the engineering firm Gustave Eiffel owned."
    )
    cv = _verdict(text, Verdict.SUPPORTED, "Gustave Eiffel's company designed", context=1)
    [settled] = guard([cv], [], CONTEXTS, answer=text).verdicts
    assert settled.verdict is Verdict.NOT_FOUND
    flagged = {text[start:end] for start, end in settled.unsupported}
    assert {"engineering", "firm"} <= flagged


@pytest.mark.parametrize("verdict", [Verdict.INFERRED, Verdict.SUPPORTED])
def test_a_faithful_verdict_with_a_word_no_passage_holds_is_downgraded(verdict: Verdict) -> None:
    text = "The tower's lifts run on solar power."
    contexts = (Context("The lifts of the tower need a lot of power."),)
    cv = _verdict(text, verdict, "The lifts of the tower need a lot of power.", contexts=contexts)
    [settled] = guard([cv], [], contexts, answer=text).verdicts
    assert settled.verdict is Verdict.NOT_FOUND
    assert settled.reason is not None and "does not hold the claim's" in settled.reason


def test_a_contradiction_loses_to_a_verified_span_that_states_the_claim() -> None:
    text = "The tower was completed in 1889."
    contexts = (Context("The tower was completed in 1889. The tower was repainted in 2019."),)
    cv = _verdict(text, Verdict.CONTRADICTED, "The tower was repainted in 2019.", contexts=contexts)
    offline = _verdict(
        text, Verdict.SUPPORTED, "The tower was completed in 1889.", contexts=contexts
    )
    [settled] = guard([cv], [offline], contexts, answer=text).verdicts
    assert settled.verdict is Verdict.SUPPORTED
    assert settled.reason is not None and settled.reason.startswith("downgraded from CONTRADICTED")


def test_a_contradiction_must_speak_of_what_the_claim_states() -> None:
    text = "Entry to the tower is free for young children on Sundays."
    contexts = (Context("Children love the tower."),)
    cv = _verdict(text, Verdict.CONTRADICTED, "Children love the tower.", contexts=contexts)
    assert "does not speak of what the claim states" in (check_quote(cv, contexts) or "")
    assert check_quote(cv, contexts, strict=False) is None


def test_a_quote_naming_only_the_questions_topic_supports_nothing() -> None:
    # The obedient judge's thin quote: two shared words, both the topic the question names.
    text = "Eiffel towers come as gold bars."
    cv = _verdict(text, Verdict.SUPPORTED, "The Eiffel Tower")
    question = "What is the Eiffel Tower made of?"
    [settled] = guard([cv], [], CONTEXTS, question=question, answer=text).verdicts
    assert settled.verdict is Verdict.NOT_FOUND
    flagged = {text[start:end] for start, end in settled.unsupported}
    assert {"gold", "bars"} <= flagged


def test_a_pointer_to_a_source_is_no_number_the_quote_must_hold() -> None:
    cv = _verdict(
        "The tower is 330 metres tall (Passage 2) [1].", Verdict.SUPPORTED, "It is 330 metres tall"
    )
    assert check_quote(cv, CONTEXTS) is None


def test_a_judge_claim_that_states_no_fact_is_not_counted() -> None:
    text = "I don't know. The tower is 330 metres tall."
    abstention = ClaimVerdict(Claim("I don't know.", 0, 13), Verdict.SUPPORTED)
    fact = ClaimVerdict(
        Claim("The tower is 330 metres tall.", 14, len(text)),
        Verdict.SUPPORTED,
        verify("It is 330 metres tall", CONTEXTS, 0),
        "It is 330 metres tall",
    )
    result = guard([abstention, fact], [], CONTEXTS, answer=text)
    assert [cv.claim.text for cv in result.verdicts] == ["The tower is 330 metres tall."]
    assert any("state no fact" in note for note in result.notes)


def test_without_strict_checks_a_verified_quote_that_speaks_of_the_claim_counts() -> None:
    # An honest paraphrase: the quote states it in other words (two of eight shared).
    text = "Gustave Eiffel's engineering firm drew up the plans and then erected the structure."
    cv = _verdict(text, Verdict.SUPPORTED, "Gustave Eiffel's company designed", context=1)
    assert check_quote(cv, CONTEXTS, strict=False) is None
    [settled] = guard([cv], [], CONTEXTS, answer=text, strict=False).verdicts
    assert settled.verdict is Verdict.SUPPORTED


def test_without_strict_checks_an_unrelated_or_unverified_quote_still_does_not_count() -> None:
    unrelated = _verdict("The tower was painted gold.", Verdict.SUPPORTED, "completed in 1889")
    made_up = _verdict("The tower was painted gold.", Verdict.SUPPORTED, "painted gold")
    assert "no content words" in (check_quote(unrelated, CONTEXTS, strict=False) or "")
    assert "not in the named context" in (check_quote(made_up, CONTEXTS, strict=False) or "")
