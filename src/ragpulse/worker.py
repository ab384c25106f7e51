"""Runs evaluations off the request path: ``EvalWorker``.

Built like OpenTelemetry's ``BatchProcessor``: a bounded deque that request
threads append to, one daemon thread that drains it, ``os.register_at_fork`` to
re-create that thread in a child process, and ``flush``/``shutdown`` with
timeouts. The thread runs an asyncio event loop so that many slow judge calls
(HTTP to an LLM) overlap within ``concurrency``.

The worker is the plain loop. Retries, the circuit breaker, the fallback judge
and the token budget belong to the judge (``ResilientJudge``); a judge that
declares ``cpu_bound = True`` runs in its own processes (``ProcessJudge``).

What the worker guarantees:

- ``submit`` never blocks and never raises; it returns False (the caller counts
  ``queue_full``) when the queue holds ``max_queue_size`` records or the records
  accepted and not yet completed hold ``max_queue_bytes``.
- Every accepted record gets exactly one ``callback(record, evaluation)`` on the
  worker thread, whatever the judge does (hangs, raises, returns garbage), unless
  ``shutdown`` ran out of time: records still queued or in flight then get no
  callback. The span processor forwards the spans it holds itself on shutdown.
- One evaluation takes at most ``timeout`` seconds of judge time; a record whose
  answer, contexts and reference exceed ``max_input_chars`` is not judged (status
  ``skipped``, error type ``too_large``).
- A CPU-bound judge runs in a child process that the timeout kills, so a small
  record waits behind a big one for at most ``timeout``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import context as otel_context

from ragpulse import errors
from ragpulse._guard import Guard
from ragpulse.adapters import unjudged_reason
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Contexts, Evaluation, RagRecord
from ragpulse.judges.base import Judge, call_judge, failed
from ragpulse.judges.running.process import ProcessJudge, isolate
from ragpulse.judges.running.resilient import ResilientJudge
from ragpulse.metrics import ALL_METRICS
from ragpulse.settings import Settings
from ragpulse.signals.make import SignalSpec

__all__ = [
    "DEFAULT_MAX_INPUT_CHARS",
    "DEFAULT_MAX_QUEUE_BYTES",
    "DEFAULT_MAX_QUEUE_SIZE",
    "Callback",
    "EvalWorker",
    "WorkerStats",
    "record_size",
]

_guard = Guard(__name__)

DEFAULT_MAX_QUEUE_SIZE = Settings.max_queue_size
"""Records accepted and not yet evaluated, at most."""
DEFAULT_MAX_QUEUE_BYTES = Settings.max_queue_bytes
"""Memory those records' texts may hold, at most (64 MiB)."""
DEFAULT_MAX_INPUT_CHARS = Settings.max_input_chars
"""Characters of answer, contexts and reference a judge is given at most."""

Callback = Callable[[RagRecord, Evaluation], None]

# A record's fixed cost beyond its texts: the record, its tuple of contexts, the deque slot.
_RECORD_OVERHEAD = 512

LINGER = 0.25
"""Seconds a record may wait for the worker's next look while records keep coming. A
request's thread then never wakes the worker (a system call, and a thread that takes the
GIL back as the request finishes), and each look starts many evaluations at once, which a
fast judge's process then takes as one batch: at 100 requests/s this took the application's
CPU per evaluation from 0.65 to 0.2-0.4 ms (``bench/pipeline_latency.py``, lean case).
Nothing waits on it: ``flush`` and ``shutdown`` wake the worker at once."""
IDLE_AFTER = 1.0
"""Seconds without a record after which the worker sleeps until the next one wakes it."""


def record_size(record: RagRecord) -> tuple[int, int]:
    """``(characters judged, bytes held)`` of a record: answer, contexts, reference, question.

    The characters are what ``max_input_chars`` bounds (the question is not counted:
    it is short, and a judge reads it only as a premise); the bytes are the strings'
    memory, what ``max_queue_bytes`` bounds. Linear in the number of contexts.
    """
    texts = [record.answer or "", record.reference or ""]
    contexts = record.contexts
    if isinstance(contexts, Contexts):
        texts.extend(contexts.texts())  # no Context made on the request's thread
    else:
        texts.extend(context.text for context in contexts)
    chars = sum(map(len, texts))
    held = sum(map(sys.getsizeof, texts)) + sys.getsizeof(record.question or "")
    return chars, held + _RECORD_OVERHEAD * (1 + len(record.contexts))


