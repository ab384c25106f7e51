"""Evaluation core: claims, verified evidence, and the metric arithmetic (pure, no I/O)."""

from __future__ import annotations

from ragpulse.evaluation.claims import anchor, split_claims
from ragpulse.evaluation.evidence import locate, verify
from ragpulse.evaluation.metrics import (
    CORRECTNESS_MODES,
    CorrectnessInputs,
    CorrectnessMode,
    assemble,
    correctness,
    faithfulness,
    fbeta,
    groundedness,
)
from ragpulse.evaluation.types import (
    ALL_METRICS,
    CORRECTNESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    RETRYABLE_ERRORS,
    AnnotatorKind,
    Claim,
    ClaimVerdict,
    Context,
    EvalStatus,
    Evaluation,
    Evidence,
    MetricResult,
    RagRecord,
    Usage,
    Verdict,
)

__all__ = [
    "ALL_METRICS",
    "CORRECTNESS",
    "CORRECTNESS_MODES",
    "FAITHFULNESS",
    "GROUNDEDNESS",
    "RETRYABLE_ERRORS",
    "AnnotatorKind",
    "Claim",
    "ClaimVerdict",
    "Context",
    "CorrectnessInputs",
    "CorrectnessMode",
    "EvalStatus",
    "Evaluation",
    "Evidence",
    "MetricResult",
    "RagRecord",
    "Usage",
    "Verdict",
    "anchor",
    "assemble",
    "correctness",
    "faithfulness",
    "fbeta",
    "groundedness",
    "locate",
    "split_claims",
    "verify",
]
