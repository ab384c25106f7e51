"""Context recall (Ragas'): the share of the reference's claims the retrieved passages support.

Undefined without a reference: only a known answer says what retrieval should have found.
"""

from __future__ import annotations

from ragpulse.evaluation.findings import REFERENCE_SUPPORT
from ragpulse.evaluation.types import EvalStatus, Evaluation, MetricResult
from ragpulse.metrics._shares import share_explanation, share_result
from ragpulse.metrics._spec import Exported, Metric, ScoreInputs, needs_text

NAME = "context_recall"
_NOUN = "reference claims found in the passages"


def score(inputs: ScoreInputs) -> MetricResult:
    """Reference claims the passages support / reference claims."""
    claims = inputs.found.reference_support
    if not inputs.record.reference or claims is None:
        return MetricResult(NAME, None, "no reference to recall", EvalStatus.NO_CLAIMS)
    if not claims:
        return MetricResult(NAME, None, "the reference has no claims", EvalStatus.NO_CLAIMS)
    return share_result(NAME, claims, _NOUN, "missing from the passages")


def explain(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """The reference claims no passage supports, under the content policy."""
    if result.score is None or not result.explanation:
        return result.explanation
    return share_explanation(exported.reference_support, _NOUN, ex, "reference")


METRIC = Metric(
    name=NAME,
    description="reference claims the retrieved passages support / reference claims",
    needs=("reference", "contexts"),
    findings=(REFERENCE_SUPPORT,),
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
