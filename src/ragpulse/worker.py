"""Runs evaluations off the request path: ``EvalWorker``.

Built like OpenTelemetry's ``BatchProcessor``: a bounded deque that request threads
append to, one daemon thread that drains it (an asyncio loop, so slow judge calls
overlap), ``os.register_at_fork`` to re-create it in a child, ``flush``/``shutdown`` with
timeouts. It knows a judge only by its protocol (``ragpulse.judges.base``): retries, the
breaker, the fallback and the budget are the judge's (``ResilientJudge``); a judge
declaring ``cpu_bound = True`` runs in processes (``isolate``); one that takes records
many at a time has the optional ``start`` and keeps their bound; the others are awaited,
a task each, ``concurrency`` at once.

What the worker guarantees:

- ``submit`` never blocks or raises; it returns False (the caller counts ``queue_full``)
  when ``max_queue_size`` records wait or those not completed hold ``max_queue_bytes``.
- Every accepted record gets exactly one ``callback(record, evaluation)`` on the worker
  thread, whatever the judge does (hangs, raises, returns garbage), unless ``shutdown``
  ran out of time: records still queued or in flight then get none.
- One evaluation takes at most ``timeout`` seconds of judge time; a record whose answer,
  contexts and reference exceed ``max_input_chars`` is ``skipped`` (``too_large``).
- A CPU-bound judge runs in a child process that the timeout kills, so a small record
  waits behind a big one for at most ``timeout``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from opentelemetry import context as otel_context

from ragpulse import errors
from ragpulse._guard import Guard
from ragpulse.adapters import unjudged_reason
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Evaluation, RagRecord, record_size
from ragpulse.judges.base import Judge, StartsEvaluations, call_judge, failed
from ragpulse.judging.process import close_in_background, isolate
from ragpulse.settings import Settings
from ragpulse.settings.options import BoundsOptions, JudgeOptions, option_settings

__all__ = [
    "Callback",
    "EvalWorker",
    "WorkerStats",
    "record_size",
]

_guard = Guard(__name__)

Callback = Callable[[RagRecord, Evaluation], None]

LINGER = 0.25
"""Seconds a record may wait for the worker's next look while records keep coming: a
request's thread then makes no system call to wake it, and a look starts many records at
once (one batch for a judge's process). ``flush`` and ``shutdown`` wake it at once."""
IDLE_AFTER = 1.0
"""Seconds without a record after which the worker sleeps until the next one wakes it."""


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """A snapshot of the worker's counters since it started (or since a fork)."""

    submitted: int = 0  # records accepted by submit
    completed: int = 0  # records whose callback was called
    dropped: int = 0  # records refused by submit: queue full (count or bytes), or shut down
    dropped_bytes: int = 0  # bytes of the records refused
    timeouts: int = 0  # evaluations that ended in a timeout
    too_large: int = 0  # records not judged: their input exceeded max_input_chars
    # completed evaluations with status error or skipped, by error type
    errors_by_type: Mapping[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Item:
    seq: int
    record: RagRecord
    callback: Callback
    chars: int
    size: int


class EvalWorker:
    """Evaluates ``RagRecord``s with a judge on one background thread.

    Its bounds come as ``configure()``'s do: ``judging`` (``concurrency``, evaluations
    awaited at once, or the processes of a judge put in processes; ``evaluation_timeout``,
    all of one evaluation, ``time_left()`` inside) and ``bounds`` (``max_queue_size``,
    ``max_queue_bytes``, ``max_input_chars``), what they leave out read from the variables,
    else the defaults; or all at once as ``settings``. ``metrics``: what the judge is asked
    for. ``isolate_cpu_bound``: run a judge declaring ``cpu_bound = True`` in child processes.
    """

    def __init__(
        self,
        judge: Judge,
        *,
        judging: JudgeOptions | None = None,
        bounds: BoundsOptions | None = None,
        metrics: Collection[object] | str | None = None,
        isolate_cpu_bound: bool = True,
        settings: Settings | None = None,
    ) -> None:
        given = option_settings(judging, bounds)
        if settings is None:
            settings = Settings.load({"metrics": metrics, **given})
        elif given or metrics is not None:
            raise TypeError("EvalWorker: pass settings= or judging=, bounds= and metrics=")
        concurrency, timeout = settings.concurrency, settings.evaluation_timeout_for(judge)
        self._judge = judge
        self._runs = (
            isolate(judge, processes=concurrency, timeout=timeout) if isolate_cpu_bound else judge
        )
        # A judge that starts records itself keeps their bound; the others get it here.
        self._starts = self._runs.start if isinstance(self._runs, StartsEvaluations) else None
        self._timeout = timeout
        self._max_queue_size, self._max_queue_bytes = (
            settings.max_queue_size,
            settings.max_queue_bytes,
        )
        self._concurrency, self._max_input_chars = concurrency, settings.max_input_chars
        self._metrics = settings.metrics
        self._intakes: list[Callable[[], object]] = []
        self._shutdown = False
        self._start()
        if hasattr(os, "register_at_fork"):
            # Weak: the hook lives as long as the process, a discarded worker must not.
            ref = weakref.WeakMethod(self._at_fork_reinit)
            os.register_at_fork(after_in_child=lambda: (m := ref()) is not None and m())

    def _start(self) -> None:  # the state a forked child re-creates
        # One lock guards the queue, the byte count, the outstanding set, the wake flag and
        # the counters; never held while calling the judge or a callback.
        self._lock = threading.Lock()
        self._completed_cond = threading.Condition(self._lock)
        self._queue: collections.deque[_Item] = collections.deque()
        self._bytes = 0
        self._seq = 0
        # Accepted and not completed, by sequence number: what flush waits for.
        self._outstanding: set[int] = set()
        # True while the loop will look again unwoken: a burst of submits wakes it once.
        self._wake_pending = True
        self._last_submit = 0.0
        self._in_flight = 0
        self._started = 0  # of those in flight, the ones the judge started itself
        self._abandoned = False
        self._counts = collections.Counter[str]()
        self._errors = collections.Counter[str]()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(
            name="ragpulse-eval-worker", target=self._thread_main, daemon=True
        )
        self._thread.start()

    def _at_fork_reinit(self) -> None:
        # The parent's thread, loop and locks are of no use here; its records stay its own.
        if not self._shutdown:
            self._start()

    # --- the request side -------------------------------------------------------------

    def submit(self, record: RagRecord, callback: Callback) -> bool:
        """Queue ``record``; False (nothing queued) when the queue is full or shut down.

        Never blocks or raises. ``callback(record, evaluation)`` runs later on the worker
        thread: keep it short (hand the result on); an exception in it is logged.
        """
        try:
            chars, size = record_size(record)
            with self._lock:
                if (
                    self._shutdown
                    or len(self._queue) >= self._max_queue_size
                    or self._bytes + size > self._max_queue_bytes
                ):
                    self._counts["dropped"] += 1
                    self._counts["dropped_bytes"] += size
                    return False
                self._seq += 1
                self._queue.append(_Item(self._seq, record, callback, chars, size))
                self._bytes += size
                self._outstanding.add(self._seq)
                self._counts["submitted"] += 1
            self.nudge()
            return True
        except Exception:  # interpreter exit: to the caller, as a dropped record
            _guard.debug("submit failed", exc_info=True)
            return False

    def nudge(self) -> None:
        """Have the worker look within ``LINGER`` seconds: at once when it sleeps, else at
        its next look, without a system call on this thread. Never blocks or raises."""
        with self._lock:
            self._last_submit = time.monotonic()
            wake = not self._wake_pending
            self._wake_pending = True
        if wake:
            self._wake()

    def _wake(self) -> None:
        """Wake the loop from another thread (nothing when it ended, or never began)."""
        loop, wakeup = self._loop, self._wakeup
        if loop is not None and wakeup is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(wakeup.set)

    def add_intake(self, intake: Callable[[], object]) -> None:
        """Call ``intake()`` on the worker thread at each look, before records start."""
        self._intakes = [*self._intakes, intake]

    def remove_intake(self, intake: Callable[[], object]) -> None:
        """Stop calling ``intake``."""
        self._intakes = [i for i in self._intakes if i != intake]

    @property
    def judge(self) -> Judge:
        """The judge, as given."""
        return self._judge

    @property
    def queue_size(self) -> int:
        """Records waiting to start."""
        return len(self._queue)

    @property
    def queue_bytes(self) -> int:
        """Bytes held by the records accepted and not yet completed."""
        return self._bytes

    @property
    def in_flight(self) -> int:
        """Records being evaluated now."""
        return self._in_flight

    @property
    def stats(self) -> WorkerStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            c, e = self._counts, self._errors
            counts = (c["submitted"], c["completed"], c["dropped"], c["dropped_bytes"])
            return WorkerStats(*counts, e[errors.TIMEOUT], e[errors.TOO_LARGE], dict(e))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record submitted before this call has completed: True when
        they did within ``timeout`` (``None``: no limit); False on a timeout, or from a
        callback."""
        if threading.current_thread() is self._thread:
            return False  # from a callback: waiting for ourselves would never end
        if self._queue:
            self._wake()  # someone waits for them: start them now, not at the next look
        with self._lock:
            target = self._seq
            finished = self._completed_cond.wait_for(
                lambda: self._abandoned or not any(seq <= target for seq in self._outstanding),
                timeout,
            )
            return finished and not self._abandoned

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop accepting records and evaluate those accepted, within ``timeout``; past it
        the rest are abandoned without a callback. Judge processes this worker started end.
        Calling it again does nothing."""
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
            self._wake_pending = True
            loop = self._loop
        self._wake()
        if threading.current_thread() is self._thread:
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._lock:
                self._abandoned = True
                left = len(self._queue) + self._in_flight
                self._outstanding.clear()
                self._completed_cond.notify_all()
            _guard.warning("ragpulse worker shutdown timed out; %d evaluations abandoned", left)
            with contextlib.suppress(RuntimeError, AttributeError):  # no loop, or it ended
                loop.call_soon_threadsafe(self._abandon)  # type: ignore[union-attr]
        close = getattr(self._runs, "close", None)
        if self._runs is not self._judge and callable(close):
            close_in_background(close)  # the judge's processes this worker made

    # --- the worker thread ------------------------------------------------------------

    def _thread_main(self) -> None:
        # Judge calls (HTTP to an LLM) are not traced: their spans would come back to us.
        token = otel_context.attach(
            otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True)
        )
        loop = asyncio.new_event_loop()
        try:
            self._main_task = loop.create_task(self._run())
            with contextlib.suppress(asyncio.CancelledError):  # a shutdown abandoned the rest
                loop.run_until_complete(self._main_task)
        except Exception:
            _guard.exception("ragpulse worker loop failed")
        finally:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            with _guard("ragpulse: the worker loop did not close cleanly"):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            otel_context.detach(token)

    async def _run(self) -> None:
        wakeup = asyncio.Event()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._wakeup = wakeup
        loop = asyncio.get_running_loop()
        while True:
            for intake in self._intakes:
                with _guard("ragpulse: handing work to the evaluation worker failed"):
                    intake()
            full = self._start_queued()
            with self._lock:
                if self._shutdown and not self._queue and not self._in_flight:
                    return  # submit refuses once _shutdown is set: nothing more will come
                if self._queue and not full:
                    continue  # submitted since the queue was last looked at
                # Records came within IDLE_AFTER: look again within LINGER; else sleep until
                # woken (an idle process makes no wake-ups).
                polling = time.monotonic() - self._last_submit < IDLE_AFTER
                self._wake_pending = polling
            timer = loop.call_later(LINGER, wakeup.set) if polling else None
            await wakeup.wait()
            wakeup.clear()
            if timer is not None:
                timer.cancel()

    def _start_queued(self) -> bool:
        """Start queued records while there is room; whether records wait for room (they
        wait in the bounded deque, and in ``queue_size``, not as tasks or in the judge)."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                item = self._queue[0] if self._queue else None
            if item is None:
                return False
            skipped = self._unjudged(item)
            future, judged = None, skipped is None
            if judged and self._starts is not None:
                with _guard("ragpulse: a judge failed to start a record"):
                    future = self._starts(item.record, self._metrics, self._timeout)
                if future is None and self._started:
                    return True  # the judge has all it takes: one finishing makes room
            if judged and future is None and len(self._tasks) >= self._concurrency:
                return True
            with self._lock:
                self._queue.popleft()
                self._in_flight += 1
                if future is not None:
                    self._started += 1
            if skipped is not None:
                self._settle(item, skipped)
            elif future is not None:
                future.add_done_callback(functools.partial(self._started_done, item))
            else:
                self._tasks.add(loop.create_task(self._evaluate_one(item)))

    def _started_done(self, item: _Item, future: asyncio.Future[Evaluation]) -> None:
        with self._lock:
            self._started -= 1
        evaluation = None if future.cancelled() else future.result()
        self._settle(item, evaluation)

    def _abandon(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._main_task is not None:
            self._main_task.cancel()

    async def _evaluate_one(self, item: _Item) -> None:
        # A judge this worker put in processes keeps the bound there: from when a child has
        # the record, so neither waiting for a child nor starting one counts.
        timeout = None if self._runs is not self._judge else self._timeout
        evaluation: Evaluation | None = None
        try:
            evaluation = await call_judge(self._runs, item.record, self._metrics, timeout)
        except Exception as exc:
            # A bug of ours must still give the record its one evaluation.
            _guard.exception("ragpulse worker failed to evaluate a record")
            evaluation = failed(self._judge, type(exc).__name__, str(exc))
        finally:
            # Also on cancellation (shutdown timed out), so flush waiters are released. Its
            # room is free before the loop (which _settle may wake) looks again.
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]
            self._settle(item, evaluation)

    def _settle(self, item: _Item, evaluation: Evaluation | None) -> None:
        """The record's one callback (none when abandoned or cut), then its bookkeeping."""
        completed = evaluation is not None and not self._abandoned
        try:
            with _guard("ragpulse evaluation callback raised"):
                if completed and evaluation is not None:
                    item.callback(item.record, evaluation)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._bytes -= item.size
                self._outstanding.discard(item.seq)
                if completed and evaluation is not None:
                    self._counts["completed"] += 1
                    if evaluation.status in (EvalStatus.ERROR, EvalStatus.SKIPPED):
                        self._errors[evaluation.error_type or errors.UNEXPECTED] += 1
                self._completed_cond.notify_all()
                # For a record waiting for the room this one made, or a shutdown for the last.
                wake = self._wakeup if self._queue or self._shutdown else None
            if wake is not None:
                wake.set()

    def _unjudged(self, item: _Item) -> Evaluation | None:
        """The skipped evaluation of a record the judge is not given: an agent's answer with
        no evidence, or read from part of its trace (the unit says why), or too large."""
        unjudged = unjudged_reason(item.record)
        limit = self._max_input_chars
        if unjudged is None and item.chars > limit:
            what = f"{item.chars} characters of answer, contexts and reference"
            unjudged = errors.TOO_LARGE, f"{what}; the judge takes at most {limit}"
        skipped = None if unjudged is None else failed(self._judge, *unjudged)
        return None if skipped is None else replace(skipped, status=EvalStatus.SKIPPED)
