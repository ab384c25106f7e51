"""Each user metric behind its own time bound and failure boundary.

A user's metric is code ragpulse does not control: it may hang (in a loop, a sleep, an
``await`` that never returns), call ``sys.exit`` or ``os._exit``, or print. Whatever it
does, it fails alone, as an ``error`` of that metric (``metric_failed``), and the other
metrics of the record are written. Where it runs decides what can be contained:

- A function metric of an importable module runs in a process of its own (a
  ``ProcessJudge`` of one child, started with the judge that measures it, ``start``): past
  its ``timeout`` the process is killed and the next record starts a fresh one; ``os._exit``
  or a crash ends that process only; what it prints goes to stderr, never to the caller's
  stdout (which may be ``ragpulse eval``'s JSONL). One record costs a pickled record and a
  pipe's round trip (``bench/metric_isolation.py``). The process's start-up (an interpreter,
  the module's imports) is not the metric's time: a record waits for it only within what is
  left of its evaluation, and when that is not enough the metric fails alone for that record
  while the process goes on starting, warm for the next ones.
- A function metric of the ``__main__`` script cannot be imported by another interpreter,
  so it runs in the calling process: a sync one on a thread of its own (past its bound the
  thread is abandoned, still running; the evaluation goes on), an async one on the loop,
  cancelled at its bound. ``sys.exit`` is caught; ``os._exit`` ends the process, which only
  a module of its own can prevent.
- Any other metric (``RubricMetric``: one network call, ragpulse's own code) runs on the
  loop, cancelled at its bound.

A metric's bound is its own ``timeout``, cut to what is left of the evaluation's bound
(``time_left()``) when it has one, so a slow metric never takes the evaluation down.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ragpulse import errors
from ragpulse.evaluation.types import EvalStatus, Evaluation, MetricResult, RagRecord, Usage
from ragpulse.metrics._spec import DEFAULT_METRIC_TIMEOUT

if TYPE_CHECKING:
    from ragpulse.judging.process import ProcessJudge
    from ragpulse.metrics._spec import Metric

__all__ = ["DEFAULT_METRIC_TIMEOUT", "MetricBoundary", "measure_safely"]

"""Seconds a user's function metric may take on one record (``@metric(timeout=...)``)."""

_NO_TIME_LEFT = "no time was left in the evaluation's bound"

_MARGIN = 0.05
"""Seconds (at most a twentieth of what is left) a metric ends before its evaluation's
bound, so the evaluation returns the metric's failure instead of being cut off."""


class _Measurable(Protocol):
    """What a boundary needs of a metric (``CustomMetric``)."""

    @property
    def spec(self) -> Metric: ...

    def measure(self, record: RagRecord) -> Awaitable[tuple[MetricResult, Usage]]: ...


def failure(name: str, why: str) -> tuple[MetricResult, Usage]:
    """An ``error`` result of the metric ``name`` saying why."""
    return MetricResult(name, None, f"{name} failed: {why}", EvalStatus.ERROR), Usage()


async def measure_safely(metric: _Measurable, record: RagRecord) -> tuple[MetricResult, Usage]:
    """The metric's result, or an ``error`` result saying why; never raises (nor exits)."""
    name = metric.spec.name
    try:
        return await metric.measure(record)
    except asyncio.CancelledError:
        raise
    except SystemExit as exc:  # a metric must not end the evaluating process
        return failure(name, f"it called sys.exit({exc.code!r})")
    except Exception as exc:
        return failure(name, f"{type(exc).__name__}: {exc}")


class _OneMetric:
    """The judge a metric's own process runs: it measures that one metric."""

    annotator_kind = "CODE"

    def __init__(self, metric: _Measurable) -> None:
        self.metric = metric
        self.name: str = metric.spec.name

    async def evaluate(self, record: RagRecord, metrics: object) -> Evaluation:
        """The metric's result as an evaluation of its own."""
        result, usage = await measure_safely(self.metric, record)
        return Evaluation(EvalStatus.OK, {self.name: result}, judge=self.name, usage=usage)


def in_main_script(metric: object) -> bool:
    """True for a function metric defined in the ``__main__`` script."""
    function = getattr(metric, "function", None)
    return getattr(function, "__module__", None) == "__main__"


def _bound(timeout: float) -> float:
    """``timeout``, cut to what is left of the evaluation's bound (a little before it)."""
    # Imported here: the judges package imports the metrics registry.
    from ragpulse.judges.base import time_left

    left = time_left()
    if left is None:
        return timeout
    return max(0.0, min(timeout, left - min(_MARGIN, left / 20)))


