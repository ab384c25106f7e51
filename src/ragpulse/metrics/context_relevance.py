"""Context relevance (the RAG triad's): how relevant each retrieved passage is to the question.

Each passage gets a relevance in [0, 1], written per passage in ``ragpulse.eval.contexts``;
the unit's score is their mean.
"""

from __future__ import annotations

from ragpulse.evaluation.findings import CONTEXT_RELEVANCE
from ragpulse.evaluation.types import EvalStatus, MetricResult
from ragpulse.metrics._contexts import contexts_attribute, listed
from ragpulse.metrics._spec import Metric, ScoreInputs, needs_text

NAME = "context_relevance"


def score(inputs: ScoreInputs) -> MetricResult:
    """Mean relevance of the passages; undefined without a question or passages."""
    rated = [c for c in inputs.found.contexts if c.relevance is not None]
    if not rated:
        why = "no question to rate the passages by" if inputs.record.contexts else "no passages"
        return MetricResult(NAME, None, why, EvalStatus.NO_CLAIMS)
    mean = sum(c.relevance or 0.0 for c in rated) / len(rated)
    weakest = sorted(
        (c for c in rated if (c.relevance or 0.0) < 0.5), key=lambda c: c.relevance or 0.0
    )
    text = f"mean relevance {mean:.2f} over {len(rated)} passages" + listed(
        weakest, "least relevant"
    )
    return MetricResult(NAME, mean, text)


METRIC = Metric(
    name=NAME,
    description="mean relevance of the retrieved passages to the question (per passage too)",
    needs=("question", "contexts"),
    findings=(CONTEXT_RELEVANCE,),
    judges={
        "lexical": "share of the question's content words the passage holds (best part)",
        "openai": "one extra call rates every passage 0-1 (shared by the context metrics)",
        "nli": "the offline judge's word overlap",
    },
    score=score,
    content=(),
    span_attributes=contexts_attribute,
    missing=needs_text("question", "contexts"),
    order=70,
    # No pass/fail: top-k retrieval holds passages of little relevance by design, so a mean
    # over them says how focused retrieval is, not whether it failed (the diagnosis does).
    threshold=None,
)
