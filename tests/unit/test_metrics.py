"""Metric arithmetic, including the worked examples of the project's metric definitions."""

from __future__ import annotations

import pytest

from ragpulse.evaluation import (
    Claim,
    ClaimVerdict,
    Context,
    CorrectnessInputs,
    EvalStatus,
    Evaluation,
    Findings,
    RagRecord,
    Verdict,
    verify,
)
from ragpulse.metrics._assemble import assemble as assemble_findings
from ragpulse.metrics.correctness import correctness, fbeta
from ragpulse.metrics.faithfulness import faithfulness
from ragpulse.metrics.groundedness import groundedness

CONTEXT = Context(
    "Aspirin reduces fever and relieves mild pain. Common side effects include stomach "
    "upset and heartburn. It can increase the risk of bleeding."
)


RECORD = RagRecord("What does aspirin do?", (CONTEXT,), "an answer")


def assemble(
    claims: list[ClaimVerdict],
    *,
    metrics: tuple[str, ...],
    correctness_inputs: CorrectnessInputs | None = None,
    mode: str = "agreement",
) -> Evaluation:
    """The evaluation a judge makes of ``claims`` (and of the reference, when checked)."""
    return assemble_findings(
        RECORD,
        metrics,
        claims,
        Findings(correctness=correctness_inputs),
        judge="j",
        annotator_kind="CODE",
        correctness_mode=mode,
    )


def _supported(text: str, quote: str) -> ClaimVerdict:
    return ClaimVerdict(
        Claim(text), Verdict.SUPPORTED, evidence=verify(quote, (CONTEXT,), 0), quote=quote
    )


def _verdict(text: str, verdict: Verdict) -> ClaimVerdict:
    return ClaimVerdict(Claim(text), verdict)


def test_one_inferred_claim_of_four_gives_groundedness_075_and_faithfulness_1() -> None:
    claims = [
        _supported("Aspirin reduces fever.", "reduces fever"),
        _supported("It relieves mild pain.", "relieves mild pain"),
        _supported("It can cause heartburn.", "heartburn"),
        _verdict("It is not a good choice before surgery.", Verdict.INFERRED),
    ]
    assert groundedness(claims) == 0.75
    assert faithfulness(claims) == 1.0


def test_a_claim_copied_from_a_stale_chunk_is_fully_grounded() -> None:
    stale = Context("The 2019 price list: a ticket costs 12 euros.")
    quote = "a ticket costs 12 euros"
    claim = ClaimVerdict(
        Claim("A ticket costs 12 euros."),
        Verdict.SUPPORTED,
        evidence=verify(quote, (stale,), 0),
        quote=quote,
    )
    # Groundedness checks the answer against what was retrieved, not against the world.
    assert groundedness([claim]) == 1.0


def test_side_effects_answer_gives_faithfulness_075_and_completeness_two_thirds() -> None:
    claims = [
        _supported("Side effects include stomach upset.", "stomach upset"),
        _supported("Side effects include heartburn.", "heartburn"),
        _supported("It can increase bleeding risk.", "increase the risk of bleeding"),
        _verdict("It commonly causes drowsiness.", Verdict.NOT_FOUND),
    ]
    assert faithfulness(claims) == 0.75
    # Reference lists three side effects; the answer covers two of them.
    completeness = correctness((), (True, True, False), mode="recall")
    assert completeness == pytest.approx(2 / 3)


def test_a_supported_verdict_with_an_unverified_quote_is_not_grounded() -> None:
    claim = ClaimVerdict(
        Claim("Aspirin cures colds."),
        Verdict.SUPPORTED,
        evidence=verify("aspirin cures colds", (CONTEXT,), 0),
        quote="aspirin cures colds",
    )
    assert claim.evidence is None
    assert groundedness([claim]) == 0.0
    assert faithfulness([claim]) == 1.0


def test_no_claims_leaves_scores_undefined() -> None:
    assert faithfulness([]) is None
    assert groundedness([]) is None


def test_contradicted_claims_count_against_faithfulness() -> None:
    claims = [
        _supported("Aspirin reduces fever.", "reduces fever"),
        _verdict("Aspirin lowers the risk of bleeding.", Verdict.CONTRADICTED),
    ]
    assert faithfulness(claims) == 0.5


@pytest.mark.parametrize(
    ("precision", "recall", "beta", "expected"),
    [
        (0.5, 1.0, 1.0, 2 * 0.5 * 1.0 / 1.5),
        (0.5, 1.0, 2.0, 5 * 0.5 * 1.0 / (4 * 0.5 + 1.0)),
        (1.0, 0.5, 0.5, 1.25 * 0.5 / (0.25 + 0.5)),
        (0.0, 0.0, 1.0, 0.0),
    ],
)
def test_fbeta_matches_hand_computed_values(
    precision: float, recall: float, beta: float, expected: float
) -> None:
    assert fbeta(precision, recall, beta) == pytest.approx(expected)


def test_fbeta_is_undefined_when_a_side_is_undefined() -> None:
    assert fbeta(None, 1.0) is None
    assert fbeta(0.5, None) is None


