"""A cascade hands what its screen found contradicting to a local escalation judge.

The escalation judge is the tiny NLI model (``tests/models/tiny_onnx.py``): it entails a
claim whose every word is in the premise and contradicts it when the premise holds the
word "denied". The passage states the claim near its start and says "denied" only at its
far end, where BM25 never looks for this claim: the escalation judge says CONTRADICTED
only when the screen's contradicting sentence reached it, across its process boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path

import pytest
from tests.models.tiny_onnx import write_nli_model

from ragpulse.evaluation.findings import Findings
from ragpulse.evaluation.types import (
    FAITHFULNESS,
    AnnotatorKind,
    Claim,
    ClaimVerdict,
    Context,
    Evaluation,
    Evidence,
    RagRecord,
    Verdict,
)
from ragpulse.judges.base import Contradiction, contradictions_in
from ragpulse.judges.local.nli import NLIJudge
from ragpulse.judging.cascade import CascadeJudge
from ragpulse.judging.process import ProcessJudge
from ragpulse.metrics._assemble import assemble

FILLER = " ".join(f"Room {n} shows old maps of the valley." for n in range(2, 30))
DENIED = "Officials denied it."
PASSAGE = "The cafe has a permit for music. " + FILLER + " " + DENIED
ANSWER = "The cafe has a permit."
AT = PASSAGE.index(DENIED)


class Screen:
    """A screen that found ``ANSWER``'s claim contradicted by ``DENIED`` (or, with
    ``evidence=False``, flagged it without saying where)."""

    annotator_kind: AnnotatorKind = "CODE"

    def __init__(self, *, evidence: bool = True) -> None:
        self.name = "screen"
        self.evidence = evidence

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        found = Evidence(0, AT, AT + len(DENIED), DENIED) if self.evidence else None
        verdict = ClaimVerdict(
            Claim(ANSWER, 0, len(ANSWER)), Verdict.CONTRADICTED, found, confidence=0.9
        )
        return assemble(
            record, metrics, [verdict], Findings(), judge=self.name, annotator_kind="CODE"
        )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nli_model(tmp_path_factory.mktemp("nli"), [PASSAGE, ANSWER], max_length=256)


def judged(model_dir: Path, screen: Screen) -> Evaluation:
    record = RagRecord(None, (Context(PASSAGE),), ANSWER)
    cascade = CascadeJudge(screen, NLIJudge(model_dir))
    try:
        # The escalation judge runs in its own process: what it reads crossed the pipe.
        assert isinstance(cascade._run_escalate, ProcessJudge)
        return asyncio.run(cascade.evaluate(record, (FAITHFULNESS,)))
    finally:
        cascade.close()


def test_the_screens_contradicting_sentence_reaches_the_escalation_judge_in_its_process(
    model_dir: Path,
) -> None:
    evaluation = judged(model_dir, Screen())
    assert (evaluation.judge, evaluation.escalated) == ("nli", True)
    [claim] = evaluation.claims
    # "denied" is in no sentence the judge selects for this claim (the next test).
    assert claim.verdict is Verdict.CONTRADICTED
    assert claim.evidence is not None and claim.evidence.text == DENIED


def test_without_a_contradicting_sentence_the_escalation_judge_reads_what_it_selects(
    model_dir: Path,
) -> None:
    [claim] = judged(model_dir, Screen(evidence=False)).claims
    assert claim.verdict is Verdict.SUPPORTED
    assert claim.evidence is not None and claim.evidence.text.startswith("The cafe has a permit")


def test_a_contradiction_names_the_claims_answer_range_and_the_passage_range() -> None:
    screened = asyncio.run(
        Screen().evaluate(RagRecord(None, (Context(PASSAGE),), ANSWER), (FAITHFULNESS,))
    )
    assert contradictions_in(screened) == (Contradiction(0, len(ANSWER), 0, AT, AT + len(DENIED)),)