def close_in_background(close: Callable[[], object]) -> None:
    """Call a judge's ``close`` on a daemon thread, without waiting for it.

    Ending judge processes reaps each child, which on a loaded machine takes seconds
    (more while an abandoned evaluation still starts one); a shutdown that flushes spans
    within a grace must not spend it there. The children also end with this process.
    """

    def run() -> None:
        with _guard("ragpulse: could not end the judge's processes"):
            close()

    threading.Thread(target=run, name="ragpulse-judge-close", daemon=True).start()


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """A snapshot of the worker's counters since it started (or since a fork)."""

    submitted: int = 0
    """Records accepted by ``submit``."""
    completed: int = 0
    """Records whose evaluation finished (the callback was called)."""
    dropped: int = 0
    """Records refused by ``submit``: queue full (count or bytes) or worker shut down."""
    dropped_bytes: int = 0
    """Bytes of the records refused by ``submit``."""
    timeouts: int = 0
    """Evaluations that ended in a ``timeout``."""
    too_large: int = 0
    """Records not judged because their input exceeded ``max_input_chars``."""
    errors_by_type: Mapping[str, int] = field(default_factory=dict)
    """Completed evaluations with status ``error`` or ``skipped``, by error type."""


@dataclass(slots=True)
class _Item:
    seq: int
    record: RagRecord
    callback: Callback
    chars: int
    size: int


@dataclass(slots=True)
class _Started:
    """A record started straight in judge processes: its job there and its deadline."""

    item: _Item
    judge: ProcessJudge
    job: Any
    observe: Callable[[Evaluation], None] | None
    deadline: float
    """The event loop's time at which the worker's bound ends it (``inf``: the judge's
    processes keep the bound themselves)."""


