"""Correctness: F-beta of claim precision and recall against the reference (four modes).

Absent without a reference (never 0); undefined (``None``) when the answer has no claims.
The modes:

- ``agreement`` (the default): precision counts only the answer claims the reference
  addresses (a claim it supports is a hit, one it contradicts a miss; a claim it is
  silent about counts neither way), recall is the share of reference claims the
  answer covers, and the score is their F-beta. With no answer claim addressed the
  score is the recall. A short reference ("Paris.") thus does not punish true detail
  the answer adds, while a changed number or name still does.
- ``precision``, ``recall``, ``f1``: Ragas FactualCorrectness. Every answer claim the
  reference does not support is a precision miss; ``f1`` is the F-beta.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast

from ragpulse.evaluation.findings import CLAIMS, REFERENCE_AGREEMENT, CorrectnessInputs
from ragpulse.evaluation.types import (
    CORRECTNESS,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
)
from ragpulse.metrics._shares import COVERED, names, no_claims, quote
from ragpulse.metrics._spec import Exported, Metric, ScoreInputs, needs_text

__all__ = [
    "CORRECTNESS_MODES",
    "DEFAULT_CORRECTNESS_MODE",
    "METRIC",
    "CorrectnessMode",
    "agreement_precision",
    "check_correctness_mode",
    "correctness",
    "fbeta",
]

CorrectnessMode = Literal["agreement", "precision", "recall", "f1"]
CORRECTNESS_MODES: tuple[CorrectnessMode, ...] = ("agreement", "precision", "recall", "f1")
DEFAULT_CORRECTNESS_MODE: CorrectnessMode = "agreement"
_MODES: frozenset[str] = frozenset(CORRECTNESS_MODES)
# Explanations quote at most this many claims.
_QUOTED = 3


def fbeta(precision: float | None, recall: float | None, beta: float = 1.0) -> float | None:
    """F-beta of precision and recall; beta > 1 weights recall. None when either is None."""
    if precision is None or recall is None:
        return None
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    b2 = beta * beta
    denominator = b2 * precision + recall
    if denominator == 0:
        return 0.0
    return (1 + b2) * precision * recall / denominator


def _share(hits: Sequence[bool]) -> float | None:
    return sum(1 for hit in hits if hit) / len(hits) if hits else None


def check_correctness_mode(mode: str) -> CorrectnessMode:
    """``mode`` as a ``CorrectnessMode``; ``ValueError`` naming the valid modes otherwise."""
    if mode not in _MODES:
        raise ValueError(
            f"unknown correctness mode {mode!r}; expected one of {', '.join(CORRECTNESS_MODES)}"
        )
    return cast(CorrectnessMode, mode)


def _addressed(precision_hits: Sequence[bool], contradicted: Sequence[bool]) -> list[bool]:
    """Per answer claim, whether the reference supports or contradicts it."""
    return [
        hit or (index < len(contradicted) and contradicted[index])
        for index, hit in enumerate(precision_hits)
    ]


def agreement_precision(
    precision_hits: Sequence[bool], contradicted: Sequence[bool] = ()
) -> float | None:
    """Supported / (supported + contradicted) answer claims; None when none is addressed."""
    addressed = _addressed(precision_hits, contradicted)
    hits = [hit for hit, seen in zip(precision_hits, addressed, strict=True) if seen]
    return _share(hits)


def correctness(
    precision_hits: Sequence[bool],
    recall_hits: Sequence[bool],
    *,
    mode: CorrectnessMode = DEFAULT_CORRECTNESS_MODE,
    beta: float = 1.0,
    contradicted: Sequence[bool] = (),
) -> float | None:
    """The correctness score of ``mode``; None when the sides it needs have no claims.

    ``contradicted`` marks the answer claims the reference contradicts (``agreement``
    only). In ``agreement`` mode the score is the recall when no answer claim is
    addressed, and None when neither side has a defined share.
    """
    mode = check_correctness_mode(mode)
    recall = _share(recall_hits)
    if mode == "agreement":
        precision = agreement_precision(precision_hits, contradicted)
        if precision is None:
            return recall
        if recall is None:
            return precision
        return fbeta(precision, recall, beta)
    precision = _share(precision_hits)
    if mode == "precision":
        return precision
    if mode == "recall":
        return recall
    return fbeta(precision, recall, beta)


def _mode_label(mode: CorrectnessMode, beta: float) -> str:
    f_label = "f1" if beta == 1.0 else f"f{beta:g}"
    if mode == "f1":
        return f_label
    if mode == "agreement" and beta != 1.0:
        return f"agreement ({f_label})"
    return mode


def _conflict_quoted(
    claims: Sequence[ClaimVerdict], conflicts: Sequence[str | None], indices: Sequence[int]
) -> str:
    shown = []
    for index in indices[:_QUOTED]:
        text = quote(claims[index].claim.text)
        conflict = conflicts[index] if index < len(conflicts) else None
        shown.append(f"{text} (reference: {quote(conflict)})" if conflict else text)
    more = len(indices) - _QUOTED
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _agreement_parts(inputs: CorrectnessInputs) -> list[str]:
    p_hits = inputs.precision_hits
    addressed = _addressed(p_hits, inputs.contradicted)
    precision = agreement_precision(p_hits, inputs.contradicted)
    if precision is None:
        return ["no answer claim addressed by the reference"] if p_hits else []
    return [
        f"precision {precision:.2f} ({sum(p_hits)} of {sum(addressed)} answer claims the "
        "reference addresses agree with it)"
    ]


def _correctness_explanation(
    inputs: CorrectnessInputs,
    claims: Sequence[ClaimVerdict],
    reference_claims: Sequence[ClaimVerdict],
    mode: CorrectnessMode,
    beta: float,
) -> str:
    p_hits, r_hits = inputs.precision_hits, inputs.recall_hits
    parts = []
    precision, recall = _share(p_hits), _share(r_hits)
    if mode == "agreement":
        parts.extend(_agreement_parts(inputs))
    elif precision is not None:
        parts.append(
            f"precision {precision:.2f} ({sum(p_hits)} of {len(p_hits)} answer claims "
            "supported by the reference)"
        )
    if recall is not None:
        parts.append(
            f"recall {recall:.2f} ({sum(r_hits)} of {len(r_hits)} reference claims "
            "covered by the answer)"
        )
    text = ", ".join(parts) if parts else "no claims on either side"
    aligned = len(claims) == len(p_hits)
    if mode == "agreement" and aligned:
        addressed = _addressed(p_hits, inputs.contradicted)
        contradicted = [i for i, hit in enumerate(p_hits) if addressed[i] and not hit]
        silent = [c for c, seen in zip(claims, addressed, strict=True) if not seen]
        if contradicted:
            text = (
                f"contradicted by the reference: "
                f"{_conflict_quoted(claims, inputs.conflicts, contradicted)}; {text}"
            )
        if silent:
            text += f"; not covered by the reference: {names(silent)}"
    elif aligned:
        extra = [c for c, hit in zip(claims, p_hits, strict=True) if not hit]
        if extra:
            text += f"; not in the reference: {names(extra)}"
    text = f"{_mode_label(mode, beta)}: {text}"
    if len(reference_claims) == len(r_hits):
        missing = [c for c, hit in zip(reference_claims, r_hits, strict=True) if not hit]
        if missing:
            text += f"; missing from the answer: {names(missing)}"
    return text


def score(inputs: ScoreInputs) -> MetricResult | None:
    """The mode's score from the reference check; absent when the reference was not checked."""
    found = inputs.found.correctness
    if found is None:
        return None
    claims = inputs.evaluation.claims
    if not claims:
        return no_claims(CORRECTNESS)
    mode = check_correctness_mode(inputs.correctness_mode)
    value = correctness(
        found.precision_hits,
        found.recall_hits,
        mode=mode,
        beta=inputs.beta,
        contradicted=found.contradicted,
    )
    explanation = _correctness_explanation(
        found, claims, inputs.found.reference_verdicts, mode, inputs.beta
    )
    return MetricResult(CORRECTNESS, value, explanation)


def explain(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """The judge's account under the policy; without content, the reference claims missed."""
    if not exported.claims or result.status is not EvalStatus.OK:
        return ex.free_text(exported, result.explanation)
    if ex.content and result.explanation:
        # The judge's own account names answer claims the reference lacks, which the
        # evaluation does not keep as verdicts; it passes the same policy as the rest.
        return ex.text(result.explanation)
    reference = exported.reference_claims
    covered = sum(1 for c in reference if c.verdict in COVERED)
    head = f"{covered} of {len(reference)} reference claims covered by the answer"
    missing = [i for i, c in enumerate(reference) if c.verdict not in COVERED]
    return head + ex.failing(reference, missing, "reference")


METRIC = Metric(
    name=CORRECTNESS,
    description="F-beta of answer claims the reference supports and reference claims covered",
    needs=("answer", "reference"),
    findings=(CLAIMS, REFERENCE_AGREEMENT),
    judges={
        "lexical": "answer claims against the reference and back, the question as premise",
        "openai": "the second call: per answer claim and per reference claim",
        "nli": "the model reads both directions",
    },
    score=score,
    explain=explain,
    threshold=0.5,
    content=("claims", "reference_claims"),
    missing=needs_text("reference"),
    default=True,
    order=30,
)
