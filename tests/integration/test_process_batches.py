"""Records that reach a judge's process together travel as one batch, and stay separate.

A fast judge's records go to its process many to a message (one write and one wake-up
each way, instead of one per record). What a batch must never do: give one record
another's evaluation, or let one record's trouble (a runaway computation, a crash, a
caller that gives up on it) cost the others their evaluation.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Collection
from pathlib import Path

import pytest

from ragpulse import errors
from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, RagRecord
from ragpulse.judging import ProcessJudge


class EchoJudge:
    """Echoes the answer and its pid; spins on "spin", sleeps on "slow" (5 s) and "nap"
    (0.5 s), dies on "die", and on "meet" waits for the other record of a pair."""

    name = "echo"
    annotator_kind = "CODE"
    cpu_bound = True

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        answer = record.answer or ""
        if answer == "spin":
            n = 0
            while True:  # no await: only ending the process stops this
                n += 1
        if answer == "slow":
            time.sleep(5.0)
        if answer.startswith("nap"):
            time.sleep(0.5)
        if answer == "die":
            os._exit(3)
        if answer.startswith("meet "):
            answer = _meet(answer)
        return Evaluation(
            status=EvalStatus.OK,
            metrics={},
            judge=self.name,
            annotator_kind="CODE",
            explanation=f"{answer}|{os.getpid()}",
        )


def _meet(answer: str) -> str:
    """ "meet NAME DIR": mark NAME as started in DIR, then wait (bounded) for the other name."""
    _, name, directory = answer.split(" ", 2)
    other = {"a": "b", "b": "a"}[name]
    Path(directory, name).touch()
    deadline = time.monotonic() + 300.0
    while not Path(directory, other).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return f"met {name}" if Path(directory, other).exists() else f"alone {name}"


def record(answer: str) -> RagRecord:
    return RagRecord(question="q", contexts=(Context("c"),), answer=answer)


@pytest.fixture
async def judge() -> AsyncIterator[ProcessJudge]:
    made = ProcessJudge(EchoJudge(), processes=1, timeout=3.0)
    # One record first: the judge's time per record is then known, and the next records
    # started together go as one batch.
    first = await made.evaluate(record("first"), ())
    assert first.status is EvalStatus.OK, first.explanation
    yield made
    made.close()


async def test_records_started_together_each_get_their_own_evaluation(
    judge: ProcessJudge,
) -> None:
    answers = [f"record {n}" for n in range(40)]
    results = await asyncio.gather(*(judge.evaluate(record(a), ()) for a in answers))
    got = [(r.explanation or "").split("|")[0] for r in results]
    assert got == answers
    assert len({(r.explanation or "").split("|")[1] for r in results}) == 1  # one process


async def test_a_runaway_record_in_a_batch_fails_alone(judge: ProcessJudge) -> None:
    before, runaway, after = await asyncio.gather(
        judge.evaluate(record("before"), ()),
        judge.evaluate(record("spin"), ()),
        judge.evaluate(record("after"), ()),
    )
    assert (runaway.status, runaway.error_type) == (EvalStatus.ERROR, errors.TIMEOUT)
    assert before.status is after.status is EvalStatus.OK
    assert (before.explanation or "").startswith("before|")
    assert (after.explanation or "").startswith("after|")


async def test_a_record_that_ends_its_process_fails_alone(judge: ProcessJudge) -> None:
    before, dying, after = await asyncio.gather(
        judge.evaluate(record("before"), ()),
        judge.evaluate(record("die"), ()),
        judge.evaluate(record("after"), ()),
    )
    assert (dying.status, dying.error_type) == (EvalStatus.ERROR, errors.UNEXPECTED)
    assert "the judge process ended" in (dying.explanation or "")
    assert (before.explanation or "").startswith("before|")
    assert (after.explanation or "").startswith("after|")


async def test_a_caller_giving_up_on_one_record_leaves_the_others_evaluated(
    judge: ProcessJudge,
) -> None:
    async def given_up() -> Evaluation:
        return await asyncio.wait_for(judge.evaluate(record("slow"), ()), 0.5)

    results = await asyncio.gather(
        judge.evaluate(record("before"), ()),
        given_up(),
        judge.evaluate(record("after"), ()),
        return_exceptions=True,
    )
    before, slow, after = results
    assert isinstance(slow, TimeoutError)
    assert isinstance(before, Evaluation) and isinstance(after, Evaluation)
    assert (before.explanation or "").startswith("before|")
    assert (after.explanation or "").startswith("after|")
    # The process that had the record given up on was ended; the next record gets a new one.
    again = await judge.evaluate(record("again"), ())
    assert again.status is EvalStatus.OK
    assert judge.running == 1


async def test_records_that_take_a_while_are_judged_side_by_side(tmp_path: Path) -> None:
    # A batch is about BATCH_SECONDS of judging: records that take longer each go to a
    # process of their own, so batching costs a slow judge no parallelism.
    judge = ProcessJudge(EchoJudge(), processes=2, timeout=600.0)
    try:
        # The second process starts here, while the first naps; both are idle after, and
        # the judge is known to take half a second a record.
        naps = [judge.evaluate(record(f"nap {n}"), ()) for n in range(2)]
        await asyncio.gather(*naps)
        # A child interpreter can take seconds to start on a busy machine: wait for it,
        # within a bound, rather than for the naps alone.
        deadline = time.monotonic() + 60.0
        while judge.running < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert judge.running == 2
        # Each of the two waits until the other has started: they can only both finish by
        # running at once, however slowly the machine runs them.
        both = await asyncio.gather(
            judge.evaluate(record(f"meet a {tmp_path}"), ()),
            judge.evaluate(record(f"meet b {tmp_path}"), ()),
        )
    finally:
        judge.close()
    assert [(r.explanation or "").split("|")[0] for r in both] == ["met a", "met b"]
    assert len({(r.explanation or "").split("|")[1] for r in both}) == 2
