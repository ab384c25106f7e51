"""ResilientJudge: retries, the circuit breaker, the fallback and the token budget, as a judge.

The judges here are small plug-in judges of the kind a user writes, each scripted to
behave one way. These behaviours lived in the worker before; they hold the same now
that any caller of ``evaluate`` (the worker, ``ragpulse eval``, ``ragpulse serve``)
gets them.
"""

from __future__ import annotations

import asyncio

import pytest

from ragpulse import errors
from ragpulse._bucket import TokenBucket
from ragpulse.evaluation.types import (
    GROUNDEDNESS,
    Context,
    EvalStatus,
    Evaluation,
    RagRecord,
    Usage,
)
from ragpulse.judges import Judge, LexicalJudge
from ragpulse.judges.base import call_judge
from ragpulse.judging import ResilientJudge, RetryPolicy
from ragpulse.judging.breaker import CircuitBreaker
from ragpulse.metrics import ALL_METRICS
from servers.judges import HangingJudge, ScriptedJudge, ok

RECORD = RagRecord(
    question="How long is the warranty?",
    contexts=(Context("The warranty lasts two years.", id="doc-1"),),
    answer="The warranty lasts two years.",
)
FAST = RetryPolicy(max_retries=3, backoff_base=0.001, backoff_max=0.01, attempt_timeout=5.0)


def failure(error_type: str, retry_after: float | None = None) -> Evaluation:
    return Evaluation.failed(
        error_type, judge="scripted", annotator_kind="LLM", retry_after=retry_after
    )


def breaker(threshold: int = 5, reset: float = 3600.0) -> CircuitBreaker:
    return CircuitBreaker(threshold, reset)


async def run(judge: ResilientJudge, count: int = 1) -> list[Evaluation]:
    return [await judge.evaluate(RECORD, ALL_METRICS) for _ in range(count)]


# --- it is a judge ------------------------------------------------------------------------


def test_a_resilient_judge_is_itself_a_judge_named_after_what_it_wraps() -> None:
    judge = ResilientJudge(ScriptedJudge(name="llm"), fallback=ScriptedJudge(name="lexical"))
    assert isinstance(judge, Judge)
    assert (judge.name, judge.annotator_kind) == ("llm|lexical", "LLM")
    assert ResilientJudge(ScriptedJudge(name="llm")).name == "llm"


async def test_a_hanging_attempt_times_out_into_a_timeout_error() -> None:
    retry = RetryPolicy(max_retries=0, attempt_timeout=1.0)
    (evaluation,) = await run(ResilientJudge(HangingJudge(), retry=retry))
    assert (evaluation.status, evaluation.error_type) == (EvalStatus.ERROR, errors.TIMEOUT)
    assert evaluation.judge == "hanging"


# --- retries --------------------------------------------------------------------------


async def test_retryable_errors_are_retried_until_the_judge_answers() -> None:
    primary = ScriptedJudge(failure("server_error"), failure("rate_limited"), ok())
    judge = ResilientJudge(primary, retry=FAST)
    assert [e.status for e in await run(judge)] == [EvalStatus.OK]
    assert primary.calls == 3
    assert judge.stats.retries == 2
    assert judge.stats.errors_by_type == {"server_error": 1, "rate_limited": 1}


async def test_retries_stop_at_max_retries_with_the_last_failure() -> None:
    primary = ScriptedJudge(failure("connection_error"))
    retry = RetryPolicy(max_retries=2, backoff_base=0.001, backoff_max=0.01)
    judge = ResilientJudge(primary, retry=retry, breaker=breaker(100))
    assert [e.error_type for e in await run(judge)] == ["connection_error"]
    assert primary.calls == 3


async def test_errors_about_the_record_are_not_retried() -> None:
    primary = ScriptedJudge(failure("schema_mismatch"), ok())
    assert [e.error_type for e in await run(ResilientJudge(primary, retry=FAST))] == [
        "schema_mismatch"
    ]
    assert primary.calls == 1


async def test_retry_waits_at_least_the_judges_retry_after() -> None:
    primary = ScriptedJudge(failure("rate_limited", retry_after=0.3), ok())
    retry = RetryPolicy(backoff_base=0.001, backoff_max=5.0)
    await run(ResilientJudge(primary, retry=retry))
    first, second = primary.call_times
    assert second - first >= 0.3


async def test_retry_after_is_capped_by_backoff_max() -> None:
    primary = ScriptedJudge(failure("rate_limited", retry_after=3600.0), ok())
    assert [e.status for e in await run(ResilientJudge(primary, retry=FAST))] == [EvalStatus.OK]


async def test_observers_see_every_attempt_including_retries() -> None:
    seen: list[str | None] = []
    judge = ResilientJudge(ScriptedJudge(failure("timeout"), ok()), retry=FAST)
    judge.add_observer(lambda e: seen.append(e.error_type))
    await run(judge)
    assert seen == ["timeout", None]


