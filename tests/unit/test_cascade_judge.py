"""``CascadeJudge``: the screen decides where it is sure, the escalation judge elsewhere.

The screens here are judges whose claim verdicts and confidences the test sets, so
each case states exactly what the screen said; the escalation judge counts its calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import errors, semconv
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.findings import Findings
from ragpulse.evaluation.types import (
    FAITHFULNESS,
    AnnotatorKind,
    Claim,
    ClaimVerdict,
    Context,
    Evaluation,
    RagRecord,
    Usage,
    Verdict,
)
from ragpulse.judging.cascade import CascadeJudge
from ragpulse.metrics._assemble import assemble
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler

RECORD = RagRecord("Q?", (Context("Support is open from 9am to 5pm."),), "Support opens at 9am.")


class ScriptedJudge:
    """Answers every record with the claims it was given; counts its calls."""

    def __init__(
        self,
        name: str,
        claims: Sequence[tuple[Verdict, float | None]] = (),
        *,
        kind: AnnotatorKind = "CODE",
        fail: bool = False,
        calls: int = 0,
    ) -> None:
        self.name = name
        self.annotator_kind = kind
        self.claims = claims
        self.fail = fail
        self.usage = Usage(calls=calls, prompt_tokens=100 * calls)
        self.evaluations = 0

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        self.evaluations += 1
        if self.fail:
            return Evaluation.failed(
                errors.CONNECTION_ERROR, judge=self.name, annotator_kind=self.annotator_kind,
                explanation="no route to host", usage=self.usage,
            )  # fmt: skip
        verdicts = [
            ClaimVerdict(Claim(f"claim {i}"), verdict, confidence=confidence)
            for i, (verdict, confidence) in enumerate(self.claims)
        ]
        judged = assemble(
            record, metrics, verdicts, Findings(), judge=self.name,
            annotator_kind=self.annotator_kind,
        )  # fmt: skip
        return replace(judged, usage=self.usage)


def cascade(screen: ScriptedJudge, escalate: ScriptedJudge, **options: Any) -> CascadeJudge:
    return CascadeJudge(screen, escalate, **options)


def run(judge: CascadeJudge) -> Evaluation:
    return asyncio.run(judge.evaluate(RECORD, (FAITHFULNESS,)))


SURE = (Verdict.SUPPORTED, 0.95)
UNSURE = (Verdict.SUPPORTED, 0.6)
LLM_SAYS = [(Verdict.NOT_FOUND, 0.9)]


def test_a_sure_screen_decides_and_the_escalation_judge_is_not_called() -> None:
    screen, llm = ScriptedJudge("lexical", [SURE, SURE]), ScriptedJudge("llm", LLM_SAYS, kind="LLM")
    judged = run(cascade(screen, llm))
    assert (judged.judge, judged.annotator_kind, judged.escalated) == ("lexical", "CODE", False)
    assert judged.score(FAITHFULNESS) == 1.0
    assert llm.evaluations == 0


def test_a_claim_confidence_inside_the_band_hands_the_record_to_the_escalation_judge() -> None:
    screen = ScriptedJudge("lexical", [SURE, UNSURE])
    llm = ScriptedJudge("llm", LLM_SAYS, kind="LLM", calls=1)
    judged = run(cascade(screen, llm))
    assert (judged.judge, judged.annotator_kind, judged.escalated) == ("llm", "LLM", True)
    assert judged.score(FAITHFULNESS) == 0.0
    assert judged.usage == Usage(calls=1, prompt_tokens=100)


@pytest.mark.parametrize(("confidence", "escalated"), [(0.85, True), (0.86, False), (0.3, False)])
def test_the_band_includes_its_ends_and_nothing_outside(confidence: float, escalated: bool) -> None:
    screen = ScriptedJudge("lexical", [(Verdict.SUPPORTED, confidence)])
    judged = run(cascade(screen, ScriptedJudge("llm", LLM_SAYS), band=(0.35, 0.85)))
    assert judged.escalated is escalated


def test_a_claim_without_a_confidence_counts_as_unsure() -> None:
    screen = ScriptedJudge("lexical", [SURE, (Verdict.SUPPORTED, None)])
    assert run(cascade(screen, ScriptedJudge("llm", LLM_SAYS))).judge == "llm"


@pytest.mark.parametrize("verdict", [Verdict.NOT_FOUND, Verdict.CONTRADICTED])
def test_a_flagged_claim_is_escalated_however_sure_the_screen_is(verdict: Verdict) -> None:
    screen = ScriptedJudge("lexical", [SURE, (verdict, 0.99)])
    assert run(cascade(screen, ScriptedJudge("llm", LLM_SAYS))).escalated is True


def test_when_the_escalation_judge_fails_the_screen_decides_and_says_so() -> None:
    screen = ScriptedJudge("lexical", [UNSURE])
    llm = ScriptedJudge("llm", kind="LLM", fail=True, calls=1)
    judged = run(cascade(screen, llm))
    assert judged.status is EvalStatus.OK and judged.judge == "lexical"
    assert judged.escalated is True
    assert judged.explanation is not None
    assert "escalation to llm failed (connection_error: no route to host)" in judged.explanation
    assert judged.usage.calls == 1


def test_a_band_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="band"):
        cascade(ScriptedJudge("a"), ScriptedJudge("b"), band=(0.9, 0.2))


@ragpulse.rag(name="cascaded-bot")
def answer(question: str) -> str:
    ragpulse.record_contexts(["Support is open from 9am to 5pm."])
    return "Support opens at 9am."


@pytest.mark.parametrize(("claims", "decided_by"), [([SURE], "lexical"), ([UNSURE], "llm")])
def test_the_span_and_the_log_events_say_which_judge_decided(
    route_spans: Any, claims: list[tuple[Verdict, float]], decided_by: str
) -> None:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(spans),
        judge=cascade(ScriptedJudge("lexical", claims), ScriptedJudge("llm", LLM_SAYS, kind="LLM")),
        sampler=EvalSampler(rate=1.0),
        logger_provider=logger_provider,
    )
    route_spans(processor)
    answer("When does support open?")
    assert processor.force_flush(20_000)
    [unit] = [s for s in spans.get_finished_spans() if s.name == "cascaded-bot"]
    attributes = unit.attributes or {}
    assert attributes[semconv.EVAL_JUDGE] == decided_by
    assert attributes[semconv.EVAL_CASCADE_ESCALATED] is (decided_by == "llm")
    events = [
        r.log_record
        for r in logs.get_finished_logs()
        if r.log_record.event_name == semconv.GEN_AI_EVALUATION_RESULT_EVENT
    ]
    assert events
    for event in events:
        assert (event.attributes or {})[semconv.EVAL_JUDGE] == decided_by
        assert (event.attributes or {})[semconv.EVAL_CASCADE_ESCALATED] is (decided_by == "llm")
