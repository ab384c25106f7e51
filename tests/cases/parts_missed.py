"""A metric written as a new module would be, to show that judges find what it declares.

``parts_missed``: the share of the question's parts the answer leaves out. It reads one
finding the judges already make (``question_parts``) and names no judge; ``register``
puts it among the built-ins, as listing a new module of ``ragpulse.metrics`` would.
"""

from __future__ import annotations

import pytest

from ragpulse.evaluation.findings import QUESTION_PARTS
from ragpulse.evaluation.types import EvalStatus, MetricResult, Verdict
from ragpulse.metrics import _registry
from ragpulse.metrics._spec import Metric, ScoreInputs

NAME = "parts_missed"


def score(inputs: ScoreInputs) -> MetricResult:
    """Question parts not addressed / question parts; undefined without parts."""
    parts = inputs.found.question_parts
    if not parts:
        return MetricResult(NAME, None, "no question parts", EvalStatus.NO_CLAIMS)
    missed = [p for p in parts if p.verdict is not Verdict.SUPPORTED]
    return MetricResult(NAME, len(missed) / len(parts), f"{len(missed)} of {len(parts)} missed")


METRIC = Metric(
    name=NAME,
    description="question parts the answer leaves out / question parts",
    needs=("question", "answer"),
    findings=(QUESTION_PARTS,),
    score=score,
    content=(),
    threshold=None,
    order=45,
)


def register(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``parts_missed`` a built-in metric for the test's duration."""
    monkeypatch.setitem(_registry._discover(), NAME, METRIC)
