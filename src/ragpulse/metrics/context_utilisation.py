"""Context utilisation: which retrieved passages the answer used, and what share of them.

A passage is used when a SUPPORTED or INFERRED claim's evidence lies in it, or a claim's
``[N]`` citation of it holds. Judge-independent: read from the claims' verified evidence.
"""

from __future__ import annotations

from ragpulse.evaluation.findings import CLAIMS
from ragpulse.evaluation.types import EvalStatus, MetricResult
from ragpulse.metrics._contexts import contexts_attribute, listed
from ragpulse.metrics._spec import Metric, ScoreInputs, needs_text

NAME = "context_utilisation"


def score(inputs: ScoreInputs) -> MetricResult:
    """Used passages / passages; undefined without passages or without answer claims."""
    judged = inputs.found.contexts
    if not judged:
        return MetricResult(NAME, None, "no passages", EvalStatus.NO_CLAIMS)
    if not inputs.evaluation.claims:
        return MetricResult(NAME, None, "the answer has no claims to draw on passages",
                            EvalStatus.NO_CLAIMS)  # fmt: skip
    used = [c for c in judged if c.used]
    text = f"the answer draws on {len(used)} of {len(judged)} passages" + listed(used, "used")
    return MetricResult(NAME, len(used) / len(judged), text)


METRIC = Metric(
    name=NAME,
    description="retrieved passages the answer's supported claims draw on / passages",
    needs=("answer", "contexts"),
    findings=(CLAIMS,),
    judges={
        "lexical": "the passages of the claims' verified evidence",
        "openai": "the passages of the claims' verified quotes",
        "nli": "the passages of the windows that entail a claim",
    },
    score=score,
    content=(),
    span_attributes=contexts_attribute,
    missing=needs_text("contexts"),
    threshold=None,
    order=100,
)
