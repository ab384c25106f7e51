"""Correctness: F-beta of claim precision and recall against the reference (four modes)."""

from __future__ import annotations

from ragpulse.evaluation.types import CORRECTNESS
from ragpulse.metrics._spec import Metric, needs_text

METRIC = Metric(
    name=CORRECTNESS,
    description="F-beta of answer claims the reference supports and reference claims covered",
    needs=("answer", "reference"),
    findings=("claims", "reference_claims"),
    judges={
        "lexical": "answer claims against the reference and back, the question as premise",
        "openai": "the second call: per answer claim and per reference claim",
        "nli": "the model reads both directions",
    },
    threshold=0.5,
    content=("claims", "reference_claims"),
    missing=needs_text("reference"),
    default=True,
    order=30,
)
