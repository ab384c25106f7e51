"""A diagnosis on every evaluated request: retrieval's fault or generation's."""

from __future__ import annotations

from ragpulse.evaluation import diagnosis
from ragpulse.evaluation.diagnosis import Facts, decide
from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge

QUESTION = "When did the Larkspur office in Lyon open?"
RIGHT = "The Larkspur office in Lyon opened in March 2019 with twelve engineers."
WRONG = "The cafeteria menu changes every Monday and offers a vegetarian dish."


def _facts(**changes: object) -> Facts:
    values: dict[str, object] = {
        "abstained": False,
        "unsupported": 0,
        "supported": 2,
        "contradicted": 0,
        "claims": 2,
        "held": True,
        "held_by": "the passages speak of every part of the question",
        "has_reference": False,
        "correctness": None,
    }
    values.update(changes)
    return Facts(**values)  # type: ignore[arg-type]


def _judge(contexts: tuple[str, ...], answer: str, reference: str | None = None) -> Evaluation:
    record = RagRecord(QUESTION, tuple(Context(c) for c in contexts), answer, reference=reference)
    return LexicalJudge().evaluate_sync(record, ("faithfulness", "groundedness", "correctness"))


def test_supported_answer_from_good_chunks_is_ok() -> None:
    assert decide(_facts())[0] == diagnosis.OK


def test_unsupported_claims_with_chunks_that_held_the_answer_are_generation_drift() -> None:
    label, reason = decide(_facts(unsupported=1))
    assert label == diagnosis.GENERATION_DRIFT
    assert "1 of 2 claims" in reason


def test_unsupported_claims_with_chunks_that_lack_the_answer_are_a_retrieval_miss() -> None:
    assert decide(_facts(unsupported=2, supported=0, held=False))[0] == diagnosis.RETRIEVAL_MISS


def test_an_answer_that_drew_on_the_chunks_and_added_claims_is_drift() -> None:
    label, reason = decide(_facts(unsupported=1, supported=1, held=False))
    assert label == diagnosis.GENERATION_DRIFT
    assert "gave it material" in reason


def test_a_contradiction_is_generation_drift_whatever_retrieval_found() -> None:
    assert decide(_facts(unsupported=1, contradicted=1, held=False))[0] == (
        diagnosis.GENERATION_DRIFT
    )


def test_abstaining_when_the_chunks_cannot_answer_is_unanswerable_ok() -> None:
    assert decide(_facts(abstained=True, claims=0, held=False))[0] == diagnosis.UNANSWERABLE_OK


def test_abstaining_when_a_reference_exists_but_the_chunks_lack_it_is_a_retrieval_miss() -> None:
    facts = _facts(abstained=True, claims=0, held=False, has_reference=True)
    assert decide(facts)[0] == diagnosis.RETRIEVAL_MISS


def test_abstaining_when_the_chunks_hold_the_answer_is_generation_drift() -> None:
    assert decide(_facts(abstained=True, claims=0))[0] == diagnosis.GENERATION_DRIFT


def test_a_faithful_but_wrong_answer_from_wrong_chunks_is_a_retrieval_miss() -> None:
    assert decide(_facts(held=False, correctness=0.0))[0] == diagnosis.RETRIEVAL_MISS


def test_the_offline_judge_diagnoses_an_invented_answer_over_good_chunks_as_drift() -> None:
    evaluation = _judge((RIGHT,), "The Lyon office opened in June 2021 with forty people.")
    assert evaluation.diagnosis == diagnosis.GENERATION_DRIFT


def test_the_offline_judge_diagnoses_an_answer_from_wrong_chunks_as_a_retrieval_miss() -> None:
    evaluation = _judge((WRONG,), "The Lyon office opened in March 2019.", "It opened in 2019.")
    assert evaluation.diagnosis == diagnosis.RETRIEVAL_MISS
    assert evaluation.diagnosis_reason


def test_the_offline_judge_says_ok_for_a_supported_answer() -> None:
    evaluation = _judge((RIGHT, WRONG), "The Lyon office opened in March 2019.")
    assert evaluation.diagnosis == diagnosis.OK


def test_an_abstention_over_chunks_that_cannot_answer_is_unanswerable_ok() -> None:
    evaluation = _judge((WRONG,), "I don't know; the documents do not say.")
    assert evaluation.diagnosis == diagnosis.UNANSWERABLE_OK


def test_a_failed_evaluation_has_no_diagnosis() -> None:
    failed = Evaluation.failed("timeout", judge="x", annotator_kind="CODE")
    record = RagRecord(QUESTION, (), "x")
    assert diagnosis.diagnose(failed, record).diagnosis is None
    assert failed.status is EvalStatus.ERROR
