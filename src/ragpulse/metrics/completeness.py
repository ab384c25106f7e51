"""Completeness: required points the answer covers / required points.

The points come from the rubric, else from the reference's claims (the recall side of
correctness); with neither the score is undefined.
"""

from __future__ import annotations

from ragpulse.evaluation.findings import REQUIRED_POINTS
from ragpulse.evaluation.types import (
    COMPLETENESS,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
)
from ragpulse.metrics._shares import names, share_explanation, share_result
from ragpulse.metrics._spec import Exported, Metric, ScoreInputs


def score(inputs: ScoreInputs) -> MetricResult:
    """From the rubric's points when the record has a rubric, else the reference's claims."""
    found = inputs.found
    if inputs.record.rubric and found.required_points:
        return share_result(
            COMPLETENESS, found.required_points, "required points covered", "missing"
        )
    hits = found.recall_hits
    if hits:
        covered = sum(1 for h in hits if h)
        text = f"{covered} of {len(hits)} reference claims covered (no rubric)"
        if len(found.reference_claims) == len(hits):
            missed = [c for c, h in zip(found.reference_claims, hits, strict=True) if not h]
            if missed:
                text += f"; missing: {names(missed)}"
        return MetricResult(COMPLETENESS, covered / len(hits), text)
    return MetricResult(
        COMPLETENESS, None, "no rubric or reference to check against", EvalStatus.NO_CLAIMS
    )


def explain(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """The missing points (or reference claims), quoted under the content policy."""
    if result.score is None or not result.explanation:
        return result.explanation
    if exported.required_points:
        return share_explanation(exported.required_points, "required points covered", ex, "rubric")
    noun = "reference claims covered (no rubric)"
    return share_explanation(exported.reference_claims, noun, ex, "reference")


def missing(record: RagRecord) -> str | None:
    """A rubric or a reference is needed."""
    if record.rubric or (record.reference and record.reference.strip()):
        return None
    return "no rubric or reference"


METRIC = Metric(
    name=COMPLETENESS,
    description="required points the answer covers: the rubric's, else the reference's claims",
    needs=("answer", "rubric|reference"),
    findings=(REQUIRED_POINTS,),
    judges={
        "lexical": "each point judged against the answer as a claim against a passage",
        "openai": "the second call checks the rubric's points (or is the rubric's own call)",
        "nli": "each point against the answer by the model",
    },
    score=score,
    explain=explain,
    content=("required_points", "reference_claims"),
    missing=missing,
    widens=True,
    order=50,
)
