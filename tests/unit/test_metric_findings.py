"""Judges find what the asked metrics declare they read, whatever the metrics are called.

A new metric that reads findings the judges already make is its module alone: here
``parts_missed`` (``tests/cases/parts_missed.py``) joins the built-ins as a module would,
and each judge scores it without a line that names it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cases import parts_missed
from tests.models.tiny_onnx import write_nli_model

from ragpulse.evaluation.findings import FINDINGS, QUESTION_PARTS
from ragpulse.evaluation.types import RELEVANCY, Context, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judges.llm._prompts import claims_prompt
from ragpulse.judges.llm._vector_call import vector_claims_prompt
from ragpulse.judges.local.nli import NLIJudge
from ragpulse.metrics import METRICS, get
from ragpulse.metrics._registry import findings_for

MUSEUM = (
    "The museum opens at nine on weekdays. Tickets cost ten euros for adults. "
    "The garden closes at dusk."
)
QUESTION = "What does a ticket cost, and when does the garden close?"
ANSWER = "Tickets cost ten euros for adults."
RECORD = RagRecord(QUESTION, (Context(MUSEUM),), ANSWER)


@pytest.fixture(autouse=True)
def _parts_missed(monkeypatch: pytest.MonkeyPatch) -> None:
    parts_missed.register(monkeypatch)


def test_every_finding_a_built_in_metric_declares_is_one_the_judges_make() -> None:
    for name in METRICS:
        metric = get(name)
        assert metric is not None and set(metric.findings) <= FINDINGS, name


def test_the_findings_of_the_asked_metrics_are_what_their_modules_declare() -> None:
    assert findings_for([parts_missed.NAME]) == {QUESTION_PARTS}
    assert QUESTION_PARTS not in findings_for(["faithfulness", "context_recall"])


def test_the_offline_judge_scores_a_new_metric_from_the_findings_it_declares() -> None:
    evaluation = LexicalJudge().evaluate_sync(RECORD, (parts_missed.NAME,))
    assert evaluation.score(parts_missed.NAME) == 0.5
    assert [p.claim.text for p in evaluation.question_parts] == [
        "What does a ticket cost",
        "when does the garden close?",
    ]
    assert RELEVANCY not in evaluation.metrics


def test_a_local_model_judge_scores_a_new_metric_from_the_findings_it_declares(
    tmp_path: Path,
) -> None:
    judge = NLIJudge(write_nli_model(tmp_path, [MUSEUM, QUESTION, ANSWER], max_length=32))
    evaluation = judge.evaluate_sync(RECORD, (parts_missed.NAME,))
    # The model's evidence is the whole short passage, which speaks of both parts.
    assert len(evaluation.question_parts) == 2
    assert evaluation.score(parts_missed.NAME) == 0.0
    assert judge.evaluate_sync(RECORD, (RELEVANCY,)).score(RELEVANCY) == 1.0


def test_the_llm_judge_asks_its_first_call_for_the_findings_the_new_metric_declares() -> None:
    base = claims_prompt(RECORD, atomicity="high", coverage="high", nonce="n0nce")
    prompt = vector_claims_prompt(base, findings_for([parts_missed.NAME]))
    assert '"question_parts"' in prompt.system
    assert "supported_by" not in prompt.system
    assert vector_claims_prompt(base, findings_for(["faithfulness"])) is base