class EvalWorker:
    """Evaluates ``RagRecord``s with a judge on one background thread.

    Args:
        judge: the judge (wrap an LLM judge in ``ResilientJudge`` for retries,
            a breaker, a fallback and a token budget).
        max_queue_size: records accepted and waiting for a concurrency slot.
        max_queue_bytes: memory of the records accepted and not yet completed.
        concurrency: evaluations in flight at once; for a judge in its own processes, the
            batches in flight (each as many records as about 50 ms of judging).
        timeout: seconds one evaluation may take, all of it: a ``ResilientJudge``
            fits its attempts, backoff and fallback into it (``time_left()``).
        max_input_chars: characters of answer + contexts + reference beyond which
            a record is ``skipped`` as ``too_large``.
        metrics: the metrics the judge is asked for.
        isolate_cpu_bound: run a judge declaring ``cpu_bound = True`` in child
            processes (up to ``concurrency``); False runs it on the worker thread.
    """

    def __init__(
        self,
        judge: Judge,
        *,
        max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        concurrency: int = Settings.concurrency,
        timeout: float | None = None,
        max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
        metrics: Collection[str] = ALL_METRICS,
        isolate_cpu_bound: bool = True,
    ) -> None:
        for name, value in (
            ("max_queue_size", max_queue_size),
            ("max_queue_bytes", max_queue_bytes),
            ("concurrency", concurrency),
            ("max_input_chars", max_input_chars),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value!r}")
        if timeout is None:
            # What the judge kind needs (a local model: its estimated cost), as configure().
            timeout = Settings().evaluation_timeout_for(judge)
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self._judge = judge
        # In a process, the timeout is the process's to enforce: it starts when the child
        # has the record, so neither waiting for a child nor starting one counts.
        self._runs = (
            isolate(judge, processes=concurrency, timeout=timeout) if isolate_cpu_bound else judge
        )
        self._call_timeout: float | None = None if self._runs is not judge else timeout
        self._timeout = timeout
        self._max_queue_size = max_queue_size
        self._max_queue_bytes = max_queue_bytes
        self._concurrency = concurrency
        self._max_input_chars = max_input_chars
        self._metrics = tuple(metrics)
        self._shutdown = False
        self._start()
        if hasattr(os, "register_at_fork"):
            # A weak reference, so the hook (which lives as long as the process) does not
            # keep a discarded worker alive.
            ref = weakref.WeakMethod(self._at_fork_reinit)
            os.register_at_fork(after_in_child=lambda: (m := ref()) is not None and m())

    # --- state that a forked child re-creates --------------------------------------

    def _start(self) -> None:
        # One lock guards the queue, the byte count, the outstanding set, the wake flag
        # and the counters. Request threads hold it only for an append and a few integer
        # updates; it is never held while calling the judge or a callback.
        self._lock = threading.Lock()
        self._completed_cond = threading.Condition(self._lock)
        self._queue: collections.deque[_Item] = collections.deque()
        self._bytes = 0
        self._seq = 0
        # Sequence numbers of accepted records not yet completed: flush(t) waits until
        # none at or below its call-time number is left.
        self._outstanding: set[int] = set()
        # True while a wake-up of the loop is already scheduled (or the loop is starting
        # and will drain anyway), so a burst of submits schedules one wake-up, not many.
        self._wake_pending = True
        self._last_submit = 0.0
        self._in_flight = 0
        self._abandoned = False
        self._counts = collections.Counter[str]()
        self._errors = collections.Counter[str]()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Records started straight in judge processes (``_start_direct``), by sequence
        # number: in the order they started, so the first has the earliest deadline.
        self._direct: dict[int, _Started] = {}
        self._direct_timer: asyncio.TimerHandle | None = None
        self._thread = threading.Thread(
            name="ragpulse-eval-worker", target=self._thread_main, daemon=True
        )
        self._thread.start()

    def _at_fork_reinit(self) -> None:
        # The parent's thread does not exist in the child, and its loop's selector and
        # locks are copies that may be in any state. Start over; records queued in the
        # parent stay the parent's to evaluate.
        if not self._shutdown:
            self._start()

    # --- the request side -------------------------------------------------------------

    def submit(self, record: RagRecord, callback: Callback) -> bool:
        """Queue ``record``; False (and nothing queued) when the queue is full or shut down.

        Never blocks and never raises. ``callback(record, evaluation)`` runs later, on
        the worker thread, between judge calls: keep it short (it should hand the
        result on, not do I/O); an exception in it is logged and swallowed.
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
                self._last_submit = time.monotonic()
                # While the loop polls (records came recently) it takes this one at its next
                # look, within LINGER: the request's thread makes no system call to wake it.
                wake = not self._wake_pending
                self._wake_pending = True
                loop, wakeup = self._loop, self._wakeup
            if wake and loop is not None and wakeup is not None:
                loop.call_soon_threadsafe(wakeup.set)
            return True
        except Exception:
            # The loop was closed under us (interpreter exit): the record stays queued
            # and unevaluated, which is what a dropped record is to the caller anyway.
            _guard.debug("submit failed", exc_info=True)
            return False

    def make_signals_for(self, spec: SignalSpec) -> None:
        """Have the judge's processes make each evaluation's signals for the sink ``spec``
        describes, where this worker's judge runs in processes of its own making: the
        callback then gets a ``PreparedEvaluation`` for an evaluation with claims."""
        if isinstance(self._runs, ProcessJudge) and self._runs is not self._judge:
            self._runs.make_signals_for(spec)
        elif isinstance(self._judge, ResilientJudge):
            self._judge.make_signals_for(spec)

    @property
    def judge(self) -> Judge:
        """The judge, as given."""
        return self._judge

    @property
    def queue_size(self) -> int:
        """Records waiting for a concurrency slot."""
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
            c = self._counts
            return WorkerStats(
                submitted=c["submitted"],
                completed=c["completed"],
                dropped=c["dropped"],
                dropped_bytes=c["dropped_bytes"],
                timeouts=self._errors[errors.TIMEOUT],
                too_large=self._errors[errors.TOO_LARGE],
                errors_by_type=dict(self._errors),
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record submitted before this call has completed.

        True when they all did within ``timeout`` seconds (``None``: no limit); False
        when it timed out with work in flight, or was called from a callback.
        """
        if threading.current_thread() is self._thread:
            return False  # from a callback: waiting for ourselves would never end
        with self._lock:
            loop, wakeup = (self._loop, self._wakeup) if self._queue else (None, None)
        if loop is not None and wakeup is not None:
            # Someone waits for the queued records: start them now, not at the next look.
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(wakeup.set)
        with self._lock:
            target = self._seq
            finished = self._completed_cond.wait_for(
                lambda: self._abandoned or not any(seq <= target for seq in self._outstanding),
                timeout,
            )
            return finished and not self._abandoned

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop accepting records and evaluate those already accepted, within ``timeout``.

        Past the timeout, records still queued or in flight are abandoned without a
        callback and ``shutdown`` returns. Judge processes this worker started end.
        Calling it again does nothing.
        """
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
            self._wake_pending = True
            loop, wakeup = self._loop, self._wakeup
        if loop is not None and wakeup is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(wakeup.set)
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
            if loop is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._abandon)
        if isinstance(self._runs, ProcessJudge) and self._runs is not self._judge:
            close_in_background(self._runs.close)

    # --- the worker thread ------------------------------------------------------------

    def _thread_main(self) -> None:
        # Judge calls (HTTP to an LLM) must not be traced: their spans would go through
        # ragpulse's own processor and could become evaluation units themselves.
        token = otel_context.attach(
            otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True)
        )
        loop = asyncio.new_event_loop()
        try:
            self._main_task = loop.create_task(self._run())
            loop.run_until_complete(self._main_task)
        except asyncio.CancelledError:
            pass  # shutdown timed out and abandoned the rest
        except Exception:
            _guard.exception("ragpulse worker loop failed")
        finally:
            try:
                for task in asyncio.all_tasks(loop):
                    task.cancel()
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                otel_context.detach(token)

    async def _run(self) -> None:
        wakeup = asyncio.Event()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._wakeup = wakeup
        slots = asyncio.Semaphore(self._concurrency)
        loop = asyncio.get_running_loop()
        while True:
            direct = self._direct_lane()
            if direct is not None:
                stopping, full = self._start_direct(*direct)
            else:
                stopping, full = await self._start_tasks(slots), False
            if stopping:
                # submit refuses once _shutdown is set: what is queued now is all there is.
                if self._tasks:
                    await asyncio.gather(*self._tasks, return_exceptions=True)
                if not self._direct:
                    return
            with self._lock:
                if self._queue and not full:
                    continue  # submitted since the queue was last looked at
                # Records came within IDLE_AFTER: look again within LINGER, unasked. Else
                # sleep until a submit wakes the loop (an idle process makes no wake-ups).
                polling = time.monotonic() - self._last_submit < IDLE_AFTER
                self._wake_pending = polling
            timer = loop.call_later(LINGER, wakeup.set) if polling else None
            await wakeup.wait()
            wakeup.clear()
            if timer is not None:
                timer.cancel()

    async def _start_tasks(self, slots: asyncio.Semaphore) -> bool:
        """Start a task per queued record as slots free up; whether the worker is stopping.

        Records are taken only as slots free up, so the ones waiting stay in the bounded
        deque (and in ``queue_size``) instead of piling up as tasks."""
        while True:
            await slots.acquire()
            with self._lock:
                item = self._queue.popleft() if self._queue else None
                if item is not None:
                    self._in_flight += 1
                stopping = self._shutdown
            if item is None:
                slots.release()
                return stopping
            task = asyncio.get_running_loop().create_task(self._evaluate_one(item))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(lambda _: slots.release())

    # --- records started straight in judge processes ------------------------------------

    def _direct_lane(self) -> tuple[ProcessJudge, Callable[[Evaluation], None] | None] | None:
        """The judge processes to start each record in without a task, and who is told of
        each attempt: when the judge runs there and nothing else happens per record (a
        ``ProcessJudge`` this worker made, or a ``ResilientJudge`` making one attempt per
        record); None otherwise."""
        runs = self._runs
        if isinstance(runs, ProcessJudge) and runs is not self._judge:
            return runs, None
        if isinstance(runs, ResilientJudge):
            attempts = runs.single_attempts()
            if attempts is not None:
                return attempts, runs.observe
        return None

    def _start_direct(
        self, judge: ProcessJudge, observe: Callable[[Evaluation], None] | None
    ) -> tuple[bool, bool]:
        """Start queued records in ``judge``'s processes, each finished by a callback on
        its future (no task, no coroutine per record): up to ``concurrency`` batches of the
        size the processes take now. ``(stopping with nothing queued, at that limit)``."""
        limit = self._concurrency * judge.batch_size
        loop = asyncio.get_running_loop()
        # The worker's bound, where the judge's processes do not keep it themselves.
        timeout = None if observe is None else self._timeout
        while True:
            with self._lock:
                full = self._in_flight >= limit
                item = self._queue.popleft() if self._queue and not full else None
                if item is not None:
                    self._in_flight += 1
                stopping = self._shutdown and not self._queue
            if item is None:
                return stopping, full
            skipped = self._unjudged(item)
            if skipped is not None:
                self._settle(item, skipped)
                continue
            job = judge.start(item.record, self._metrics)
            deadline = float("inf") if timeout is None else loop.time() + timeout
            self._direct[item.seq] = _Started(item, judge, job, observe, deadline)
            job.future.add_done_callback(functools.partial(self._direct_done, item.seq))
            if self._direct_timer is None and timeout is not None:
                self._direct_timer = loop.call_at(deadline, self._direct_overdue)

    def _direct_done(self, seq: int, future: asyncio.Future[Evaluation]) -> None:
        started = self._direct.pop(seq, None)
        if started is None or future.cancelled():
            return  # ended by the worker's bound, which settled it
        evaluation = future.result()
        if started.observe is not None:
            with _guard("ragpulse: a judge-attempt observer raised"):
                started.observe(evaluation)
        self._settle(started.item, evaluation)

    def _direct_overdue(self) -> None:
        """The worker's bound: records started straight in processes that are past it end
        with a ``timeout`` (their process is ended, as a cancelled evaluation's is)."""
        self._direct_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._direct:
            seq, started = next(iter(self._direct.items()))
            if started.deadline > now:
                self._direct_timer = loop.call_at(started.deadline, self._direct_overdue)
                return
            del self._direct[seq]
            started.judge.withdraw(started.job)
            started.job.future.cancel()
            begun = time.perf_counter() - self._timeout
            if started.observe is not None:
                cut = failed(started.judge, errors.TIMEOUT, "cut by the caller", started=begun)
                with _guard("ragpulse: a judge-attempt observer raised"):
                    started.observe(cut)
            explanation = f"no answer within {self._timeout:g}s"
            self._settle(
                started.item, failed(self._runs, errors.TIMEOUT, explanation, started=begun)
            )

    def _abandon(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._main_task is not None:
            self._main_task.cancel()

    async def _evaluate_one(self, item: _Item) -> None:
        evaluation: Evaluation | None = None
        try:
            evaluation = await self._evaluate(item)
        finally:
            # Also on cancellation (shutdown timed out), so flush waiters are released.
            self._settle(item, evaluation)

    def _settle(self, item: _Item, evaluation: Evaluation | None) -> None:
        """The record's one callback (none when abandoned, or ``evaluation`` is None: cut
        by a shutdown), then its bookkeeping."""
        completed = False
        try:
            if evaluation is not None and not self._abandoned:
                completed = True
                with _guard("ragpulse evaluation callback raised"):
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
                # A record may wait for the room this one made (records started straight in
                # processes have no semaphore to wake the loop), or a shutdown for the last.
                wake = bool(self._queue) or self._shutdown
                loop, wakeup = self._loop, self._wakeup
            if wake and loop is not None and wakeup is not None:
                wakeup.set()

    def _too_large(self, item: _Item) -> Evaluation:
        explanation = (
            f"{item.chars} characters of answer, contexts and reference; "
            f"the judge takes at most {self._max_input_chars}"
        )
        return replace(
            failed(self._judge, errors.TOO_LARGE, explanation), status=EvalStatus.SKIPPED
        )

    def _unjudged(self, item: _Item) -> Evaluation | None:
        """The skipped evaluation of a record the judge is not given; ``None``: judge it."""
        unjudged = unjudged_reason(item.record)
        if unjudged is not None:
            # An agent's answer with no evidence, or one read from part of its trace: the
            # unit says why it was not judged instead of vanishing.
            error_type, explanation = unjudged
            return replace(failed(self._judge, error_type, explanation), status=EvalStatus.SKIPPED)
        if item.chars > self._max_input_chars:
            return self._too_large(item)
        return None

    async def _evaluate(self, item: _Item) -> Evaluation:
        skipped = self._unjudged(item)
        if skipped is not None:
            return skipped
        try:
            return await call_judge(self._runs, item.record, self._metrics, self._call_timeout)
        except Exception as exc:
            # A bug of ours must still give the record its one evaluation.
            _guard.exception("ragpulse worker failed to evaluate a record")
            return failed(self._judge, type(exc).__name__, str(exc))
