"""EvalWorker: evaluations run on ragpulse's own thread, bounded, and never lost.

The judges here are small plug-in judges of the kind a user writes (the ``Judge``
protocol is public), each scripted to behave one way: slow, hanging, raising,
returning garbage. The last tests use ragpulse's own judges. Retries, the breaker,
the fallback and the budget are the judge's (``test_resilient_judge.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

import pytest
from opentelemetry import context as otel_context

from ragpulse import errors
from ragpulse.evaluation.types import (
    GROUNDEDNESS,
    Context,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
)
from ragpulse.judging.resilient import RetryPolicy
from ragpulse.settings.options import BoundsOptions, JudgeOptions
from ragpulse.worker import EvalWorker, record_size
from servers.judges import HangingJudge, ScriptedJudge

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
    worker = make_worker(ScriptedJudge(), judging=JudgeOptions(concurrency=3))
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
    worker = make_worker(
        judge, judging=JudgeOptions(concurrency=1), bounds=BoundsOptions(max_queue_size=3)
    )
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


def test_queue_is_bounded_in_bytes_and_counts_what_it_refused(
    make_worker: Callable[..., EvalWorker],
) -> None:
    # Thirty 20 MB answers once sat in the queue while nothing bounded their bytes.
    big = "x" * 20_000_000
    judge = GatedJudge()
    # The judge must hold what it takes: a record over max_input_chars would be skipped at
    # once and free its bytes, letting a fourth in whenever the worker thread is quick.
    worker = make_worker(
        judge,
        judging=JudgeOptions(concurrency=1),
        bounds=BoundsOptions(max_queue_bytes=64 * 1024 * 1024, max_input_chars=100_000_000),
    )
    results = Results()
    records = [
        RagRecord(question=f"q{n}", contexts=(Context("ctx"),), answer=big) for n in range(30)
    ]
    accepted = [worker.submit(record, results) for record in records]
    assert accepted == [True] * 3 + [False] * 27
    assert 60_000_000 < worker.queue_bytes <= 64 * 1024 * 1024
    stats = worker.stats
    assert stats.dropped == 27
    assert stats.dropped_bytes == sum(record_size(record)[1] for record in records[3:])
    judge.gate.set()
    assert worker.flush(WAIT)
    assert len(results.items) == 3
    assert worker.queue_bytes == 0


def test_a_record_beyond_the_input_bound_is_skipped_as_too_large_without_calling_the_judge(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge()
    worker = make_worker(judge, bounds=BoundsOptions(max_input_chars=1_000))
    results = Results()
    long_context = RagRecord(
        question="q", contexts=(Context("c" * 600), Context("d" * 600)), answer="short"
    )
    worker.submit(long_context, results)
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    skipped, judged = results.evaluations
    assert (skipped.status, skipped.error_type) == (EvalStatus.SKIPPED, errors.TOO_LARGE)
    assert "1205 characters" in (skipped.explanation or "")
    assert judged.status is EvalStatus.OK
    assert judge.calls == 1
    assert worker.stats.too_large == 1


def test_the_default_input_bound_skips_a_fifty_megabyte_answer(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = ScriptedJudge()
    worker = make_worker(judge, bounds=BoundsOptions(max_queue_bytes=128 * 1024 * 1024))
    results = Results()
    worker.submit(RagRecord(question="q", contexts=(), answer="a" * 50_000_000), results)
    assert worker.flush(WAIT)
    assert [e.error_type for e in results.evaluations] == [errors.TOO_LARGE]
    assert judge.calls == 0


def test_no_more_judge_calls_overlap_than_the_concurrency(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = GatedJudge()
    worker = make_worker(judge, judging=JudgeOptions(concurrency=3))
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
    worker = make_worker(HangingJudge(), judging=JudgeOptions(evaluation_timeout=1.0))
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert evaluation.status is EvalStatus.ERROR
    assert evaluation.error_type == errors.TIMEOUT
    assert evaluation.judge == "hanging"
    assert worker.stats.timeouts == 1


# --- a judge that breaks its contract -----------------------------------------------------


def test_a_judge_that_raises_gives_an_error_evaluation_named_after_the_exception(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge(KeyError("boom")))
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert evaluation.status is EvalStatus.ERROR
    assert evaluation.error_type == "KeyError"


def test_a_judge_returning_garbage_gives_an_invalid_result_error(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge({"groundedness": 1.0}))
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    assert [e.error_type for e in results.evaluations] == [errors.INVALID_RESULT]


def test_a_callback_that_raises_does_not_stop_the_worker(
    make_worker: Callable[..., EvalWorker],
) -> None:
    worker = make_worker(ScriptedJudge(), judging=JudgeOptions(concurrency=1))
    results = Results()

    def explode(record: RagRecord, evaluation: Evaluation) -> None:
        raise RuntimeError("callback bug")

    worker.submit(_record(0), explode)
    worker.submit(_record(1), results)
    assert worker.flush(WAIT)
    assert [r.question for r, _ in results.items] == ["question 1"]


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


# --- flush and shutdown -------------------------------------------------------------------


def test_flush_times_out_false_while_an_evaluation_is_unfinished(
    make_worker: Callable[..., EvalWorker],
) -> None:
    judge = GatedJudge()
    worker = make_worker(judge)
    worker.submit(_record(), Results())
    judge.wait_started()
    assert worker.flush(timeout=1.0) is False
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
    worker = make_worker(judge, judging=JudgeOptions(concurrency=2))
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
    worker = make_worker(
        HangingJudge(), judging=JudgeOptions(concurrency=1, evaluation_timeout=3600.0)
    )
    results = Results()
    for n in range(3):
        worker.submit(_record(n), results)
    worker.shutdown(timeout=1.0)
    # Abandoned records get no callback, and flush says they never completed.
    assert results.items == []
    assert worker.flush(timeout=1.0) is False


# --- fork, real judges ---------------------------------------------------------------------


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
    judging = pytest.importorskip("ragpulse.judging")
    primary = ScriptedJudge(_failed("connection_error"), name="llm")
    judge = judging.FallbackJudge(
        primary,
        judges.LexicalJudge(),
        retry=RetryPolicy(max_retries=1, backoff_base=0.001, backoff_max=0.01),
    )
    worker = make_worker(judge)
    results = Results()
    worker.submit(_record(), results)
    assert worker.flush(WAIT)
    (evaluation,) = results.evaluations
    assert evaluation.status is EvalStatus.OK
    assert evaluation.annotator_kind == "CODE"
    assert evaluation.score(GROUNDEDNESS) == 1.0
    assert primary.calls == 2
    assert judge.stats.fallbacks == 1
