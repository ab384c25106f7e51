"""Relevancy: question parts the answer addresses / question parts."""

from __future__ import annotations

from ragpulse.evaluation.findings import ABSTENTION, QUESTION_PARTS
from ragpulse.evaluation.types import RELEVANCY, EvalStatus, Evaluation, MetricResult
from ragpulse.metrics._shares import share_explanation, share_result
from ragpulse.metrics._spec import Exported, Metric, ScoreInputs, needs_text


def score(inputs: ScoreInputs) -> MetricResult:
    """Undefined without a question or when the answer abstains."""
    parts = inputs.found.question_parts
    if inputs.evaluation.abstained:
        return MetricResult(
            RELEVANCY, None, "the answer abstains: it addresses no part", EvalStatus.NO_CLAIMS
        )
    if not parts:
        return MetricResult(RELEVANCY, None, "no question to address", EvalStatus.NO_CLAIMS)
    return share_result(RELEVANCY, parts, "question parts addressed", "not addressed")


def explain(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """The parts not addressed, quoted under the content policy."""
    if result.score is None or not result.explanation:
        return result.explanation
    return share_explanation(exported.question_parts, "question parts addressed", ex, "question")


METRIC = Metric(
    name=RELEVANCY,
    description="question parts the answer addresses / question parts",
    needs=("question", "answer"),
    findings=(QUESTION_PARTS, ABSTENTION),
    judges={
        "lexical": "half of a part's content words in the answer's claims or their evidence",
        "openai": "the first call splits the question and says which parts are addressed",
        "nli": "the offline judge's word overlap",
    },
    score=score,
    explain=explain,
    content=("question_parts",),
    missing=needs_text("question"),
    widens=True,
    order=40,
)
