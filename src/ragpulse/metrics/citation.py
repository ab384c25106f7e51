"""Citation: cited claims whose ``[N]`` markers point at a passage that supports them."""

from __future__ import annotations

from ragpulse.evaluation.findings import CITATIONS, CLAIMS
from ragpulse.evaluation.types import CITATION, EvalStatus, Evaluation, MetricResult, RagRecord
from ragpulse.evaluation.vector import citation_markers
from ragpulse.metrics._shares import names
from ragpulse.metrics._spec import Exported, Metric, ScoreInputs


def score(inputs: ScoreInputs) -> MetricResult:
    """Undefined when the answer cites nothing."""
    cited = [c for c in inputs.evaluation.claims if c.cited]
    if not cited:
        return MetricResult(CITATION, None, "the answer cites no passage", EvalStatus.NO_CLAIMS)
    wrong = [c for c in cited if not c.citation_holds]
    text = f"{len(cited) - len(wrong)} of {len(cited)} cited claims supported by the cited passage"
    if wrong:
        text += f"; citation does not hold: {names(wrong)}"
    return MetricResult(CITATION, (len(cited) - len(wrong)) / len(cited), text)


def explain(result: MetricResult, exported: Evaluation, ex: Exported) -> str | None:
    """The claims whose citation does not hold, under the content policy."""
    if result.score is None or not result.explanation:
        return result.explanation
    cited = [i for i, c in enumerate(exported.claims) if c.cited]
    wrong = [i for i in cited if not exported.claims[i].citation_holds]
    head = f"{len(cited) - len(wrong)} of {len(cited)} cited claims supported by the cited passage"
    return head + ex.failing(exported.claims, wrong, "answer")


def missing(record: RagRecord) -> str | None:
    """``[N]`` markers in the answer are needed."""
    return None if citation_markers(record.answer or "") else "no [N] markers in the answer"


METRIC = Metric(
    name=CITATION,
    description="cited claims whose [N] markers point at a passage that supports them",
    needs=("answer", "contexts"),
    findings=(CLAIMS, CITATIONS),
    judges={
        "lexical": "the claim judged against the cited passages alone",
        "openai": "the claim's verified evidence, or a supporter the model names, is cited",
        "nli": "the claim against its cited passages by the model",
    },
    score=score,
    explain=explain,
    missing=missing,
    widens=True,
    order=60,
)
