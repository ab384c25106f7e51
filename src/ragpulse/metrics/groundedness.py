"""Groundedness: SUPPORTED claims with a verified evidence span / claims.

An abstention ("I don't know") is no claim at all: it scores 0.0 when the contexts could
have answered the question, and is undefined (``no_claims``) when they could not.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragpulse.evaluation.findings import ABSTENTION, ANSWERABILITY, CLAIMS
from ragpulse.evaluation.types import (
    GROUNDEDNESS,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
    Verdict,
)
from ragpulse.metrics._shares import names, no_claims
from ragpulse.metrics._spec import Exported, Metric, ScoreInputs

__all__ = ["METRIC", "groundedness"]


def groundedness(claims: Sequence[ClaimVerdict]) -> float | None:
    """SUPPORTED with verified evidence / claims; None without claims."""
    if not claims:
        return None
    return sum(1 for c in claims if c.grounded) / len(claims)


def _explanation(claims: Sequence[ClaimVerdict]) -> str:
    grounded = sum(1 for c in claims if c.grounded)
    text = f"{grounded} of {len(claims)} claims supported by a verified span"
    unverified = [c for c in claims if c.verdict is Verdict.SUPPORTED and c.evidence is None]
    ungrounded = [c for c in claims if not c.grounded]
    if ungrounded:
        text += f"; unsupported: {names(ungrounded)}"
    if unverified:
        text += f" ({len(unverified)} judged supported but the quoted span was not found)"
    return text


def score(inputs: ScoreInputs) -> MetricResult:
    """The share of claims a verified span states; an abstention by whether it could answer."""
    evaluation = inputs.evaluation
    if evaluation.abstained:
        if inputs.found.answerable:
            return MetricResult(
                GROUNDEDNESS,
                0.0,
                "the answer abstains though the contexts could answer the question",
            )
        return MetricResult(
            GROUNDEDNESS,
            None,
            "the answer abstains and the contexts cannot answer: no claim to check",
            EvalStatus.NO_CLAIMS,
        )
    if not evaluation.claims:
        return no_claims(GROUNDEDNESS)
    claims = evaluation.claims
    return MetricResult(GROUNDEDNESS, groundedness(claims), _explanation(claims))


def explain(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """The claims without a verified span, under the policy; an abstention in its own words."""
    if exported.abstained:
        return result.explanation  # ragpulse's own words on the abstention
    claims = exported.claims
    if not claims or result.status is not EvalStatus.OK:
        return ex.free_text(exported, result.explanation)
    grounded = sum(1 for c in claims if c.grounded)
    head = f"{grounded} of {len(claims)} claims supported by a verified span"
    failed = [i for i, c in enumerate(claims) if not c.grounded]
    return head + ex.failing(claims, failed, "answer")


METRIC = Metric(
    name=GROUNDEDNESS,
    description="answer claims a verified span of a context states / answer claims",
    needs=("answer", "contexts"),
    findings=(CLAIMS, ABSTENTION, ANSWERABILITY),
    judges={
        "lexical": "SUPPORTED when one window holds the claim's words, numbers and names",
        "openai": "SUPPORTED only with a quote verified in the named context",
        "nli": "entailment by the model with the window as evidence",
    },
    score=score,
    explain=explain,
    default=True,
    order=20,
)