async def test_an_observer_that_raises_does_not_lose_the_evaluation() -> None:
    def explode(evaluation: Evaluation) -> None:
        raise RuntimeError("hook bug")

    judge = ResilientJudge(ScriptedJudge(), retry=FAST, on_attempt=explode)
    assert [e.status for e in await run(judge)] == [EvalStatus.OK]


async def test_the_result_counts_what_every_attempt_spent() -> None:
    failed_call = Evaluation.failed(
        "server_error", judge="llm", annotator_kind="LLM", usage=Usage(1, 200), duration_ms=20.0
    )
    answered = Evaluation(
        status=EvalStatus.OK,
        metrics={},
        judge="llm",
        annotator_kind="LLM",
        usage=Usage(1, 100),
        duration_ms=5.0,
    )
    (evaluation,) = await run(ResilientJudge(ScriptedJudge(failed_call, answered), retry=FAST))
    assert evaluation.usage == Usage(2, 300)
    assert evaluation.duration_ms == 25.0


# --- a judge that breaks its contract -----------------------------------------------------


async def test_a_judge_that_raises_gives_an_error_evaluation_named_after_the_exception() -> None:
    (evaluation,) = await run(ResilientJudge(ScriptedJudge(KeyError("boom")), retry=FAST))
    assert (evaluation.status, evaluation.error_type) == (EvalStatus.ERROR, "KeyError")


async def test_a_judge_returning_garbage_gives_an_invalid_result_error() -> None:
    judge = ResilientJudge(ScriptedJudge({"groundedness": 1.0}), retry=FAST)
    assert [e.error_type for e in await run(judge)] == [errors.INVALID_RESULT]


# --- circuit breaker --------------------------------------------------------------------


async def test_breaker_opens_after_consecutive_failures_and_fails_fast() -> None:
    primary = ScriptedJudge(failure("connection_error"))
    judge = ResilientJudge(primary, retry=RetryPolicy(max_retries=0), breaker=breaker(2))
    evaluations = await run(judge, 5)
    assert [e.error_type for e in evaluations] == ["connection_error"] * 2 + [
        errors.BREAKER_OPEN
    ] * 3
    assert primary.calls == 2
    assert judge.breaker_open
    assert judge.stats.errors_by_type[errors.BREAKER_OPEN] == 3


async def test_breaker_open_stops_retries_midway() -> None:
    primary = ScriptedJudge(failure("server_error"))
    retry = RetryPolicy(max_retries=10, backoff_base=0.001, backoff_max=0.01)
    judge = ResilientJudge(primary, retry=retry, breaker=breaker(3))
    assert [e.error_type for e in await run(judge)] == [errors.BREAKER_OPEN]
    assert primary.calls == 3


async def test_breaker_probes_after_reset_timeout_and_closes_when_the_judge_is_back() -> None:
    primary = ScriptedJudge(failure("server_error"), failure("server_error"), ok())
    judge = ResilientJudge(
        primary, retry=RetryPolicy(max_retries=0), breaker=CircuitBreaker(2, 0.2)
    )
    await run(judge, 2)
    assert judge.breaker_open
    await asyncio.sleep(0.25)
    (evaluation,) = await run(judge)
    assert evaluation.status is EvalStatus.OK
    assert not judge.breaker_open


async def test_errors_about_the_record_do_not_open_the_breaker() -> None:
    primary = ScriptedJudge(failure("refusal"))
    judge = ResilientJudge(primary, retry=FAST, breaker=breaker(2))
    await run(judge, 4)
    assert primary.calls == 4
    assert not judge.breaker_open


# --- fallback and budget ------------------------------------------------------------------


async def test_fallback_answers_when_the_primary_fails_after_retries() -> None:
    primary = ScriptedJudge(failure("server_error"), name="llm")
    fallback = ScriptedJudge(ok("lexical", 0.5), name="lexical")
    retry = RetryPolicy(max_retries=2, backoff_base=0.001, backoff_max=0.01)
    judge = ResilientJudge(primary, fallback=fallback, retry=retry)
    (evaluation,) = await run(judge)
    assert (evaluation.status, evaluation.judge) == (EvalStatus.OK, "lexical")
    assert (evaluation.explanation or "").startswith(
        "fell back to lexical: llm failed (server_error)"
    )
    assert (primary.calls, fallback.calls) == (3, 1)
    assert judge.stats.fallbacks == 1


async def test_fallback_answers_without_calling_the_primary_while_the_breaker_is_open() -> None:
    primary = ScriptedJudge(failure("connection_error"), name="llm")
    fallback = ScriptedJudge(ok("lexical"), name="lexical")
    judge = ResilientJudge(
        primary, fallback=fallback, retry=RetryPolicy(max_retries=0), breaker=breaker(1)
    )
    evaluations = await run(judge, 4)
    assert [e.judge for e in evaluations] == ["lexical"] * 4
    assert [e.status for e in evaluations] == [EvalStatus.OK] * 4
    assert primary.calls == 1
    assert judge.stats.fallbacks == 4
    assert "breaker_open" in (evaluations[-1].explanation or "")


