"""Context precision (Ragas'): are the passages that help ranked above those that do not?

The average precision over the ranked passages: with v_k = 1 when passage k helps
(it supports a reference claim; without a reference, its relevance to the question is
at least one half), the score is sum_k(precision@k * v_k) / sum_k(v_k); 0.0 when no
passage helps.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragpulse.evaluation.findings import CONTEXT_RELEVANCE, PASSAGE_HELP, REFERENCE_SUPPORT
from ragpulse.evaluation.types import EvalStatus, MetricResult
from ragpulse.metrics._contexts import contexts_attribute, listed
from ragpulse.metrics._spec import Metric, ScoreInputs, needs_text

NAME = "context_precision"


def average_precision(relevant: Sequence[bool]) -> float | None:
    """Ragas' context precision of the flags in rank order; None without passages."""
    if not relevant:
        return None
    hits, total = 0, 0.0
    for rank, flag in enumerate(relevant, start=1):
        if flag:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


def score(inputs: ScoreInputs) -> MetricResult:
    """Undefined without passages, or when no passage could be judged."""
    judged = [c for c in inputs.found.contexts if c.relevant is not None]
    if not judged:
        return MetricResult(NAME, None, "no passages judged", EvalStatus.NO_CLAIMS)
    ranked = sorted(judged, key=lambda c: c.index)
    value = average_precision([bool(c.relevant) for c in ranked])
    helping = [c for c in ranked if c.relevant]
    basis = "supports the reference" if inputs.record.reference else "is relevant to the question"
    text = f"{len(helping)} of {len(ranked)} passages help (a passage helps when it {basis})"
    late = [c for c in helping if c.index >= len(helping)]
    text += listed(late, "helpful passages ranked below unhelpful ones")
    return MetricResult(NAME, value, text)


METRIC = Metric(
    name=NAME,
    description="average precision of the helpful passages over the retrieval ranking",
    needs=("contexts", "question|reference"),
    findings=(CONTEXT_RELEVANCE, REFERENCE_SUPPORT, PASSAGE_HELP),
    judges={
        "lexical": "a passage helps when it alone supports a reference claim, else by relevance",
        "openai": "the extra call says per passage whether it helps",
        "nli": "the model: a passage helps when it entails a reference claim",
    },
    score=score,
    content=(),
    span_attributes=contexts_attribute,
    missing=needs_text("contexts"),
    order=80,
)
