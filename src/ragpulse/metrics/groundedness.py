"""Groundedness: SUPPORTED claims with a verified evidence span / claims.

An abstention the contexts could have answered scores 0.0 (``evaluation.vector``).
"""

from __future__ import annotations

from ragpulse.evaluation.types import GROUNDEDNESS
from ragpulse.metrics._spec import Metric

METRIC = Metric(
    name=GROUNDEDNESS,
    description="answer claims a verified span of a context states / answer claims",
    needs=("answer", "contexts"),
    findings=("claims", "answerability"),
    judges={
        "lexical": "SUPPORTED when one window holds the claim's words, numbers and names",
        "openai": "SUPPORTED only with a quote verified in the named context",
        "nli": "entailment by the model with the window as evidence",
    },
    default=True,
    order=20,
)
