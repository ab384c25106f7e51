"""Context recall (Ragas'): the share of the reference's claims the retrieved passages support.

Undefined without a reference: only a known answer says what retrieval should have found.
"""

from __future__ import annotations

from ragpulse.evaluation.types import EvalStatus, Evaluation, MetricResult
from ragpulse.metrics._spec import Exported, Metric, ScoreInputs, needs_text
from ragpulse.metrics._text import COVERED, names, uncovered

NAME = "context_recall"


def score(inputs: ScoreInputs) -> MetricResult:
    """Reference claims the passages support / reference claims."""
    claims = inputs.found.reference_support
    if not inputs.record.reference or claims is None:
        return MetricResult(NAME, None, "no reference to recall", EvalStatus.NO_CLAIMS)
    if not claims:
        return MetricResult(NAME, None, "the reference has no claims", EvalStatus.NO_CLAIMS)
    missed = [c for c in claims if c.verdict not in COVERED]
    text = f"{len(claims) - len(missed)} of {len(claims)} reference claims found in the passages"
    if missed:
        text += f"; missing from the passages: {names(missed)}"
    return MetricResult(NAME, (len(claims) - len(missed)) / len(claims), text)


def explain(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """The reference claims no passage supports, under the content policy."""
    if result.score is None or not result.explanation:
        return result.explanation
    claims = exported.reference_support
    missed = uncovered(claims)
    head = f"{len(claims) - len(missed)} of {len(claims)} reference claims found in the passages"
    return head + ex.failing(claims, missed, "reference")


METRIC = Metric(
    name=NAME,
    description="reference claims the retrieved passages support / reference claims",
    needs=("reference", "contexts"),
    findings=("reference_support",),
    judges={
        "lexical": "each reference claim aligned to the passages like an answer claim",
        "openai": "the extra call: per reference claim, the passage and a verified quote",
        "nli": "each reference claim against each passage window by the model",
    },
    score=score,
    explain=explain,
    content=("reference_support",),
    missing=needs_text("reference"),
    order=90,
)
