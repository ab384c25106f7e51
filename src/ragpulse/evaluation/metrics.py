"""Metric arithmetic: faithfulness, groundedness and correctness from claim verdicts.

Pure functions. An undefined score is ``None`` (no claims, no reference), never
1.0 and never 0.0, so averages can skip it instead of being skewed by it.

Correctness modes:

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

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from ragpulse.evaluation.types import (
    CORRECTNESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    AnnotatorKind,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
    Usage,
    Verdict,
)

__all__ = [
    "CORRECTNESS_MODES",
    "DEFAULT_CORRECTNESS_MODE",
    "CorrectnessInputs",
    "CorrectnessMode",
    "agreement_precision",
    "assemble",
    "check_correctness_mode",
    "correctness",
    "faithfulness",
    "fbeta",
    "groundedness",
]

CorrectnessMode = Literal["agreement", "precision", "recall", "f1"]
CORRECTNESS_MODES: tuple[CorrectnessMode, ...] = ("agreement", "precision", "recall", "f1")
DEFAULT_CORRECTNESS_MODE: CorrectnessMode = "agreement"
_MODES: frozenset[str] = frozenset(CORRECTNESS_MODES)

# Explanations quote at most this many claims. A quote is never cut here: the content
# policy's redaction hook must see whole texts (a card number cut in half no longer
# matches its pattern), so explanations are cut only as they leave, after redaction
# (``ragpulse.signals.privacy``, and the signals' own caps).
_QUOTED_CLAIMS = 3
_NO_USAGE = Usage()


@dataclass(frozen=True)
class CorrectnessInputs:
    """Which answer claims the reference supports, and which reference claims the answer covers."""

    precision_hits: tuple[bool, ...]
    recall_hits: tuple[bool, ...]
    contradicted: tuple[bool, ...] = ()
    """Per answer claim, True when the reference contradicts it (empty: none known).

    Only ``agreement`` reads it: an answer claim the reference neither supports nor
    contradicts is not addressed and counts neither way.
    """
    conflicts: tuple[str | None, ...] = ()
    """Per answer claim, the reference's span that contradicts it (empty or None: unknown)."""


def faithfulness(claims: Sequence[ClaimVerdict]) -> float | None:
    """(SUPPORTED + INFERRED) / claims; None without claims."""
    if not claims:
        return None
    faithful = sum(1 for c in claims if c.verdict in (Verdict.SUPPORTED, Verdict.INFERRED))
    return faithful / len(claims)


def groundedness(claims: Sequence[ClaimVerdict]) -> float | None:
    """SUPPORTED with verified evidence / claims; None without claims."""
    if not claims:
        return None
    return sum(1 for c in claims if c.grounded) / len(claims)


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


def _quote(text: str) -> str:
    return "'" + " ".join(text.split()) + "'"


def _quoted(claims: Sequence[ClaimVerdict]) -> str:
    shown = ", ".join(_quote(c.claim.text) for c in claims[:_QUOTED_CLAIMS])
    more = len(claims) - _QUOTED_CLAIMS
    return shown + (f" and {more} more" if more > 0 else "")


def _groundedness_explanation(claims: Sequence[ClaimVerdict]) -> str:
    grounded = sum(1 for c in claims if c.grounded)
    text = f"{grounded} of {len(claims)} claims supported by a verified span"
    unverified = [c for c in claims if c.verdict is Verdict.SUPPORTED and c.evidence is None]
    ungrounded = [c for c in claims if not c.grounded]
    if ungrounded:
        text += f"; unsupported: {_quoted(ungrounded)}"
    if unverified:
        text += f" ({len(unverified)} judged supported but the quoted span was not found)"
    return text


