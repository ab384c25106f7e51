"""Evaluation core: the plain types, claims, verified evidence, findings and the diagnosis.

Pure, no I/O, and below the metrics: ``ragpulse.metrics`` scores what is found here.
"""

from __future__ import annotations

from ragpulse.evaluation.claims import anchor, split_claims
from ragpulse.evaluation.evidence import locate, verify
from ragpulse.evaluation.findings import CorrectnessInputs, Findings
from ragpulse.evaluation.types import (
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
    "CORRECTNESS",
    "FAITHFULNESS",
    "GROUNDEDNESS",
    "RETRYABLE_ERRORS",
    "AnnotatorKind",
    "Claim",
    "ClaimVerdict",
    "Context",
    "CorrectnessInputs",
    "EvalStatus",
    "Evaluation",
    "Evidence",
    "Findings",
    "MetricResult",
    "RagRecord",
    "Usage",
    "Verdict",
    "anchor",
    "locate",
    "split_claims",
    "verify",
]
