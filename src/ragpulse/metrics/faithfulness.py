"""Faithfulness: (SUPPORTED + INFERRED) / claims; strict mode counts INFERRED as unfaithful.

Undefined (``None``, never 1.0 or 0.0) when the answer has no claims, so averages skip it.
Strict mode is DeepEval's ``penalize_ambiguous_claims``: only a claim a context states
counts.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from ragpulse.evaluation.findings import CLAIMS
from ragpulse.evaluation.types import (
    FAITHFULNESS,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
    Verdict,
)
from ragpulse.metrics._shares import names, no_claims
from ragpulse.metrics._spec import Exported, Metric, ScoreInputs

__all__ = ["METRIC", "STRICT_PREFIX", "faithfulness", "strict_faithfulness"]

STRICT_PREFIX = "strict:"
"""How a faithfulness explanation made in strict mode begins."""
_FAITHFUL = (Verdict.SUPPORTED, Verdict.INFERRED)


def faithfulness(claims: Sequence[ClaimVerdict]) -> float | None:
    """(SUPPORTED + INFERRED) / claims; None without claims."""
    if not claims:
        return None
    return sum(1 for c in claims if c.verdict in _FAITHFUL) / len(claims)


def strict_faithfulness(claims: Sequence[ClaimVerdict]) -> float | None:
    """SUPPORTED / claims: an INFERRED claim counts as unfaithful; None without claims."""
    if not claims:
        return None
    return sum(1 for c in claims if c.verdict is Verdict.SUPPORTED) / len(claims)


def _explanation(claims: Sequence[ClaimVerdict]) -> str:
    counts = Counter(c.verdict for c in claims)
    faithful = counts[Verdict.SUPPORTED] + counts[Verdict.INFERRED]
    text = f"{faithful} of {len(claims)} claims supported or inferred from the contexts"
    contradicted = [c for c in claims if c.verdict is Verdict.CONTRADICTED]
    not_found = [c for c in claims if c.verdict is Verdict.NOT_FOUND]
    if contradicted:
        text += f"; contradicted: {names(contradicted)}"
    if not_found:
        text += f"; not found: {names(not_found)}"
    return text


def score(inputs: ScoreInputs) -> MetricResult:
    """The share of the answer's claims the contexts state or imply."""
    claims = inputs.evaluation.claims
    if not claims:
        return no_claims(FAITHFULNESS)
    return MetricResult(FAITHFULNESS, faithfulness(claims), _explanation(claims))


def explain(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """The claims not found or contradicted (in strict mode: not stated), under the policy."""
    claims = exported.claims
    if not claims or result.status is not EvalStatus.OK:
        return ex.free_text(exported, result.explanation)
    if (result.explanation or "").startswith(STRICT_PREFIX):
        supported = sum(1 for c in claims if c.verdict is Verdict.SUPPORTED)
        head = (
            f"{STRICT_PREFIX} {supported} of {len(claims)} claims supported by the contexts "
            "(inferred claims count as unfaithful)"
        )
        failed = [i for i, c in enumerate(claims) if c.verdict is not Verdict.SUPPORTED]
        return head + ex.failing(claims, failed, "answer")
    faithful = sum(1 for c in claims if c.verdict in _FAITHFUL)
    head = f"{faithful} of {len(claims)} claims supported or inferred from the contexts"
    failed = [
        i for i, c in enumerate(claims) if c.verdict in (Verdict.NOT_FOUND, Verdict.CONTRADICTED)
    ]
    return head + ex.failing(claims, failed, "answer")


def strict(result: MetricResult, evaluation: Evaluation) -> MetricResult:
    """INFERRED claims count as unfaithful; an undefined score stays undefined."""
    if result.score is None:
        return result
    inferred = sum(1 for c in evaluation.claims if c.verdict is Verdict.INFERRED)
    explanation = (
        f"{STRICT_PREFIX} {inferred} inferred claims count as unfaithful; {result.explanation}"
    )
    return dataclasses.replace(
        result, score=strict_faithfulness(evaluation.claims), explanation=explanation
    )


METRIC = Metric(
    name=FAITHFULNESS,
    description="answer claims the contexts state or imply / answer claims",
    needs=("answer", "contexts"),
    findings=(CLAIMS,),
    judges={
        "lexical": "each sentence or clause aligned to its best passage window",
        "openai": "the first call: claims, verdicts and verified quotes",
        "nli": "each claim against each passage window by the model",
    },
    score=score,
    explain=explain,
    strict=strict,
    default=True,
    order=10,
)
