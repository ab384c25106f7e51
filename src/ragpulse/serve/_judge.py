"""The judge of ``ragpulse serve``: its processes start with the first evaluation, not before.

In an application a judge process starts with ``configure()`` so the first
evaluation does not wait for an interpreter. A relay often evaluates nothing (a
sample rate of 0, where only a forced unit is judged): there the idle process
(~40 MB) is not worth its memory, so a CPU-bound judge is put in its processes
on the first record it is given.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.judges.base import Judge, is_cpu_bound
from ragpulse.judges.process import ProcessJudge, isolate
from ragpulse.judges.resilient import ResilientJudge, RetryPolicy


class DeferredProcessJudge:
    """A CPU-bound ``judge`` run in ``ProcessJudge`` processes started on first use."""

    cpu_bound = True

    def __init__(self, judge: Judge, *, processes: int, timeout: float | None) -> None:
        self.name = judge.name
        self.annotator_kind = judge.annotator_kind
        self._judge = judge
        self._processes = processes
        self._timeout = timeout
        self._run: Judge | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        """Whether its processes were asked for (a record was evaluated)."""
        return self._run is not None

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        run = self._run
        if run is None:
            with self._lock:
                if self._run is None:
                    self._run = isolate(
                        self._judge, processes=self._processes, timeout=self._timeout
                    )
                run = self._run
        return await run.evaluate(record, metrics)

    def close(self) -> None:
        """End its processes, if any started."""
        with self._lock:
            if isinstance(self._run, ProcessJudge):
                self._run.close()


def serve_judge(judge: Judge, *, processes: int) -> tuple[Judge, DeferredProcessJudge | None]:
    """``judge`` made resilient, its processes deferred; and the part to close at the end.

    As the processor would wrap it (retries, breaker, token budget), except that a
    CPU-bound judge's processes start with its first evaluation.
    """
    if isinstance(judge, ResilientJudge) or not is_cpu_bound(judge):
        return judge, None
    deferred = DeferredProcessJudge(
        judge, processes=processes, timeout=RetryPolicy().attempt_timeout
    )
    resilient = ResilientJudge(deferred, processes=processes, isolate_cpu_bound=False)
    return resilient, deferred