class MetricBoundary:
    """Measures one user metric under its time bound, where a failure stays its own.

    ``measure`` never raises: a metric that raises, exits, hangs past its bound or whose
    process dies gives an ``error`` result of that metric saying why.
    """

    def __init__(self, metric: _Measurable, *, nice: int = 0) -> None:
        self.metric = metric
        self.name = metric.spec.name
        timeout = getattr(metric, "timeout", DEFAULT_METRIC_TIMEOUT)
        self.timeout: float = float(timeout) if timeout else DEFAULT_METRIC_TIMEOUT
        self._nice = nice
        self._process: ProcessJudge | None = None
        function = getattr(metric, "function", None)
        self.isolated = function is not None and not in_main_script(metric)
        """True when the metric runs in a process of its own."""

    async def measure(self, record: RagRecord) -> tuple[MetricResult, Usage]:
        """The metric's result for ``record``, or an ``error`` result saying why."""
        if self.isolated:
            return await self._in_process(record)
        bound = _bound(self.timeout)
        if bound <= 0.0:
            return failure(self.name, _NO_TIME_LEFT)
        function = getattr(self.metric, "function", None)
        if function is not None and not inspect.iscoroutinefunction(function):
            return await self._on_thread(record, function, bound)
        try:
            return await asyncio.wait_for(measure_safely(self.metric, record), bound)
        except asyncio.TimeoutError:
            return failure(self.name, f"no answer within {bound:g}s")

    def start(self) -> None:
        """Start the metric's process now, if it runs in one: its start-up is then no
        record's time."""
        if self.isolated:
            self._the_process()

    async def _in_process(self, record: RagRecord) -> tuple[MetricResult, Usage]:
        from ragpulse.judges.base import call_judge
        from ragpulse.judging.process import START_TIMEOUT

        process = self._the_process()
        # A start-up (a cold one, or after a hang ended the process) is waited for only
        # within what is left of the evaluation; past that the process goes on starting.
        waiting = time.monotonic()
        if not await process.wait_ready(max(0.0, _bound(START_TIMEOUT))):
            waited = time.monotonic() - waiting
            return failure(
                self.name,
                f"its process was still starting after {waited:.3g}s (not counted as the "
                "metric's time; it goes on starting for the next records)",
            )
        bound = _bound(self.timeout)
        if bound <= 0.0:
            return failure(self.name, _NO_TIME_LEFT)
        # The process's own timeout (from when it has the record) ends a hang; the call's
        # bound covers the wait for the process too, when the evaluation has a bound.
        outer = None if bound >= self.timeout else bound
        evaluation = await call_judge(process, record, (self.name,), outer)
        result = evaluation.metrics.get(self.name)
        if evaluation.status is not EvalStatus.ERROR and result is not None:
            return result, evaluation.usage
        if evaluation.error_type == errors.TIMEOUT:
            return failure(self.name, f"no answer within {bound:g}s; its process was ended")
        why = (evaluation.explanation or evaluation.error_type or "no result").replace(
            "the judge process", "its process"
        )
        return failure(self.name, why)

    def _the_process(self) -> ProcessJudge:
        if self._process is None:
            # Imported here: the judges package imports the metrics registry.
            from ragpulse.judging.process import ProcessJudge

            self._process = ProcessJudge(
                _OneMetric(self.metric),  # type: ignore[arg-type]
                processes=1,
                timeout=self.timeout,
                nice=self._nice,
            )
        return self._process

    async def _on_thread(
        self, record: RagRecord, function: Callable[[RagRecord], Any], bound: float
    ) -> tuple[MetricResult, Usage]:
        # A thread of its own, not the loop's executor: a hung metric keeps its thread, and
        # asyncio.run() waits for the executor's threads before it returns.
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[MetricResult, Usage]] = loop.create_future()

        def run() -> None:
            outcome = asyncio.run(measure_safely(self.metric, record))
            loop.call_soon_threadsafe(_settle, done, outcome)

        thread = threading.Thread(target=run, name=f"ragpulse-metric-{self.name}", daemon=True)
        started = time.monotonic()
        thread.start()
        try:
            return await asyncio.wait_for(done, bound)
        except asyncio.TimeoutError:
            waited = time.monotonic() - started
            return failure(self.name, f"no answer within {waited:.3g}s; its thread is left behind")

    def close(self) -> None:
        """End the metric's process, if it has one."""
        process, self._process = self._process, None
        if process is not None:
            process.close()


def _settle(
    future: asyncio.Future[tuple[MetricResult, Usage]], outcome: tuple[MetricResult, Usage]
) -> None:
    if not future.done():
        future.set_result(outcome)
