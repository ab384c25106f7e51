"""A CPU-bound judge runs in its own process: the timeout ends it, and others do not wait.

The judge here is pure Python computation that never ends on a "spin" answer, the
way a superlinear judge behaves on a hostile input; it holds the GIL for as long as
it runs, so inside the application's process nothing could interrupt it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

from ragpulse import errors
from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, RagRecord
from ragpulse.judges import LexicalJudge
from ragpulse.judges.base import call_judge
from ragpulse.judging import ProcessJudge, ResilientJudge, RetryPolicy
from ragpulse.settings.options import BoundsOptions, JudgeOptions
from ragpulse.worker import EvalWorker

WAIT = 60.0  # generous bound for flush: a hang fails the test, slowness does not


class SpinningJudge:
    """Computes forever on an answer containing "spin"; reports its pid otherwise."""

    name = "spinning"
    annotator_kind = "CODE"
    cpu_bound = True

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        if "spin" in (record.answer or ""):
            n = 0
            while True:  # no await: only ending the process stops this
                n += 1
        return Evaluation(
            status=EvalStatus.OK,
            metrics={},
            judge=self.name,
            annotator_kind="CODE",
            explanation=f"pid {os.getpid()}",
        )


class NiceReportingJudge:
    """Reports the scheduling priority (``nice``) of the process it runs in."""

    name = "nice-reporting"
    annotator_kind = "CODE"
    cpu_bound = True

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        return Evaluation(
            status=EvalStatus.OK,
            metrics={},
            judge=self.name,
            annotator_kind="CODE",
            explanation=f"nice {os.nice(0)}",
        )


def record(answer: str) -> RagRecord:
    return RagRecord(question="q", contexts=(Context("c"),), answer=answer)


class Collected:
    """Evaluations by answer, and an event per answer."""

    def __init__(self) -> None:
        self.by_answer: dict[str, Evaluation] = {}
        self.order: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, rec: RagRecord, evaluation: Evaluation) -> None:
        with self._lock:
            self.by_answer[rec.answer or ""] = evaluation
            self.order.append(rec.answer or "")


@pytest.fixture
def workers() -> Iterator[list[EvalWorker]]:
    made: list[EvalWorker] = []
    yield made
    for worker in made:
        worker.shutdown(timeout=10.0)


def test_a_cpu_bound_judge_runs_in_another_process(workers: list[EvalWorker]) -> None:
    worker = EvalWorker(SpinningJudge(), judging=JudgeOptions(evaluation_timeout=30.0))
    workers.append(worker)
    got = Collected()
    worker.submit(record("small"), got)
    assert worker.flush(WAIT)
    explanation = got.by_answer["small"].explanation or ""
    assert explanation.startswith("pid ")
    assert explanation != f"pid {os.getpid()}"


def test_opting_out_runs_the_cpu_bound_judge_on_the_worker_thread(
    workers: list[EvalWorker],
) -> None:
    worker = EvalWorker(
        SpinningJudge(), isolate_cpu_bound=False, judging=JudgeOptions(evaluation_timeout=30.0)
    )
    workers.append(worker)
    got = Collected()
    worker.submit(record("small"), got)
    assert worker.flush(WAIT)
    assert got.by_answer["small"].explanation == f"pid {os.getpid()}"


def test_a_runaway_evaluation_is_ended_by_the_timeout(workers: list[EvalWorker]) -> None:
    worker = EvalWorker(
        SpinningJudge(), judging=JudgeOptions(evaluation_timeout=1.0, concurrency=1)
    )
    workers.append(worker)
    got = Collected()
    worker.submit(record("spin"), got)
    assert worker.flush(WAIT)
    evaluation = got.by_answer["spin"]
    assert (evaluation.status, evaluation.error_type) == (EvalStatus.ERROR, errors.TIMEOUT)
    assert "judge process was ended" in (evaluation.explanation or "")
    assert worker.stats.timeouts == 1


def test_a_small_record_behind_a_runaway_one_is_evaluated_once_the_timeout_ends_it(
    workers: list[EvalWorker],
) -> None:
    # One slot, one process: the small record can only be judged after the runaway one
    # (which would never end) is killed at the timeout and its process replaced.
    worker = EvalWorker(
        SpinningJudge(), judging=JudgeOptions(evaluation_timeout=1.0, concurrency=1)
    )
    workers.append(worker)
    got = Collected()
    assert worker.submit(record("spin"), got)
    assert worker.submit(record("small"), got)
    assert worker.flush(WAIT)
    assert got.order == ["spin", "small"]
    assert got.by_answer["spin"].error_type == errors.TIMEOUT
    assert got.by_answer["small"].status is EvalStatus.OK


class GatedJudge:
    """Computes, holding its process, until the file named after "gate " exists."""

    name = "gated"
    annotator_kind = "CODE"
    cpu_bound = True

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        answer = record.answer or ""
        if answer.startswith("gate "):
            gate = answer.removeprefix("gate ")
            n = 0
            while not os.path.exists(gate):  # no await: the process is held until then
                n += 1
        return Evaluation(status=EvalStatus.OK, metrics={}, judge=self.name, annotator_kind="CODE")


def test_records_beside_a_runaway_one_are_not_held_up_when_there_are_slots(
    workers: list[EvalWorker], tmp_path: Path
) -> None:
    # The runaway record holds one process until the test lets it go, after every small one
    # has come back: the small ones can only come back by finishing in the other process,
    # however long that one takes to start on a busy machine.
    gate = tmp_path / "gate"
    worker = EvalWorker(GatedJudge(), judging=JudgeOptions(evaluation_timeout=600.0, concurrency=2))
    workers.append(worker)
    got = Collected()
    worker.submit(record(f"gate {gate}"), got)
    for n in range(5):
        worker.submit(record(f"small {n}"), got)
    pause = threading.Event()
    deadline = time.monotonic() + 300.0
    while len(got.order) < 5 and time.monotonic() < deadline:
        pause.wait(0.05)
    held = list(got.order)
    gate.touch()
    assert worker.flush(WAIT)
    assert sorted(held) == [f"small {n}" for n in range(5)]
    assert got.order[5:] == [f"gate {gate}"]


async def test_a_process_judge_inside_a_resilient_judge_is_ended_by_the_attempt_timeout() -> None:
    fallback = SpinningJudge()
    judge = ResilientJudge(
        SpinningJudge(),
        fallback=fallback,
        retry=RetryPolicy(max_retries=0, attempt_timeout=1.0),
    )
    evaluation = await judge.evaluate(record("spin"), ())
    # Both ran away and were ended; the primary's failure is the answer.
    assert (evaluation.status, evaluation.error_type) == (EvalStatus.ERROR, errors.TIMEOUT)
    assert "fallback spinning failed too (timeout)" in (evaluation.explanation or "")
    small = await judge.evaluate(record("small"), ())
    assert small.status is EvalStatus.OK


@pytest.mark.parametrize("resilient", [False, True], ids=["process-judge", "resilient"])
def test_every_record_started_in_judge_processes_gets_one_callback_through_a_shutdown(
    workers: list[EvalWorker], resilient: bool
) -> None:
    # Records for judge processes start there without a task each, many to a batch: a
    # shutdown still waits for every one, and each gets exactly one callback.
    judge = ResilientJudge(LexicalJudge()) if resilient else LexicalJudge()
    worker = EvalWorker(judge, judging=JudgeOptions(evaluation_timeout=WAIT, concurrency=2))
    workers.append(worker)
    got = Collected()
    answers = [f"The warranty lasts {n} years." for n in range(300)]
    for answer in answers:
        assert worker.submit(record(answer), got)
    worker.shutdown(timeout=WAIT)
    assert sorted(got.order) == sorted(answers)
    assert worker.stats.completed == len(answers)
    assert all(e.status is EvalStatus.OK for e in got.by_answer.values())


def test_one_slot_of_one_record_still_takes_every_queued_record_in_turn(
    workers: list[EvalWorker],
) -> None:
    # Nothing measured yet, so each batch is one record and only one may be out at a
    # time: each answer must make room for the next without waiting for new records.
    worker = EvalWorker(
        ResilientJudge(SpinningJudge(), processes=1),
        judging=JudgeOptions(evaluation_timeout=WAIT, concurrency=1),
    )
    workers.append(worker)
    got = Collected()
    for n in range(5):
        assert worker.submit(record(f"small {n}"), got)
    assert worker.flush(WAIT)
    assert got.order == [f"small {n}" for n in range(5)]


def test_the_workers_bound_ends_a_runaway_attempt_of_a_resilient_judge(
    workers: list[EvalWorker],
) -> None:
    # The attempt timeout is far off: the worker's own bound ends the runaway record, and
    # the cut attempt is counted. (What comes next waits for a new interpreter, which the
    # bound would count on a busy machine: other tests cover the record behind.)
    seen: list[str | None] = []
    judge = ResilientJudge(
        SpinningJudge(),
        retry=RetryPolicy(attempt_timeout=600.0),
        on_attempt=lambda e: seen.append(e.error_type),
        processes=1,
    )
    worker = EvalWorker(judge, judging=JudgeOptions(evaluation_timeout=1.0, concurrency=1))
    workers.append(worker)
    got = Collected()
    assert worker.submit(record("spin"), got)
    assert worker.flush(WAIT)
    spin = got.by_answer["spin"]
    assert (spin.status, spin.error_type) == (EvalStatus.ERROR, errors.TIMEOUT)
    assert spin.explanation == "no answer within 1s"
    assert seen == [errors.TIMEOUT]
    assert worker.stats.timeouts == 1


def test_a_record_over_the_input_limit_is_skipped_before_any_judge_process(
    workers: list[EvalWorker],
) -> None:
    judge = ResilientJudge(SpinningJudge())
    worker = EvalWorker(
        judge,
        judging=JudgeOptions(evaluation_timeout=WAIT),
        bounds=BoundsOptions(max_input_chars=10),
    )
    workers.append(worker)
    got = Collected()
    assert worker.submit(record("spin " * 10), got)
    assert worker.submit(record("small"), got)
    assert worker.flush(WAIT)
    skipped = got.by_answer["spin " * 10]
    assert (skipped.status, skipped.error_type) == (EvalStatus.SKIPPED, errors.TOO_LARGE)
    assert got.by_answer["small"].status is EvalStatus.OK
    assert judge.stats.attempts == 1


async def test_a_lone_process_judge_makes_one_observed_attempt_per_record() -> None:
    # No fallback, no budget: each record is one attempt, which the child's end at the
    # attempt timeout or the caller's bound ends, and which the self-metrics see once.
    seen: list[str | None] = []
    judge = ResilientJudge(
        SpinningJudge(),
        retry=RetryPolicy(attempt_timeout=1.0),
        on_attempt=lambda e: seen.append(e.error_type),
    )
    patient = ResilientJudge(
        SpinningJudge(),
        retry=RetryPolicy(attempt_timeout=600.0),
        on_attempt=lambda e: seen.append(e.error_type),
    )
    try:
        ended = await judge.evaluate(record("spin"), ())
        small = await judge.evaluate(record("small"), ())
        cut = await call_judge(patient, record("spin"), (), timeout=1.0)
    finally:
        judge.close()
        patient.close()
    assert (ended.status, ended.error_type) == (EvalStatus.ERROR, errors.TIMEOUT)
    assert small.status is EvalStatus.OK
    assert (cut.status, cut.error_type) == (EvalStatus.ERROR, errors.TIMEOUT)
    assert seen == [errors.TIMEOUT, None, errors.TIMEOUT]
    assert (judge.stats.attempts, patient.stats.attempts) == (2, 1)


async def test_the_lexical_judge_gives_the_same_evaluation_in_a_process() -> None:
    rag = RagRecord(
        question="How long is the warranty?",
        contexts=(Context("Every kettle comes with a warranty of two years.", id="doc-1"),),
        answer="The kettle has a warranty of two years. It was designed on Mars in 1850.",
    )
    isolated = ProcessJudge(LexicalJudge(), timeout=30.0)
    try:
        in_process = await isolated.evaluate(rag, ("groundedness", "faithfulness"))
    finally:
        isolated.close()
    direct = await LexicalJudge().evaluate(rag, ("groundedness", "faithfulness"))
    assert in_process.metrics == direct.metrics
    assert in_process.claims == direct.claims
    assert isolated.running == 0


def test_a_cpu_bound_judge_defined_in_the_main_script_stays_on_the_worker_thread(
    workers: list[EvalWorker], caplog: pytest.LogCaptureFixture
) -> None:
    # A child process does not run the application's __main__, so it could not rebuild
    # such a judge: it is judged where it is, and a warning says why.
    MainScriptJudge = type("MainScriptJudge", (SpinningJudge,), {"__module__": "__main__"})
    worker = EvalWorker(MainScriptJudge(), judging=JudgeOptions(evaluation_timeout=30.0))
    workers.append(worker)
    got = Collected()
    worker.submit(record("small"), got)
    assert worker.flush(WAIT)
    assert got.by_answer["small"].explanation == f"pid {os.getpid()}"
    assert "defined in __main__" in caplog.text


def test_a_small_record_beside_a_runaway_one_finishes_when_the_judge_is_resilient(
    workers: list[EvalWorker],
) -> None:
    # What the processor builds by default: the judge inside a ResilientJudge, one child
    # process per concurrency slot, the whole evaluation bounded by the worker's timeout.
    judge = ResilientJudge(SpinningJudge(), processes=2)
    worker = EvalWorker(judge, judging=JudgeOptions(evaluation_timeout=10.0, concurrency=2))
    workers.append(worker)
    got = Collected()
    worker.submit(record("spin"), got)
    worker.submit(record("small"), got)
    assert worker.flush(WAIT)
    assert got.order == ["small", "spin"]
    assert got.by_answer["small"].status is EvalStatus.OK
    assert got.by_answer["spin"].error_type == errors.TIMEOUT


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_judge_process_and_the_parent_keeps_its_own(
    workers: list[EvalWorker],
) -> None:
    worker = EvalWorker(SpinningJudge(), judging=JudgeOptions(evaluation_timeout=30.0))
    workers.append(worker)
    parent = Collected()
    worker.submit(record("before fork"), parent)
    assert worker.flush(WAIT)

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked application process
        try:
            os.close(read_end)
            child = Collected()
            worker.submit(record("in child"), child)
            flushed = worker.flush(WAIT)
            explanation = child.by_answer["in child"].explanation if flushed else None
            os.write(write_end, json.dumps([flushed, explanation]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        flushed, explanation = json.loads(pipe.read() or b"[false, null]")
    os.waitpid(pid, 0)
    assert flushed
    judged_before = parent.by_answer["before fork"].explanation
    assert explanation not in (judged_before, f"pid {pid}", f"pid {os.getpid()}")
    worker.submit(record("after fork"), parent)
    assert worker.flush(WAIT)
    assert parent.by_answer["after fork"].explanation == judged_before


def test_a_judge_process_is_started_with_the_worker_before_the_first_record(
    workers: list[EvalWorker],
) -> None:
    judge = ProcessJudge(SpinningJudge(), timeout=30.0)
    try:
        # Started with the judge: the first evaluation does not wait for an interpreter.
        assert judge.running == 1
    finally:
        judge.close()
    assert judge.running == 0


async def test_a_caller_timeout_shorter_than_the_start_leaves_the_starting_process_alive() -> None:
    # A caller that gives up while the interpreter is still starting leaves no record in it:
    # the process must finish starting and serve the next record, not be killed and restarted
    # (with a timeout shorter than a start, no evaluation would ever run).
    judge = ProcessJudge(SpinningJudge(), processes=1)
    try:
        for _ in range(3):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(judge.evaluate(record("small"), ()), 0.001)
        # The one process started, not killed (idle, or still starting for the next record).
        (starting,) = judge._state["idle"] + judge._state["busy"]
        assert judge.running == 1
        first = await judge.evaluate(record("small"), ())
        second = await judge.evaluate(record("small"), ())
    finally:
        judge.close()
    assert first.status is EvalStatus.OK, first.explanation
    assert first.explanation == second.explanation == f"pid {starting.process.pid}"


async def test_judge_processes_run_at_the_configured_nice() -> None:
    judge = ResilientJudge(NiceReportingJudge(), processes=1, nice=3)
    try:
        evaluation = await judge.evaluate(record("small"), ())
    finally:
        judge.close()
    assert evaluation.explanation == f"nice {os.nice(0) + 3}"


async def test_judge_processes_run_at_the_application_priority_by_default() -> None:
    judge = ResilientJudge(NiceReportingJudge(), processes=1)
    try:
        evaluation = await judge.evaluate(record("small"), ())
    finally:
        judge.close()
    assert evaluation.explanation == f"nice {os.nice(0)}"


async def test_a_cascades_judge_processes_run_at_the_configured_nice() -> None:
    from ragpulse.judging.cascade import CascadeJudge

    cascade = CascadeJudge(NiceReportingJudge(), NiceReportingJudge(), nice=3)
    try:
        evaluation = await cascade.evaluate(record("small"), ())
    finally:
        cascade.close()
    assert evaluation.explanation == f"nice {os.nice(0) + 3}"
