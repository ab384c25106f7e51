"""EvalWorker: evaluations run on ragpulse's own thread, bounded, retried, and never lost.

The judges here are small plug-in judges of the kind a user writes (the ``Judge``
protocol is public), each scripted to behave one way: slow, hanging, failing,
raising, returning garbage. The last tests use ragpulse's own judges.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

import pytest
from opentelemetry import context as otel_context

from ragpulse import semconv
from ragpulse.evaluation.types import (
    GROUNDEDNESS,
    Context,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
)
from ragpulse.worker import (
    ERROR_BREAKER_OPEN,
    ERROR_INVALID_RESULT,
    ERROR_OVER_BUDGET,
    ERROR_TIMEOUT,
    EvalWorker,
)

WAIT = 30.0  # generous upper bound for flush/shutdown: a hang fails the test, slowness does not


def _record(n: int = 0) -> RagRecord:
    return RagRecord(
        question=f"question {n}",
        contexts=(Context("The warranty lasts two years.", id="doc-1"),),
        answer="The warranty lasts two years.",
        name="support",
    )


def _ok(judge: str = "scripted", score: float = 0.9) -> Evaluation:
    return Evaluation(
        status=EvalStatus.OK,
        metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, score)},
        judge=judge,
        annotator_kind="LLM",
    )


def _failed(error_type: str, retry_after: float | None = None) -> Evaluation:
    return Evaluation.failed(
        error_type, judge="scripted", annotator_kind="LLM", retry_after=retry_after
    )


class ScriptedJudge:
    """Answers with ``outcomes`` in order (repeating the last); an exception is raised."""

    annotator_kind = "LLM"

    def __init__(self, *outcomes: Evaluation | BaseException | object, name: str = "scripted"):
        self.name = name
        self._outcomes = list(outcomes) or [_ok(name)]
        self.calls = 0
        self.call_times: list[float] = []

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        outcome = self._outcomes[min(self.calls, len(self._outcomes) - 1)]
        self.calls += 1
        self.call_times.append(time.monotonic())
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[return-value]


class GatedJudge:
    """Holds every evaluation until the test opens the gate; counts how many overlap."""

    name = "gated"
    annotator_kind = "LLM"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Semaphore(0)
        self.running = 0
        self.max_running = 0

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        self.started.release()
        try:
            while not self.gate.is_set():
                await asyncio.sleep(0.002)
            return _ok(self.name)
        finally:
            self.running -= 1

    def wait_started(self, count: int = 1) -> None:
        for _ in range(count):
            assert self.started.acquire(timeout=WAIT), "judge never started"


class HangingJudge:
    """Never answers."""

    name = "hanging"
    annotator_kind = "LLM"

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class FallbackPair:
    """A user-built fallback judge: the worker recognises ``primary`` and ``fallback``."""

    annotator_kind = "LLM"

    def __init__(self, primary: ScriptedJudge, fallback: ScriptedJudge) -> None:
        self.primary = primary
        self.fallback = fallback
        self.name = f"{primary.name}|{fallback.name}"

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        raise AssertionError("the worker calls primary and fallback itself")


@dataclass
class Results:
    """What the callbacks received, in order, from whichever thread they ran on."""

    items: list[tuple[RagRecord, Evaluation]] = field(default_factory=list)
    threads: set[str] = field(default_factory=set)

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        self.items.append((record, evaluation))
        self.threads.add(threading.current_thread().name)

    @property
    def evaluations(self) -> list[Evaluation]:
        return [evaluation for _, evaluation in self.items]


@pytest.fixture
def make_worker() -> Iterator[Callable[..., EvalWorker]]:
    workers: list[EvalWorker] = []

    def make(judge: object, **kwargs: object) -> EvalWorker:
        kwargs.setdefault("backoff_base", 0.001)
        kwargs.setdefault("backoff_max", 0.01)
        worker = EvalWorker(judge, **kwargs)  # type: ignore[arg-type]
        workers.append(worker)
        return worker

    yield make
    for worker in workers:
        worker.shutdown(timeout=5.0)


# --- submit never blocks the caller ---------------------------------------------------


async def test_submit_from_a_running_event_loop_returns_while_the_judge_is_still_busy(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = GatedJudge()
    worker = make_worker(judge)
    results = Results()
    # We are inside the caller's running asyncio loop: submit must neither run the
    # judge here nor wait for it.
    accepted = worker.submit(_record(), results)
    judge.wait_started()
    assert accepted
    assert results.items == []
    assert worker.in_flight == 1
    judge.gate.set()
    assert await asyncio.to_thread(worker.flush, WAIT)
    assert [e.status for e in results.evaluations] == [EvalStatus.OK]


def test_callbacks_run_on_the_worker_thread_not_the_callers(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge())
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert results.threads == {"ragpulse-eval-worker"}


def test_every_submitted_record_gets_exactly_one_evaluation(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge(), concurrency=3)
    results = Results()
    records = [_record(n) for n in range(50)]
    assert all(worker.submit(record, results) for record in records)
    assert worker.flush(WAIT)
    assert sorted(r.question or "" for r, _ in results.items) == sorted(
        r.question or "" for r in records
    )
    stats = worker.stats
    assert (stats.submitted, stats.completed, stats.dropped) == (50, 50, 0)


# --- bounds -----------------------------------------------------------------------------


def test_full_queue_refuses_exactly_past_its_bound_and_counts_the_drop(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = GatedJudge()
    worker = make_worker(judge, concurrency=1, max_queue_size=3)
    results = Results()
    assert worker.submit(_record(0), results)
    judge.wait_started()  # record 0 holds the only slot; the queue is empty again
    accepted = [worker.submit(_record(n), results) for n in range(1, 6)]
    assert accepted == [True, True, True, False, False]
    assert worker.queue_size == 3
    assert worker.stats.dropped == 2
    judge.gate.set()
    assert worker.flush(WAIT)
    assert len(results.items) == 4


def test_no_more_judge_calls_overlap_than_the_concurrency(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = GatedJudge()
    worker = make_worker(judge, concurrency=3)
    results = Results()
    for n in range(12):
        worker.submit(_record(n), results)
    judge.wait_started(3)
    assert worker.in_flight == 3
    assert worker.queue_size == 9
    judge.gate.set()
    assert worker.flush(WAIT)
    assert judge.max_running == 3
    assert len(results.items) == 12


def test_a_hanging_judge_times_out_into_a_timeout_error(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(HangingJudge(), timeout=0.05, max_retries=0)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert evaluation.status is EvalStatus.ERROR
    assert evaluation.error_type == ERROR_TIMEOUT
    assert evaluation.judge == "hanging"
    assert worker.stats.timeouts == 1


# --- retries --------------------------------------------------------------------------


def test_retryable_errors_are_retried_until_the_judge_answers(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge(_failed("server_error"), _failed("rate_limited"), _ok())
    worker = make_worker(judge, max_retries=3)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.status for e in results.evaluations] == [EvalStatus.OK]
    assert judge.calls == 3
    assert worker.stats.retries == 2
    assert worker.stats.errors_by_type == {"server_error": 1, "rate_limited": 1}


def test_retries_stop_at_max_retries_with_the_last_failure(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge(_failed("connection_error"))
    worker = make_worker(judge, max_retries=2, breaker_failure_threshold=100)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.error_type for e in results.evaluations] == ["connection_error"]
    assert judge.calls == 3


def test_errors_about_the_record_are_not_retried(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge(_failed("schema_mismatch"), _ok())
    worker = make_worker(judge, max_retries=3)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.error_type for e in results.evaluations] == ["schema_mismatch"]
    assert judge.calls == 1


def test_retry_waits_at_least_the_judges_retry_after(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge(_failed("rate_limited", retry_after=0.3), _ok())
    worker = make_worker(judge, backoff_base=0.001, backoff_max=5.0)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    first, second = judge.call_times
    assert second - first >= 0.3


def test_retry_after_is_capped_by_backoff_max(make_worker: Callable[..., EvalWorker]) -> None:
    judge = ScriptedJudge(_failed("rate_limited", retry_after=3600.0), _ok())
    worker = make_worker(judge, backoff_max=0.01)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.status for e in results.evaluations] == [EvalStatus.OK]


def test_on_judge_call_sees_every_call_including_retries(
    make_worker: Callable[..., EvalWorker],
) -> None:
    seen: list[str | None] = []
    judge = ScriptedJudge(_failed("timeout"), _ok())
    worker = make_worker(judge, on_judge_call=lambda e: seen.append(e.error_type))
    worker.submit(_record(), Results())
    assert worker.flush(WAIT)
    assert seen == ["timeout", None]


# --- a judge that breaks its contract -----------------------------------------------------


def test_a_judge_that_raises_gives_an_error_evaluation_named_after_the_exception(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge(KeyError("boom")), max_retries=0)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert evaluation.status is EvalStatus.ERROR
    assert evaluation.error_type == "KeyError"


def test_a_judge_returning_garbage_gives_an_invalid_result_error(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge({"groundedness": 1.0}), max_retries=0)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.error_type for e in results.evaluations] == [ERROR_INVALID_RESULT]


def test_a_callback_that_raises_does_not_stop_the_worker(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge(), concurrency=1)
    results = Results()

    def explode(record: RagRecord, evaluation: Evaluation) -> None:
        raise RuntimeError("callback bug")

    worker.submit(_record(0), explode)
    worker.submit(_record(1), results)
    assert worker.flush(WAIT)
    assert [r.question for r, _ in results.items] == ["question 1"]


def test_a_hook_that_raises_does_not_lose_the_evaluation(
    make_worker: Callable[..., EvalWorker],
) -> None:
    def explode(evaluation: Evaluation) -> None:
        raise RuntimeError("hook bug")

    worker = make_worker(ScriptedJudge(), on_judge_call=explode)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.status for e in results.evaluations] == [EvalStatus.OK]


def test_judge_calls_run_with_instrumentation_suppressed(
    make_worker: Callable[..., EvalWorker],
) -> None:
    seen: list[object] = []

    class ContextJudge(ScriptedJudge):
        async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
            seen.append(otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY))
            return _ok()

    worker = make_worker(ContextJudge())
    worker.submit(_record(), Results())
    assert worker.flush(WAIT)
    assert seen == [True]


# --- circuit breaker --------------------------------------------------------------------


def test_breaker_opens_after_consecutive_failures_and_fails_fast(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge(_failed("connection_error"))
    worker = make_worker(
        judge,
        concurrency=1,
        max_retries=0,
        breaker_failure_threshold=2,
        breaker_reset_timeout=3600.0,
    )
    results = Results()
    for n in range(5):
        worker.submit(_record(n), results)
    assert worker.flush(WAIT)
    assert [e.error_type for e in results.evaluations] == ["connection_error"] * 2 + [
        ERROR_BREAKER_OPEN
    ] * 3
    assert judge.calls == 2
    assert worker.breaker_open
    assert worker.stats.errors_by_type[ERROR_BREAKER_OPEN] == 3


def test_breaker_open_stops_retries_midway(make_worker: Callable[..., EvalWorker]) -> None:
    judge = ScriptedJudge(_failed("server_error"))
    worker = make_worker(
        judge, max_retries=10, breaker_failure_threshold=3, breaker_reset_timeout=3600.0
    )
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.error_type for e in results.evaluations] == [ERROR_BREAKER_OPEN]
    assert judge.calls == 3


def test_breaker_probes_after_reset_timeout_and_closes_when_the_judge_is_back(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge(_failed("server_error"), _failed("server_error"), _ok())
    worker = make_worker(
        judge,
        concurrency=1,
        max_retries=0,
        breaker_failure_threshold=2,
        breaker_reset_timeout=0.2,
    )
    results = Results()
    for n in range(2):
        worker.submit(_record(n), results)
    assert worker.flush(WAIT)
    assert worker.breaker_open
    time.sleep(0.25)
    worker.submit(_record(2), results)
    assert worker.flush(WAIT)
    assert results.evaluations[-1].status is EvalStatus.OK
    assert not worker.breaker_open


def test_errors_about_the_record_do_not_open_the_breaker(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge(_failed("refusal"))
    worker = make_worker(judge, breaker_failure_threshold=2)
    for n in range(4):
        worker.submit(_record(n), Results())
    assert worker.flush(WAIT)
    assert judge.calls == 4
    assert not worker.breaker_open


# --- fallback and budget ------------------------------------------------------------------


def test_fallback_judge_degrades_when_the_primary_fails_after_retries(
    make_worker: Callable[..., EvalWorker],
) -> None:
    primary = ScriptedJudge(_failed("server_error"), name="llm")
    fallback = ScriptedJudge(_ok("lexical", 0.5), name="lexical")
    worker = make_worker(FallbackPair(primary, fallback), max_retries=2)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert (evaluation.status, evaluation.judge) == (EvalStatus.OK, "lexical")
    assert "server_error" in (evaluation.explanation or "")
    assert (primary.calls, fallback.calls) == (3, 1)
    assert worker.stats.fallbacks == 1


def test_fallback_judge_is_used_without_calling_the_primary_while_the_breaker_is_open(
    make_worker: Callable[..., EvalWorker],
) -> None:
    primary = ScriptedJudge(_failed("connection_error"), name="llm")
    fallback = ScriptedJudge(_ok("lexical"), name="lexical")
    worker = make_worker(
        FallbackPair(primary, fallback),
        concurrency=1,
        max_retries=0,
        breaker_failure_threshold=1,
        breaker_reset_timeout=3600.0,
    )
    results = Results()
    for n in range(4):
        worker.submit(_record(n), results)
    assert worker.flush(WAIT)
    assert [e.judge for e in results.evaluations] == ["lexical"] * 4
    assert [e.status for e in results.evaluations] == [EvalStatus.OK] * 4
    assert primary.calls == 1
    assert worker.stats.fallbacks == 4


def test_fallback_judge_is_used_while_the_judge_budget_is_spent(
    make_worker: Callable[..., EvalWorker],
) -> None:
    primary = ScriptedJudge(name="llm")
    fallback = ScriptedJudge(_ok("lexical"), name="lexical")
    worker = make_worker(FallbackPair(primary, fallback), judge_budget_available=lambda: False)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.judge for e in results.evaluations] == ["lexical"]
    assert primary.calls == 0


def test_when_both_judges_fail_the_primary_failure_is_reported(
    make_worker: Callable[..., EvalWorker],
) -> None:
    primary = ScriptedJudge(_failed("auth_error"), name="llm")
    fallback = ScriptedJudge(ValueError("broken"), name="lexical")
    worker = make_worker(FallbackPair(primary, fallback))
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert evaluation.error_type == "auth_error"
    assert "ValueError" in (evaluation.explanation or "")


def test_a_plain_judge_is_skipped_while_the_judge_budget_is_spent(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge()
    worker = make_worker(judge, judge_budget_available=lambda: False)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert (evaluation.status, evaluation.error_type) == (EvalStatus.SKIPPED, ERROR_OVER_BUDGET)
    assert judge.calls == 0


# --- flush and shutdown -------------------------------------------------------------------


def test_flush_times_out_false_while_an_evaluation_is_unfinished(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = GatedJudge()
    worker = make_worker(judge)
    worker.submit(_record(), Results())
    judge.wait_started()
    assert worker.flush(timeout=0.05) is False
    judge.gate.set()
    assert worker.flush(WAIT) is True


def test_flush_with_nothing_submitted_returns_true_at_once(
    make_worker: Callable[..., EvalWorker],
) -> None:
    assert make_worker(ScriptedJudge()).flush(timeout=0.0)


def test_shutdown_evaluates_everything_already_accepted(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = GatedJudge()
    worker = make_worker(judge, concurrency=2)
    results = Results()
    for n in range(20):
        worker.submit(_record(n), results)
    judge.wait_started(2)
    judge.gate.set()
    worker.shutdown(timeout=WAIT)
    assert len(results.items) == 20


def test_submit_after_shutdown_is_refused_and_counted(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge())
    worker.shutdown(timeout=WAIT)
    assert worker.submit(_record(), Results()) is False
    assert worker.stats.dropped == 1


def test_shutdown_twice_is_harmless(make_worker: Callable[..., EvalWorker]) -> None:
    worker = make_worker(ScriptedJudge())
    worker.shutdown(timeout=WAIT)
    worker.shutdown(timeout=WAIT)
    assert worker.submit(_record(), Results()) is False


def test_shutdown_returns_after_its_timeout_when_the_judge_hangs(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(HangingJudge(), concurrency=1, timeout=3600.0)
    results = Results()
    for n in range(3):
        worker.submit(_record(n), results)
    worker.shutdown(timeout=0.1)
    # Abandoned records get no callback, and flush says they never completed.
    assert results.items == []
    assert worker.flush(timeout=1.0) is False


# --- environment, fork, real judges ---------------------------------------------------------


def test_from_env_reads_the_bounds_and_keyword_arguments_win(
    make_worker: Callable[..., EvalWorker], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(semconv.ENV_MAX_QUEUE_SIZE, "1")
    monkeypatch.setenv(semconv.ENV_EVAL_CONCURRENCY, "1")
    monkeypatch.setenv(semconv.ENV_EVAL_MAX_RETRIES, "0")
    judge = GatedJudge()
    worker = EvalWorker.from_env(judge, concurrency=2)
    try:
        results = Results()
        # One record at a time, so the one-record queue never refuses these two.
        for n in (0, 1):
            assert worker.submit(_record(n), results)
            judge.wait_started()
        assert worker.in_flight == 2  # two slots: the keyword argument won
        assert [worker.submit(_record(n), results) for n in (2, 3)] == [True, False]
    finally:
        judge.gate.set()
        worker.shutdown(timeout=WAIT)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_evaluates_with_its_own_worker(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge(_ok("scripted", 0.75)))
    parent_results = Results()
    worker.submit(_record(0), parent_results)
    assert worker.flush(WAIT)

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read_end)
            child_results = Results()
            accepted = worker.submit(_record(1), child_results)
            flushed = worker.flush(WAIT)
            payload = {
                "accepted": accepted,
                "flushed": flushed,
                "scores": [e.score(GROUNDEDNESS) for e in child_results.evaluations],
                "threads": sorted(child_results.threads),
            }
            os.write(write_end, json.dumps(payload).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        payload = json.loads(pipe.read() or b"{}")
    os.waitpid(pid, 0)
    assert payload == {
        "accepted": True,
        "flushed": True,
        "scores": [0.75],
        "threads": ["ragpulse-eval-worker"],
    }


def test_lexical_judge_scores_a_record_through_the_worker(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judges = pytest.importorskip("ragpulse.judges")
    worker = make_worker(judges.LexicalJudge())
    results = Results()
    record = RagRecord(
        question="How long is the warranty?",
        contexts=(Context("Every kettle comes with a warranty of two years.", id="doc-1"),),
        answer="The kettle has a warranty of two years. It was designed on Mars in 1850.",
    )
    worker.submit(record, results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert evaluation.status is EvalStatus.OK
    assert evaluation.annotator_kind == "CODE"
    score = evaluation.score(GROUNDEDNESS)
    assert score is not None
    assert 0.0 < score < 1.0


def test_fallback_judge_degrades_to_the_lexical_judge_when_the_llm_is_down(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judges = pytest.importorskip("ragpulse.judges")
    primary = ScriptedJudge(_failed("connection_error"), name="llm")
    worker = make_worker(
        judges.FallbackJudge(primary, judges.LexicalJudge()),
        max_retries=1,
        breaker_failure_threshold=100,
    )
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert evaluation.status is EvalStatus.OK
    assert evaluation.annotator_kind == "CODE"
    assert evaluation.score(GROUNDEDNESS) == 1.0
    assert primary.calls == 2
    assert worker.stats.fallbacks == 1