async def test_fallback_answers_while_the_judge_budget_is_spent() -> None:
    primary = ScriptedJudge(name="llm")
    fallback = ScriptedJudge(ok("lexical"), name="lexical")
    spent = TokenBucket(100, 0.0)
    spent.spend(100)
    judge = ResilientJudge(primary, fallback=fallback, budget=spent)
    (evaluation,) = await run(judge)
    assert evaluation.judge == "lexical"
    assert "llm not called (over_budget)" in (evaluation.explanation or "")
    assert primary.calls == 0


async def test_every_attempt_spends_its_tokens_from_the_budget_until_it_is_empty() -> None:
    primary = ScriptedJudge(ok("llm", tokens=60), name="llm")
    budget = TokenBucket(100, 0.0)
    judge = ResilientJudge(primary, budget=budget)
    evaluations = await run(judge, 3)
    # 60 tokens leave 40; 60 more go into debt; the third record is not judged.
    assert [e.status for e in evaluations] == [EvalStatus.OK, EvalStatus.OK, EvalStatus.SKIPPED]
    assert evaluations[-1].error_type == errors.OVER_BUDGET
    assert primary.calls == 2


async def test_when_both_judges_fail_the_primary_failure_is_reported() -> None:
    primary = ScriptedJudge(failure("auth_error"), name="llm")
    fallback = ScriptedJudge(ValueError("broken"), name="lexical")
    (evaluation,) = await run(ResilientJudge(primary, fallback=fallback, retry=FAST))
    assert evaluation.error_type == "auth_error"
    assert "ValueError" in (evaluation.explanation or "")


async def test_a_plain_judge_is_skipped_while_the_judge_budget_is_spent() -> None:
    primary = ScriptedJudge()
    spent = TokenBucket(1, 0.0)
    spent.spend(1)
    (evaluation,) = await run(ResilientJudge(primary, budget=spent))
    assert (evaluation.status, evaluation.error_type) == (EvalStatus.SKIPPED, errors.OVER_BUDGET)
    assert primary.calls == 0


async def test_a_lexical_fallback_scores_the_record_in_its_own_process() -> None:
    primary = ScriptedJudge(failure("connection_error"), name="llm")
    retry = RetryPolicy(max_retries=1, backoff_base=0.001, backoff_max=0.01)
    judge = ResilientJudge(primary, fallback=LexicalJudge(), retry=retry, breaker=breaker(100))
    (evaluation,) = await run(judge)
    assert evaluation.status is EvalStatus.OK
    assert evaluation.annotator_kind == "CODE"
    assert evaluation.score(GROUNDEDNESS) == 1.0
    assert primary.calls == 2
    assert judge.stats.fallbacks == 1


# --- within the caller's bound ---------------------------------------------------------------


async def test_a_hanging_primary_leaves_time_for_the_fallback_within_the_callers_bound() -> None:
    fallback = ScriptedJudge(ok("lexical"), name="lexical")
    judge = ResilientJudge(HangingJudge(), fallback=fallback, retry=FAST)
    # The worker calls every judge through call_judge with its timeout; the fallback's share
    # of it (a quarter) is wide enough for a busy machine's event loop.
    evaluation = await call_judge(judge, RECORD, ALL_METRICS, timeout=4.0)
    assert (evaluation.status, evaluation.judge) == (EvalStatus.OK, "lexical")
    assert "hanging failed (timeout)" in (evaluation.explanation or "")


async def test_no_retry_is_started_that_the_callers_bound_would_cut_short() -> None:
    primary = ScriptedJudge(failure("rate_limited", retry_after=5.0), ok())
    judge = ResilientJudge(primary, retry=RetryPolicy(backoff_max=10.0))
    evaluation = await call_judge(judge, RECORD, ALL_METRICS, timeout=2.0)
    # The server's answer is the result, not a timeout of a wait that could not fit.
    assert evaluation.error_type == "rate_limited"
    assert primary.calls == 1
    assert judge.stats.retries == 0


async def test_a_hanging_primary_cut_by_the_callers_bound_is_still_an_observed_attempt() -> None:
    seen: list[str | None] = []
    judge = ResilientJudge(
        HangingJudge(), retry=FAST, on_attempt=lambda e: seen.append(e.error_type)
    )
    evaluation = await call_judge(judge, RECORD, ALL_METRICS, timeout=1.0)
    # Ended just before the caller's bound, so the attempt reached the self-metrics.
    assert (evaluation.status, evaluation.error_type) == (EvalStatus.ERROR, errors.TIMEOUT)
    assert evaluation.judge == "hanging"
    assert seen == [errors.TIMEOUT]


async def test_an_attempt_cancelled_from_outside_is_still_observed_once() -> None:
    # A busy event loop can fire the caller's bound before the attempt's own timeout:
    # the cut attempt still reaches the self-metrics, once, and the cancellation propagates.
    seen: list[str | None] = []
    primary = HangingJudge()
    judge = ResilientJudge(primary, retry=FAST, on_attempt=lambda e: seen.append(e.error_type))
    task = asyncio.ensure_future(judge.evaluate(RECORD, ALL_METRICS))
    while not primary.started.is_set():
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [errors.TIMEOUT]
    assert judge.stats.attempts == 1
