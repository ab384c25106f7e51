"""A judge process's start-up is not judge time.

Starting a judge's process costs an interpreter and the judge's imports: seconds on a busy
host, more with a user's metric module that loads a model. A caller's bound on a record
(``ProcessJudge.start(..., whole=True)``, the worker's ``evaluation_timeout``) must not run
out while the record waits for a process to start; it counts from when one has started.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import pytest

from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, RagRecord
from ragpulse.judging import ProcessJudge

pytestmark = pytest.mark.integration

START_UP = 3.0  # seconds the judge's process takes to start
BOUND = 1.0  # the caller's bound on a record: a third of the start-up


class SlowToStartJudge:
    """A judge whose process takes ``START_UP`` seconds to start (rebuilding it there
    sleeps, as a heavy import would), then answers at once."""

    name = "slow-to-start"
    annotator_kind = "CODE"
    cpu_bound = True

    def __init__(self) -> None:
        self.start_up = START_UP  # state to rebuild: pickle then calls __setstate__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        time.sleep(self.start_up)

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        return Evaluation(status=EvalStatus.OK, metrics={}, judge=self.name)


async def test_a_records_bound_does_not_run_while_its_process_starts() -> None:
    judge = ProcessJudge(SlowToStartJudge(), processes=1, timeout=30.0)
    try:
        future = judge.start(
            RagRecord("When is support open?", (Context("9am to 5pm."),), "9am to 5pm."),
            (),
            BOUND,
            whole=True,
        )
        assert future is not None
        evaluation = await future
    finally:
        judge.close()
    assert evaluation.status is EvalStatus.OK, evaluation.explanation
