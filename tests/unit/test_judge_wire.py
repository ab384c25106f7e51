"""The judge-process boundary: records and evaluations cross as tuples of builtins.

A record arrives whole (passages with and without ids, attributes, rubric); an
evaluation comes back whole when it has no claims, or as its signals (made under the
content policy) and a thin evaluation when it has. Whatever is not a message of the
kind expected is a ``WireError``, which ``ProcessJudge`` records as an ``error``
evaluation.
"""

from __future__ import annotations

import pickle

import pytest

from ragpulse import errors, semconv
from ragpulse.evaluation.types import (
    FAITHFULNESS,
    GROUNDEDNESS,
    Claim,
    ClaimVerdict,
    Context,
    Contexts,
    EvalStatus,
    Evaluation,
    Evidence,
    MetricResult,
    RagRecord,
    Usage,
    Verdict,
)
from ragpulse.judges.base import Contradiction
from ragpulse.judging._wire import (
    RICH,
    WireError,
    decode_evaluation,
    decode_record,
    encode_evaluation,
    encode_record,
    is_thin,
)
from ragpulse.signals.emit import EmitOptions
from ragpulse.signals.make import PreparedEvaluation, make_signals

PASSAGE = "Support is open from 9am to 5pm on weekdays."


def record() -> RagRecord:
    return RagRecord(
        question="When is support open?",
        contexts=Contexts([PASSAGE, Context("The L2 router costs $129.", id="doc-2", score=0.5)]),
        answer="Support is open from 9am to 5pm.",
        reference="From 9 to 5.",
        name="support-bot",
        attributes={"force": True, semconv.ATTR_SERVICE_NAME: "shop"},
        rubric=("hours",),
    )


def judged() -> Evaluation:
    claim = Claim("Support is open from 9am to 5pm.", 0, 32)
    verdict = ClaimVerdict(claim, Verdict.SUPPORTED, Evidence(0, 0, 32, PASSAGE[:32]), quote="q")
    return Evaluation(
        status=EvalStatus.OK,
        metrics={
            FAITHFULNESS: MetricResult(FAITHFULNESS, 1.0, "all supported"),
            GROUNDEDNESS: MetricResult(GROUNDEDNESS, 1.0, "all grounded"),
        },
        claims=(verdict,),
        judge="lexical",
        usage=Usage(1, 10, 5),
        duration_ms=3.5,
        abstained=False,
        slices={"sources": "one"},
    )


def crossed(message: object) -> object:
    """What the other side of the pipe receives."""
    return pickle.loads(pickle.dumps(message))


def test_record_crosses_with_its_passages_ids_scores_attributes_and_rubric() -> None:
    sent = record()
    got, metrics, signals, contradicting = decode_record(
        crossed(encode_record(sent, (FAITHFULNESS,), signals=True))  # type: ignore[arg-type]
    )
    assert list(got.contexts) == list(sent.contexts)
    assert (got.question, got.answer, got.reference, got.name, got.rubric) == (
        sent.question,
        sent.answer,
        sent.reference,
        sent.name,
        sent.rubric,
    )
    assert got.attributes == sent.attributes
    assert (metrics, signals, contradicting) == ((FAITHFULNESS,), True, ())


def test_what_an_earlier_judge_found_contradicting_crosses_as_offsets() -> None:
    found = (Contradiction(0, 21, 0, 0, 32), Contradiction(22, 40, 1, 5, 9))
    message = encode_record(record(), (FAITHFULNESS,), signals=False, contradicting=found)
    assert PASSAGE[:32] not in repr(message[-1])  # offsets only, no text
    _, _, _, got = decode_record(crossed(message))  # type: ignore[arg-type]
    assert got == found


@pytest.mark.parametrize("bad", [((0, 1, 2),), ((0, 1, 2, 3, "4"),), ((0, 1, 2, 3, -1),), (5,)])
def test_a_contradiction_that_is_not_five_offsets_is_a_wire_error(bad: object) -> None:
    message = encode_record(record(), (), signals=False)
    with pytest.raises(WireError, match="five offsets"):
        decode_record((*message[:-1], bad))


def test_record_of_plain_context_objects_crosses_too() -> None:
    sent = RagRecord(question=None, contexts=(Context(PASSAGE),), answer="yes")
    got, _, _, _ = decode_record(crossed(encode_record(sent, (), signals=False)))  # type: ignore[arg-type]
    assert list(got.contexts) == [Context(PASSAGE)]


def test_evaluation_without_claims_crosses_whole() -> None:
    sent = Evaluation.failed(
        errors.TIMEOUT, judge="lexical", annotator_kind="CODE", explanation="x"
    )
    assert is_thin(sent)
    assert decode_evaluation(crossed(encode_evaluation(sent))) == sent


def test_evaluation_with_claims_crosses_as_its_signals_and_scores() -> None:
    exported, signals = make_signals(
        judged(), name="support-bot", service="shop", options=EmitOptions(), spec=7
    )
    got = decode_evaluation(crossed(encode_evaluation(exported, signals)))
    assert isinstance(got, PreparedEvaluation)
    assert signals.labels  # the pass/fail label points cross too
    assert got.signals == signals
    assert got.claims == ()
    assert got.score(GROUNDEDNESS) == 1.0
    assert (got.status, got.usage, got.duration_ms, got.slices) == (
        exported.status,
        exported.usage,
        exported.duration_ms,
        exported.slices,
    )


def test_rich_evaluation_crosses_as_it_is() -> None:
    assert decode_evaluation(crossed((RICH, judged()))) == judged()


@pytest.mark.parametrize(
    "message",
    [
        None,
        (),
        ("thin",),
        ("thin", ("ok",), None),
        ("rich", "not an evaluation"),
        ("unknown", (), None),
        ("thin", ("no such status", (), "j", "CODE", (0, 0, 0), 1.0, *[None] * 6, {}, None), None),
    ],
)
def test_answer_that_is_not_an_evaluation_is_a_wire_error(message: object) -> None:
    with pytest.raises(WireError):
        decode_evaluation(message)


@pytest.mark.parametrize(
    "message",
    [
        ("evaluate",),
        ("other", None, (), "a", None, None, {}, (), (), False),
        ("evaluate", None, (42,), "a", None, None, {}, (), (), False),
        ("evaluate", None, (), "a", None, None, [], (), (), False),
    ],
)
def test_record_that_is_not_a_record_is_a_wire_error(message: tuple[object, ...]) -> None:
    with pytest.raises(WireError):
        decode_record(message)


def test_the_diagnosis_crosses_with_the_evaluation() -> None:
    from dataclasses import replace

    diagnosed = replace(judged(), diagnosis="generation_drift", diagnosis_reason="1 of 2 claims")
    exported, signals = make_signals(
        diagnosed, name="support-bot", service="shop", options=EmitOptions(), spec=7
    )
    got = decode_evaluation(crossed(encode_evaluation(exported, signals)))
    assert (got.diagnosis, got.diagnosis_reason) == ("generation_drift", "1 of 2 claims")
    assert signals.span["ragpulse.eval.diagnosis"] == "generation_drift"