def _faithfulness_explanation(claims: Sequence[ClaimVerdict]) -> str:
    counts = Counter(c.verdict for c in claims)
    faithful = counts[Verdict.SUPPORTED] + counts[Verdict.INFERRED]
    text = f"{faithful} of {len(claims)} claims supported or inferred from the contexts"
    contradicted = [c for c in claims if c.verdict is Verdict.CONTRADICTED]
    not_found = [c for c in claims if c.verdict is Verdict.NOT_FOUND]
    if contradicted:
        text += f"; contradicted: {_quoted(contradicted)}"
    if not_found:
        text += f"; not found: {_quoted(not_found)}"
    return text


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
    for index in indices[:_QUOTED_CLAIMS]:
        text = _quote(claims[index].claim.text)
        conflict = conflicts[index] if index < len(conflicts) else None
        shown.append(f"{text} (reference: {_quote(conflict)})" if conflict else text)
    more = len(indices) - _QUOTED_CLAIMS
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
            text += f"; not covered by the reference: {_quoted(silent)}"
    elif aligned:
        extra = [c for c, hit in zip(claims, p_hits, strict=True) if not hit]
        if extra:
            text += f"; not in the reference: {_quoted(extra)}"
    text = f"{_mode_label(mode, beta)}: {text}"
    if len(reference_claims) == len(r_hits):
        missing = [c for c, hit in zip(reference_claims, r_hits, strict=True) if not hit]
        if missing:
            text += f"; missing from the answer: {_quoted(missing)}"
    return text


def assemble(
    claims: Sequence[ClaimVerdict],
    *,
    metrics: Collection[str],
    judge: str,
    annotator_kind: AnnotatorKind,
    usage: Usage = _NO_USAGE,
    duration_ms: float = 0.0,
    correctness_inputs: CorrectnessInputs | None = None,
    reference_claims: Sequence[ClaimVerdict] = (),
    mode: str = DEFAULT_CORRECTNESS_MODE,
    beta: float = 1.0,
) -> Evaluation:
    """The ``Evaluation`` for judged claims: the asked metrics, each with its explanation.

    Without claims every asked metric is ``None`` and the status is ``no_claims``.
    Correctness is present only when asked for and ``correctness_inputs`` is given
    (no reference: absent, never 0).
    """
    correctness_mode = check_correctness_mode(mode)
    wanted = [m for m in (FAITHFULNESS, GROUNDEDNESS, CORRECTNESS) if m in metrics]
    results: dict[str, MetricResult] = {}
    if not claims:
        for name in wanted:
            if name == CORRECTNESS and correctness_inputs is None:
                continue
            results[name] = MetricResult(
                name, None, "the answer has no claims to check", EvalStatus.NO_CLAIMS
            )
        return Evaluation(
            status=EvalStatus.NO_CLAIMS,
            metrics=results,
            judge=judge,
            annotator_kind=annotator_kind,
            usage=usage,
            duration_ms=duration_ms,
            explanation="the answer has no claims to check",
            reference_claims=tuple(reference_claims),
        )
    if FAITHFULNESS in wanted:
        results[FAITHFULNESS] = MetricResult(
            FAITHFULNESS, faithfulness(claims), _faithfulness_explanation(claims)
        )
    if GROUNDEDNESS in wanted:
        results[GROUNDEDNESS] = MetricResult(
            GROUNDEDNESS, groundedness(claims), _groundedness_explanation(claims)
        )
    if CORRECTNESS in wanted and correctness_inputs is not None:
        results[CORRECTNESS] = MetricResult(
            CORRECTNESS,
            correctness(
                correctness_inputs.precision_hits,
                correctness_inputs.recall_hits,
                mode=correctness_mode,
                beta=beta,
                contradicted=correctness_inputs.contradicted,
            ),
            _correctness_explanation(
                correctness_inputs, claims, reference_claims, correctness_mode, beta
            ),
        )
    counts = Counter(c.verdict for c in claims)
    summary = ", ".join(
        f"{counts[v]} {v.value.lower().replace('_', ' ')}" for v in Verdict if counts[v]
    )
    return Evaluation(
        status=EvalStatus.OK,
        metrics=results,
        claims=tuple(claims),
        judge=judge,
        annotator_kind=annotator_kind,
        usage=usage,
        duration_ms=duration_ms,
        explanation=f"{len(claims)} claim{'' if len(claims) == 1 else 's'}: {summary}",
        reference_claims=tuple(reference_claims),
    )
