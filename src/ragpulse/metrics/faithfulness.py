"""Faithfulness: (SUPPORTED + INFERRED) / claims; strict mode counts INFERRED as unfaithful."""

from __future__ import annotations

from ragpulse.evaluation.types import FAITHFULNESS
from ragpulse.metrics._spec import Metric

METRIC = Metric(
    name=FAITHFULNESS,
    description="answer claims the contexts state or imply / answer claims",
    needs=("answer", "contexts"),
    findings=("claims",),
    judges={
        "lexical": "each sentence or clause aligned to its best passage window",
        "openai": "the first call: claims, verdicts and verified quotes",
        "nli": "each claim against each passage window by the model",
    },
    default=True,
    order=10,
)