def test_correctness_modes_use_the_right_side() -> None:
    precision_hits = (True, False)  # 1 of 2 answer claims in the reference
    recall_hits = (True, True, True, False)  # 3 of 4 reference claims covered
    assert correctness(precision_hits, recall_hits, mode="precision") == 0.5
    assert correctness(precision_hits, recall_hits, mode="recall") == 0.75
    assert correctness(precision_hits, recall_hits, mode="f1") == pytest.approx(0.6)
    assert correctness(precision_hits, recall_hits, mode="f1", beta=2.0) == pytest.approx(
        5 * 0.5 * 0.75 / (4 * 0.5 + 0.75)
    )


def test_agreement_counts_only_the_answer_claims_the_reference_addresses() -> None:
    # Claim 1 supported, claim 2 contradicted, claim 3 not addressed by the reference.
    precision_hits = (True, False, False)
    contradicted = (False, True, False)
    recall_hits = (True, True, True, False)
    score = correctness(precision_hits, recall_hits, mode="agreement", contradicted=contradicted)
    assert score == pytest.approx(fbeta(0.5, 0.75))
    assert correctness(
        precision_hits, recall_hits, mode="agreement", contradicted=contradicted, beta=2.0
    ) == pytest.approx(fbeta(0.5, 0.75, 2.0))
    # The Ragas modes ignore what is contradicted: every unsupported claim is a miss.
    assert correctness(
        precision_hits, recall_hits, mode="f1", contradicted=contradicted
    ) == pytest.approx(fbeta(1 / 3, 0.75))


def test_agreement_is_the_default_mode() -> None:
    # A true extra claim the reference says nothing about does not lower the score.
    assert correctness((True, False), (True,)) == 1.0
    assert correctness((True, False), (True,), mode="f1") == pytest.approx(fbeta(0.5, 1.0))


def test_agreement_without_an_addressed_claim_is_the_recall() -> None:
    assert correctness((False, False), (True, False), mode="agreement") == 0.5
    assert correctness((), (True, True, False, False), mode="agreement") == 0.5
    assert correctness((True, False), (), mode="agreement") == 1.0
    assert correctness((False,), (), mode="agreement") is None
    assert correctness((), (), mode="agreement") is None


def test_correctness_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="agreement, precision, recall, f1"):
        correctness((True,), (True,), mode="accuracy")  # type: ignore[arg-type]
    claims = [_supported("Aspirin reduces fever.", "reduces fever")]
    with pytest.raises(ValueError, match="accuracy"):
        inputs = CorrectnessInputs((True,), (True,))
        assemble(claims, metrics=("correctness",), correctness_inputs=inputs, mode="accuracy")


def test_assemble_without_claims_says_no_claims_with_undefined_scores() -> None:
    evaluation = assemble([], metrics=("faithfulness", "groundedness"))
    assert evaluation.status is EvalStatus.NO_CLAIMS
    assert evaluation.score("faithfulness") is None
    assert evaluation.score("groundedness") is None


def test_assemble_leaves_correctness_absent_without_a_reference() -> None:
    claims = [_supported("Aspirin reduces fever.", "reduces fever")]
    evaluation = assemble(
        claims,
        metrics=("faithfulness", "groundedness", "correctness"),
    )
    assert "correctness" not in evaluation.metrics
    assert evaluation.score("correctness") is None


def test_assemble_reports_only_the_metrics_asked_for() -> None:
    claims = [_supported("Aspirin reduces fever.", "reduces fever")]
    evaluation = assemble(claims, metrics=("groundedness",))
    assert set(evaluation.metrics) == {"groundedness"}


def test_assemble_computes_correctness_from_its_inputs() -> None:
    claims = [_supported("Aspirin reduces fever.", "reduces fever")]
    evaluation = assemble(
        claims,
        metrics=("correctness",),
        correctness_inputs=CorrectnessInputs((True,), (True, False)),
        mode="recall",
    )
    assert evaluation.score("correctness") == 0.5


def test_agreement_explanation_names_the_mode_and_the_contradicted_claim_first() -> None:
    claims = [
        _supported("Refunds take 5 business days.", "take 5 business days"),
        _supported("Refunds take 7 days in Canada.", "7 days"),
        _supported("They are paid to the original card.", "original card"),
    ]
    evaluation = assemble(
        claims,
        metrics=("correctness",),
        correctness_inputs=CorrectnessInputs(
            (True, False, False),
            (True,),
            contradicted=(False, True, False),
            conflicts=(None, "5 business days", None),
        ),
    )
    result = evaluation.metrics["correctness"]
    assert result.score == pytest.approx(fbeta(0.5, 1.0))
    explanation = result.explanation
    assert explanation.startswith(
        "agreement: contradicted by the reference: 'Refunds take 7 days in Canada.' "
        "(reference: '5 business days')"
    )
    assert "not covered by the reference: 'They are paid to the original card.'" in explanation
    assert "1 of 2 answer claims the reference addresses agree with it" in explanation


def test_groundedness_explanation_names_the_unsupported_claim() -> None:
    claims = [
        _supported("Aspirin reduces fever.", "reduces fever"),
        _verdict("It commonly causes drowsiness.", Verdict.NOT_FOUND),
    ]
    evaluation = assemble(claims, metrics=("groundedness",))
    explanation = evaluation.metrics["groundedness"].explanation or ""
    assert explanation.startswith("1 of 2 claims supported by a verified span")
    assert "'It commonly causes drowsiness.'" in explanation
