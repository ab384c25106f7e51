"""Metric arithmetic: faithfulness, groundedness and correctness from claim verdicts.

Pure functions. An undefined score is ``None`` (no claims, no reference), never
1.0 and never 0.0, so averages can skip it instead of being skewed by it.
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
    "CorrectnessInputs",
    "CorrectnessMode",
    "assemble",
    "correctness",
    "faithfulness",
    "fbeta",
    "groundedness",
]

CorrectnessMode = Literal["precision", "recall", "f1"]
_MODES: frozenset[str] = frozenset({"precision", "recall", "f1"})

# Explanations quote at most this many claims, each cut to this many characters,
# because they end up in span attributes.
_QUOTED_CLAIMS = 3
_QUOTE_CHARS = 80
_NO_USAGE = Usage()


@dataclass(frozen=True)
class CorrectnessInputs:
    """Which answer claims the reference supports, and which reference claims the answer covers."""

    precision_hits: tuple[bool, ...]
    recall_hits: tuple[bool, ...]


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


def correctness(
    precision_hits: Sequence[bool],
    recall_hits: Sequence[bool],
    *,
    mode: CorrectnessMode = "f1",
    beta: float = 1.0,
) -> float | None:
    """Claim precision, recall or their F-beta; None when the needed side has no claims."""
    if mode not in _MODES:
        raise ValueError(f"unknown correctness mode {mode!r}; expected one of {sorted(_MODES)}")
    precision = _share(precision_hits)
    recall = _share(recall_hits)
    if mode == "precision":
        return precision
    if mode == "recall":
        return recall
    return fbeta(precision, recall, beta)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _QUOTE_CHARS:
        text = text[: _QUOTE_CHARS - 1] + "…"
    return f"'{text}'"


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
    if precision is not None:
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
    label = "f1" if mode == "f1" and beta == 1.0 else f"f{beta:g}" if mode == "f1" else mode
    text = f"{label}: {text}"
    if len(claims) == len(p_hits):
        extra = [c for c, hit in zip(claims, p_hits, strict=True) if not hit]
        if extra:
            text += f"; not in the reference: {_quoted(extra)}"
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
    mode: str = "f1",
    beta: float = 1.0,
) -> Evaluation:
    """The ``Evaluation`` for judged claims: the asked metrics, each with its explanation.

    Without claims every asked metric is ``None`` and the status is ``no_claims``.
    Correctness is present only when asked for and ``correctness_inputs`` is given
    (no reference: absent, never 0).
    """
    if mode not in _MODES:
        raise ValueError(f"unknown correctness mode {mode!r}; expected one of {sorted(_MODES)}")
    correctness_mode = cast(CorrectnessMode, mode)
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
        explanation=f"{len(claims)} claims: {summary}",
        reference_claims=tuple(reference_claims),
    )
