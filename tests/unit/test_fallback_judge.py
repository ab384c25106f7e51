"""FallbackJudge: the fallback answers when the primary errs, and the result says who answered.

``FallbackJudge`` is ``ResilientJudge`` with a fallback; these tests make one attempt
of the primary (``NO_RETRY``) to look at the fallback alone.
"""

from __future__ import annotations

from collections.abc import Collection

from ragpulse.evaluation.types import (
    FAITHFULNESS,
    AnnotatorKind,
    Context,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Usage,
)
from ragpulse.judges.base import Judge
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging.fallback import FallbackJudge
from ragpulse.judging.resilient import NO_RETRY, ResilientJudge
from ragpulse.metrics import ALL_METRICS

RECORD = RagRecord(
    question="How tall is the tower?",
    contexts=(Context("The tower is 330 metres tall."),),
    answer="The tower is 330 metres tall.",
)


class FixedJudge:
    """A judge that always returns the same evaluation, and counts how often it was asked."""

    def __init__(self, name: str, kind: AnnotatorKind, result: Evaluation) -> None:
        self.name = name
        self.annotator_kind: AnnotatorKind = kind
        self.result = result
        self.calls = 0

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        self.calls += 1
        return self.result


class RaisingJudge:
    """A third-party judge that breaks the never-raise contract."""

    name = "raising"
    annotator_kind: AnnotatorKind = "LLM"

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        raise RuntimeError("model server exploded")


def ok(judge: str, kind: AnnotatorKind, score: float, calls: int = 1) -> Evaluation:
    return Evaluation(
        status=EvalStatus.OK,
        metrics={FAITHFULNESS: MetricResult(FAITHFULNESS, score)},
        judge=judge,
        annotator_kind=kind,
        usage=Usage(calls=calls, prompt_tokens=100 * calls),
        duration_ms=5.0,
        explanation="1 claim: 1 supported",
    )


def failed(judge: str, error_type: str, retry_after: float | None = None) -> Evaluation:
    return Evaluation.failed(
        error_type,
        judge=judge,
        annotator_kind="LLM",
        explanation="HTTP 429",
        usage=Usage(calls=1, prompt_tokens=200),
        duration_ms=20.0,
        retry_after=retry_after,
    )


async def test_primary_result_is_returned_when_it_succeeds() -> None:
    primary = FixedJudge("llm", "LLM", ok("llm", "LLM", 0.9))
    fallback = FixedJudge("lexical", "CODE", ok("lexical", "CODE", 0.5))
    evaluation = await FallbackJudge(primary, fallback, retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation is primary.result
    assert fallback.calls == 0


async def test_no_claims_from_the_primary_is_an_answer_not_a_failure() -> None:
    no_claims = Evaluation(
        status=EvalStatus.NO_CLAIMS, metrics={}, judge="llm", annotator_kind="LLM"
    )
    primary = FixedJudge("llm", "LLM", no_claims)
    fallback = FixedJudge("lexical", "CODE", ok("lexical", "CODE", 0.5))
    evaluation = await FallbackJudge(primary, fallback, retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation.status is EvalStatus.NO_CLAIMS
    assert fallback.calls == 0


async def test_fallback_answers_when_the_primary_errs() -> None:
    primary = FixedJudge("llm", "LLM", failed("llm", "rate_limited", retry_after=3.0))
    fallback = FixedJudge("lexical", "CODE", ok("lexical", "CODE", 0.5))
    evaluation = await FallbackJudge(primary, fallback, retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation.status is EvalStatus.OK
    assert evaluation.score(FAITHFULNESS) == 0.5
    assert (evaluation.judge, evaluation.annotator_kind) == ("lexical", "CODE")


async def test_fallback_result_explains_why_it_fell_back() -> None:
    primary = FixedJudge("llm", "LLM", failed("llm", "rate_limited"))
    fallback = FixedJudge("lexical", "CODE", ok("lexical", "CODE", 0.5))
    evaluation = await FallbackJudge(primary, fallback, retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation.explanation is not None
    assert evaluation.explanation.startswith("fell back to lexical: llm failed (rate_limited)")
    # The fallback's own explanation is kept after the reason.
    assert "1 claim: 1 supported" in evaluation.explanation


async def test_fallback_result_counts_what_both_judges_spent() -> None:
    primary = FixedJudge("llm", "LLM", failed("llm", "timeout"))
    fallback = FixedJudge("lexical", "CODE", ok("lexical", "CODE", 0.5, calls=0))
    evaluation = await FallbackJudge(primary, fallback, retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation.usage == Usage(calls=1, prompt_tokens=200)
    assert evaluation.duration_ms == 25.0


async def test_when_both_fail_the_primarys_failure_is_reported_with_its_retry_after() -> None:
    primary = FixedJudge("llm", "LLM", failed("llm", "rate_limited", retry_after=7.0))
    fallback = FixedJudge("other-llm", "LLM", failed("other-llm", "server_error"))
    evaluation = await FallbackJudge(primary, fallback, retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation.status is EvalStatus.ERROR
    assert (evaluation.error_type, evaluation.retry_after) == ("rate_limited", 7.0)
    assert evaluation.judge == "llm"
    assert evaluation.explanation is not None
    assert "other-llm failed too (server_error)" in evaluation.explanation
    assert evaluation.usage.calls == 2


async def test_a_raising_primary_is_an_error_named_after_its_exception() -> None:
    fallback = FixedJudge("lexical", "CODE", ok("lexical", "CODE", 0.5))
    evaluation = await FallbackJudge(RaisingJudge(), fallback, retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation.judge == "lexical"
    assert evaluation.explanation is not None
    assert "raising failed (RuntimeError): model server exploded" in (evaluation.explanation)


async def test_a_raising_fallback_never_raises_to_the_caller() -> None:
    primary = FixedJudge("llm", "LLM", failed("llm", "server_error"))
    evaluation = await FallbackJudge(primary, RaisingJudge(), retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation.status is EvalStatus.ERROR
    assert evaluation.error_type == "server_error"


async def test_primary_and_fallback_are_public() -> None:
    primary = FixedJudge("llm", "LLM", ok("llm", "LLM", 0.9))
    lexical = LexicalJudge()
    judge = FallbackJudge(primary, lexical)
    assert judge.primary is primary
    assert judge.fallback is lexical
    evaluation = await judge.fallback.evaluate(RECORD, ALL_METRICS)
    assert evaluation.annotator_kind == "CODE"


async def test_fallback_judge_is_itself_a_judge() -> None:
    judge = FallbackJudge(FixedJudge("llm", "LLM", ok("llm", "LLM", 0.9)), LexicalJudge())
    assert isinstance(judge, Judge)
    assert judge.name == "llm|lexical"
    assert judge.annotator_kind == "LLM"
    assert FallbackJudge(judge.primary, judge.fallback, name="guarded").name == "guarded"
    assert isinstance(judge, ResilientJudge)


async def test_lexical_fallback_scores_the_record_itself() -> None:
    primary = FixedJudge("llm", "LLM", failed("llm", "server_error"))
    evaluation = await FallbackJudge(primary, LexicalJudge(), retry=NO_RETRY).evaluate(
        RECORD, ALL_METRICS
    )
    assert evaluation.status is EvalStatus.OK
    assert evaluation.score(FAITHFULNESS) == 1.0
