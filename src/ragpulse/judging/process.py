"""``ProcessJudge``: run a CPU-bound judge in separate processes.

A judge that computes (``LexicalJudge``) holds the GIL while it works; on the
worker thread of an application process it slows every request thread, and an
``asyncio`` timeout cannot interrupt it. ``ProcessJudge`` runs it in child
processes instead: the application keeps the GIL, the children run at a lower
scheduling priority, and when a caller's timeout cancels an evaluation the child
doing it is killed and replaced, so a runaway evaluation ends on time and the next
record starts on a fresh process.

The children are plain interpreters started with ``python -c`` (not
``multiprocessing``): nothing of the application is imported or re-run in them,
and a ``fork`` of a threaded process is never made. One starts with the
``ProcessJudge`` (and again in a forked copy of the application), so the first
evaluation does not wait for an interpreter; more start on demand, up to
``processes`` at once. They end when the ``ProcessJudge`` is closed, garbage
collected, or its process exits, however it exits (``SIGKILL`` included): a child busy with a
record that hangs does not outlive it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import pickle
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from multiprocessing import spawn
from multiprocessing.connection import Connection

from ragpulse import errors
from ragpulse._guard import Guard
from ragpulse._secrets import known_secrets
from ragpulse.capture._content import ContentPolicy, get_policy
from ragpulse.evaluation.types import AnnotatorKind, Evaluation, RagRecord
from ragpulse.judges.base import Contradiction, Judge, failed, is_cpu_bound, time_left
from ragpulse.judging._wire import (
    ANSWERS,
    BATCH,
    SETTINGS,
    WireError,
    decode_evaluation,
    encode_record,
)
from ragpulse.signals.make import SignalSpec, portable_policy

__all__ = [
    "DEFAULT_NICE",
    "START_TIMEOUT",
    "ProcessJudge",
    "close_in_background",
    "isolate",
]

_guard = Guard(__name__)

DEFAULT_NICE = 0
"""How much lower than the application the judge processes are scheduled (``nice``):
``Settings.judge_nice``'s default. At 10 a busy host starved the judge to a fifth of
its throughput and most sampled evaluations were dropped."""
BATCH_SECONDS = 0.05
"""Judge time a batch of records sent to one process together is sized for, from the
judge's recent time per record: a fast judge's records travel many to a message (one
write and one wake-up each way), a slow one's one by one."""
MAX_BATCH = 32
"""Records in one batch at most."""
START_TIMEOUT = 60.0
"""Seconds a judge process may take to start (an interpreter and the judge's imports)."""

_CHILD_CODE = "import sys; from ragpulse.judging._child import main; main(*map(int, sys.argv[1:]))"


class _Child:
    """One judge process and the two pipes to it."""

    def __init__(self, judge: Judge, nice: int) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ)
        # The child must import what the parent can (ragpulse, a user's judge class).
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            self.process = subprocess.Popen(
                [
                    spawn.get_executable(),
                    "-c",
                    _CHILD_CODE,
                    str(to_child_r),
                    str(from_child_w),
                    str(nice),
                    # It ends when this process ends (ragpulse.judging._lifeline);
                    # the kernel's signal only when this thread lives as long as the process.
                    str(os.getpid()),
                    str(int(threading.current_thread() is threading.main_thread())),
                ],
                pass_fds=(to_child_r, from_child_w),
                env=env,
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.outbox = Connection(to_child_w, readable=False)
        self.inbox = Connection(from_child_r, writable=False)
        self.started_at = time.monotonic()
        self.ready = False
        self.starting_for: _Lane | None = None
        """The lane waiting for this process to start, while it does."""
        self.jobs: list[_Job] = []
        """The batch it has, in order."""
        self.lane: _Lane | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.bound: float | None = None
        """The judge time its batch may take (the least of its records' timeouts)."""
        self.sent_at = 0.0
        self._kill_lock = threading.Lock()
        self._killed = False
        self.settings: _Settings | None = None
        """The signal settings this child has (it starts with none)."""
        try:
            self.outbox.send(judge)
        except BaseException:
            self.kill()  # the child could not be given its judge: do not leave it behind
            raise

    def forget(self) -> None:
        """Close our ends of the pipes without ending the process (a forked copy's duty)."""
        self.outbox.close()
        self.inbox.close()

    def kill(self) -> None:
        """End the process now and release its pipes; once, whichever thread asks first
        (the pool's ``close`` and the event loop that waited on it may both)."""
        with self._kill_lock:
            if self._killed:
                return
            self._killed = True
        try:
            self.process.kill()
            self.process.wait(timeout=5.0)
        except (OSError, subprocess.TimeoutExpired):
            _guard.warning("a judge process did not end after SIGKILL")
        for pipe in (self.outbox, self.inbox):
            with contextlib.suppress(OSError):
                pipe.close()


class ProcessJudge:
    """Runs ``judge`` in up to ``processes`` child processes; implements ``Judge``.

    Each evaluation takes an idle child (starting one when fewer than ``processes``
    run), sends it the record, and waits for the result without blocking the event
    loop. When the child has not answered ``timeout`` seconds after it received the
    record (the wait for a free child and a child's start-up do not count), or when
    the caller cancels the wait (its own timeout), that child is killed and the next
    evaluation starts a new one; the former gives a ``timeout`` error evaluation. A
    child that dies gives an ``unexpected`` one. Evaluations beyond ``processes``
    wait for a free child.

    The record is sent as a tuple of builtins, without its span context (judges do
    not need it); the judge object is sent once per child, so it must be picklable.
    An owner whose results go straight to a sink (a ``ResilientJudge`` that a span
    processor built) may ask, with ``make_signals_for``, for each evaluation's signals to be made in
    the child (``ragpulse.signals.make``): an evaluation with claims then comes back as
    a ``PreparedEvaluation``, its signals made and its claims left in the child.
    """

    def __init__(
        self,
        judge: Judge,
        *,
        processes: int = 1,
        timeout: float | None = None,
        nice: int = DEFAULT_NICE,
    ) -> None:
        if processes < 1:
            raise ValueError(f"processes must be at least 1, got {processes!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.timeout = timeout
        self.judge = judge
        self.name: str = judge.name
        self.annotator_kind: AnnotatorKind = judge.annotator_kind
        self.processes = processes
        self._nice = nice
        self._spec: SignalSpec | None = None
        self._spec_refused = False
        self._settings: _Settings | None = None
        self._reset()
        self._finalizer = weakref.finalize(self, ProcessJudge._kill_all, self._state)
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._after_fork_in_child)
            os.register_at_fork(after_in_child=lambda: (m := ref()) is not None and m())
        self._prestart()

    def _prestart(self) -> None:
        # One child starts now, while the application starts, so the first evaluation does
        # not wait for an interpreter and the judge's imports.
        with self._lock:
            if self._closed or self._started:
                return
            self._started += 1
        try:
            child = _Child(self.judge, self._nice)
        except Exception:
            with self._lock:
                self._started -= 1
            _guard.warning("could not start a judge process", exc_info=True)
            return
        with self._lock:
            self._state["idle"].append(child)

    def _reset(self) -> None:
        # The lock guards the idle children, the count and the waiters; it is never held
        # while talking to a child.
        self._lock = threading.Lock()
        self._state: dict[str, list[_Child]] = {"idle": [], "busy": []}
        self._started = 0
        self._waiters: collections.deque[_Lane] = collections.deque()
        # Per event loop that evaluates (a worker's thread; a test's asyncio.run): only
        # that loop's thread touches its lane.
        self._lanes: dict[asyncio.AbstractEventLoop, _Lane] = {}
        self._per_record: float | None = None
        """Recent seconds of judge time per record (a moving average): sizes batches."""
        self._closed = False

    def _after_fork_in_child(self) -> None:
        # The parent's children are not ours to use or kill: close our copies of their
        # pipes (so they still see the parent's end when it goes) and start over.
        self._finalizer.detach()
        for child in self._state["idle"] + self._state["busy"]:
            with contextlib.suppress(OSError):
                child.forget()
        self._reset()
        self._finalizer = weakref.finalize(self, ProcessJudge._kill_all, self._state)
        self._prestart()

    @staticmethod
    def _kill_all(state: dict[str, list[_Child]]) -> None:
        for child in state["idle"] + state["busy"]:
            child.kill()
        state["idle"].clear()
        state["busy"].clear()

    def ready(self) -> bool:
        """Whether a process has started (its interpreter and the judge's imports are done):
        a record sent now waits for no start-up. Asking starts a process when none runs,
        and ends one that has not started within ``START_TIMEOUT``."""
        self._prestart()
        stuck: list[_Child] = []
        try:
            with self._lock:
                if any(child.ready for child in self._state["idle"] + self._state["busy"]):
                    return True
                # A process started ahead of use said "ready" to nobody yet: read it here.
                for child in list(self._state["idle"]):
                    heard = _heard_ready(child)
                    if heard:
                        child.ready = True
                        return True
                    if heard is False or time.monotonic() - child.started_at > START_TIMEOUT:
                        self._state["idle"].remove(child)
                        self._started -= 1
                        stuck.append(child)
                return False
        finally:
            for child in stuck:
                _guard.warning("a judge process did not start within %gs", START_TIMEOUT)
                child.kill()

    async def wait_ready(self, timeout: float) -> bool:
        """``ready``, waiting for it at most ``timeout`` seconds (the start goes on after)."""
        deadline = time.monotonic() + timeout
        while not self.ready():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(_READY_LOOK_EVERY, left))
        return True

    @property
    def running(self) -> int:
        """Child processes alive now (idle or busy)."""
        with self._lock:
            return self._started

    def make_signals_for(self, spec: SignalSpec) -> None:
        """Make each evaluation's signals in the child, for the sink ``spec`` describes.

        For the owner of this ``ProcessJudge`` only, whose results go to that sink and
        nowhere else. A second, different sink turns it off for good: a result made for
        one sink cannot be written by another.
        """
        if self._spec_refused or self._spec is spec:
            return
        if self._spec is not None:
            self._spec_refused = True
            self._spec = None
            return
        self._spec = spec

    def close(self) -> None:
        """End every child; evaluations in flight get an error. Calling it again does nothing."""
        with self._lock:
            self._closed = True
            idle, self._state["idle"] = self._state["idle"], []
            self._started -= len(idle)
            busy = list(self._state["busy"])
        for child in idle:
            child.kill()
        for child in busy:
            lane = child.lane
            if lane is not None and lane.loop.is_running():
                # Its loop waits on its pipe: the process's end reaches the records there,
                # and the pipe is closed by that loop, which has it registered.
                with contextlib.suppress(OSError):
                    child.process.kill()
                continue
            with self._lock:
                if child in self._state["busy"]:
                    self._state["busy"].remove(child)
                    self._started -= 1
            child.kill()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """The wrapped judge's evaluation of ``record``, made in a child process."""
        return await self.evaluate_with_contradictions(record, metrics, ())

    async def evaluate_with_contradictions(
        self,
        record: RagRecord,
        metrics: Collection[str],
        contradicting: Sequence[Contradiction],
    ) -> Evaluation:
        """``evaluate``, with what an earlier judge found contradicting the record's claims
        sent along (``ragpulse.judges.base.ReadsContradictions``): the wrapped judge reads
        it where it can."""
        loop = asyncio.get_running_loop()
        left = time_left()
        job = self._enqueue(
            loop, self._lane_of(loop), record, metrics, self.timeout, contradicting=contradicting
        )
        if left is not None:
            job.caller_end = loop.time() + left  # the child fits the user's metrics into it
        try:
            return await job.future
        except asyncio.CancelledError:
            if job.lane is not None and not job.future.done():
                self._cancel(job.lane, job)
            raise

    def start(
        self,
        record: RagRecord,
        metrics: Collection[str],
        timeout: float,
        *,
        whole: bool = False,
        observe: Callable[[Evaluation], None] | None = None,
    ) -> asyncio.Future[Evaluation] | None:
        """``Judge.start`` (``ragpulse.judges.base.StartsEvaluations``): queue ``record`` for a
        child on the running event loop, without a coroutine; the future gets its evaluation
        within ``timeout`` seconds of judge time (from when a child has it: waiting for a
        process, or for one to start, does not count), never an exception. None while this
        loop has as many records here as the processes take at once (a batch each): the
        caller keeps the rest until one is done, so they wait in its bounded queue.

        ``whole``: ``timeout`` counts from now, waiting included (a caller's bound on all of
        an evaluation); past it a record is withdrawn, its process ended if it has it, and
        it gets a ``timeout``. ``observe`` is called with the evaluation just before the
        future gets it (a wrapper counting attempts, without a callback of its own)."""
        loop = asyncio.get_running_loop()
        lane = self._lane_of(loop)
        if lane is not None and self._in_flight(lane) >= self.processes * self._batch_size():
            return None
        # A bound on all of it is kept by the cut below; the process's own, from when a child
        # has the record, is then its attempt timeout alone.
        bound = self.timeout
        if not whole:
            bound = timeout if bound is None else min(timeout, bound)
        job = self._enqueue(loop, lane, record, metrics, bound, observe)
        if whole and lane is not None and not job.future.done():
            self._cut_at(lane, job, loop.time() + timeout, timeout)
        return job.future

    def _enqueue(
        self,
        loop: asyncio.AbstractEventLoop,
        lane: _Lane | None,
        record: RagRecord,
        metrics: Collection[str],
        timeout: float | None,
        observe: Callable[[Evaluation], None] | None = None,
        contradicting: Sequence[Contradiction] = (),
    ) -> _Job:
        """Queue ``record`` on ``lane`` for a child; its job's future gets the evaluation."""
        job = _Job(record, tuple(metrics), loop.create_future(), lane, timeout, observe)
        job.contradicting = tuple(contradicting)
        job.queued_at = loop.time()
        if lane is None:
            job.finish(failed(self, errors.UNEXPECTED, "the judge process pool is closed"))
            return job
        lane.outgoing.append(job)
        if not lane.scheduled:
            # Records the caller starts in this turn of its loop leave together.
            lane.scheduled = True
            loop.call_soon(self._dispatch, lane)
        return job

    def _in_flight(self, lane: _Lane) -> int:
        """The lane's records waiting for a process or in one."""
        with self._lock:
            sent = sum(len(child.jobs) for child in self._state["busy"] if child.lane is lane)
        return len(lane.outgoing) + sent

    # --- a caller's bound on all of an evaluation (``start(whole=True)``) --------------

    # A process's start-up (an interpreter, the judge's imports: seconds on a busy host) is not
    # judge time: while the lane waits for one to start, the bound of the records still waiting
    # for a process stands still, and moves on by that wait once it has started.

    def _cut_at(self, lane: _Lane, job: _Job, at: float, timeout: float) -> None:
        job.cut = (at, timeout)
        lane.cuts[job] = at
        self._arm_cuts(lane)

    def _arm_cuts(self, lane: _Lane) -> None:
        # One timer per lane, at the earliest bound that runs: records end long before
        # theirs, so it rarely fires, and a record costs no timer of its own.
        running = [at for job, at in lane.cuts.items() if not _paused(lane, job)]
        at = min(running) if running else None
        if lane.cut_timer is not None and (at is None or at != lane.cut_timer.when()):
            lane.cut_timer.cancel()
            lane.cut_timer = None
        if at is not None and lane.cut_timer is None:
            lane.cut_timer = lane.loop.call_at(at, self._cut_overdue, lane)

    def _start_began(self, child: _Child, lane: _Lane) -> None:
        child.starting_for = lane
        if not lane.starting:
            lane.paused_since = lane.loop.time()
        lane.starting += 1

    def _start_ended(self, child: _Child) -> None:
        """``child`` started, or failed to: the waiting records' bounds move on by the wait."""
        lane, child.starting_for = child.starting_for, None
        if lane is None:
            return
        lane.starting -= 1
        if lane.starting or lane.paused_since is None:
            return
        now = lane.loop.time()
        paused, lane.paused_since = now - lane.paused_since, None
        for job in lane.outgoing:
            at = lane.cuts.get(job)
            if at is not None and job.cut is not None:
                at += min(paused, now - job.queued_at)
                lane.cuts[job] = at
                job.cut = (at, job.cut[1])
        self._arm_cuts(lane)

    def _cut_overdue(self, lane: _Lane) -> None:
        """Records past their caller's bound: withdrawn (their process ended if it has
        them) and answered with a ``timeout``."""
        lane.cut_timer = None
        now = lane.loop.time()
        for job in [job for job, at in lane.cuts.items() if at <= now]:
            if _paused(lane, job):
                continue  # its bound stands still while a process starts
            del lane.cuts[job]
            if job.future.done() or job.cut is None:
                continue
            self._cancel(lane, job)
            timeout = job.cut[1]
            job.finish(
                failed(
                    self,
                    errors.TIMEOUT,
                    f"no answer within {timeout:g}s",
                    started=time.perf_counter() - timeout,
                )
            )
        self._arm_cuts(lane)

    # --- the event loop's side: lanes, batches and answers -------------------------------

    def _lane_of(self, loop: asyncio.AbstractEventLoop) -> _Lane | None:
        with self._lock:
            if self._closed:
                return None
            lane = self._lanes.get(loop)
            if lane is None:
                for gone in [other for other in self._lanes if other.is_closed()]:
                    del self._lanes[gone]
                lane = self._lanes[loop] = _Lane(loop)
            return lane

    def _dispatch(self, lane: _Lane) -> None:
        """Hand the lane's waiting records to judge processes, a batch per process."""
        lane.scheduled = False
        while lane.outgoing:
            child, started = self._take_child(lane)
            if child is None:
                return  # a released process wakes the lane
            if started or not child.ready:
                # Its interpreter is starting: it takes a batch once it is ready.
                self._await_ready(child, lane)
                return
            self._send(child, lane)

    def _take_child(self, lane: _Lane) -> tuple[_Child | None, bool]:
        """An idle process, or one started now (``True``), or None: the lane waits."""
        with self._lock:
            closed = self._closed
            if not closed:
                if self._state["idle"]:
                    child = self._state["idle"].pop()
                    self._state["busy"].append(child)
                    return child, False
                if self._started >= self.processes:
                    if not lane.waiting:
                        lane.waiting = True
                        self._waiters.append(lane)
                    return None, False
                self._started += 1
        if closed:
            self._fail_waiting(lane, errors.UNEXPECTED, "the judge process pool is closed")
            return None, False
        try:
            child = _Child(self.judge, self._nice)
        except Exception as exc:
            with self._lock:
                self._started -= 1
            self._fail_waiting(lane, errors.UNEXPECTED, f"could not start a judge process: {exc!r}")
            self._wake_one()
            return None, False
        with self._lock:
            self._state["busy"].append(child)
        return child, True

    def _await_ready(self, child: _Child, lane: _Lane) -> None:
        # Starting an interpreter is not the judge's time: the timeout begins after it,
        # and the start has its own bound, so a wedged start cannot hold a process slot.
        child.lane = lane
        child.timer = lane.loop.call_later(START_TIMEOUT, self._start_failed, child, lane)
        lane.loop.add_reader(child.inbox.fileno(), self._on_ready, child, lane)
        self._start_began(child, lane)

    def _on_ready(self, child: _Child, lane: _Lane) -> None:
        self._stop_waiting(child, lane)
        self._start_ended(child)
        try:
            ready = child.inbox.recv()
        except (EOFError, OSError):
            ready = None
        if ready != _READY:
            self._start_failed(child, lane)
            return
        child.ready = True
        self._send(child, lane)
        if lane.outgoing:
            self._dispatch(lane)

    def _start_failed(self, child: _Child, lane: _Lane) -> None:
        self._stop_waiting(child, lane)
        self._start_ended(child)
        self._release(child, healthy=False)
        why = f"the judge process did not start within {START_TIMEOUT:g}s"
        if child.process.poll() is not None:
            why = f"the judge process did not start ({child.process.returncode})"
        self._fail_waiting(lane, errors.UNEXPECTED, why)

    def _send(self, child: _Child, lane: _Lane) -> None:
        """One batch of the lane's records to ``child``; its answers come back as one."""
        jobs = self._batch(lane)
        if not jobs:
            self._release(child, healthy=True)
            return
        settings = self._signal_settings()
        batch = tuple(self._message(job, settings is not None) for job in jobs)
        # The bound goes along (the caller's cut where it comes first): the child fits the
        # user's metrics into it (``_child``).
        now = lane.loop.time()
        bounds = [job.timeout for job in jobs if job.timeout is not None]
        bounds += [job.cut[0] - now for job in jobs if job.cut is not None]
        bounds += [job.caller_end - now for job in jobs if job.caller_end is not None]
        bound = max(0.0, min(bounds)) if bounds else None
        try:
            payload = pickle.dumps((BATCH, batch, bound), pickle.HIGHEST_PROTOCOL)
        except Exception:
            jobs = self._drop_unpicklable(jobs, batch)
            payload = pickle.dumps(
                (BATCH, tuple(self._message(j, settings is not None) for j in jobs), bound),
                pickle.HIGHEST_PROTOCOL,
            )
            if not jobs:
                self._release(child, healthy=True)
                return
        child.jobs = jobs
        child.lane = lane
        for job in jobs:
            job.child = child
        child.sent_at = time.perf_counter()
        try:
            if settings is not None and child.settings is not settings:
                child.outbox.send(settings.message)
                child.settings = settings
            child.outbox.send_bytes(payload)
        except (OSError, EOFError) as exc:
            self._process_failed(
                child, lane, f"the judge process ended ({child.process.poll()}): {exc!r}"
            )
            return
        child.bound = bound
        if child.bound is not None:
            child.timer = lane.loop.call_later(child.bound, self._overran, child, lane)
        lane.loop.add_reader(child.inbox.fileno(), self._on_answers, child, lane)

    @staticmethod
    def _message(job: _Job, signals: bool) -> tuple[object, ...]:
        return encode_record(
            job.record, job.metrics, signals=signals, contradicting=job.contradicting
        )

    def _signal_settings(self) -> _Settings | None:
        """The settings the children make signals with now; None: the application makes them
        (nobody asked, or the content policy's ``redact`` hook is the application's)."""
        spec = self._spec
        if spec is None:
            return None
        policy = get_policy()
        secrets = known_secrets()
        settings = self._settings
        if (
            settings is None
            or settings.spec is not spec
            or settings.policy is not policy
            or settings.secrets != secrets
        ):
            self._settings = settings = _Settings(spec, policy, secrets)
        return settings if settings.portable else None

    def _batch(self, lane: _Lane) -> list[_Job]:
        """The next records to send together: one suspect alone, else up to the batch size
        (about ``BATCH_SECONDS`` of judging: records heavy enough to be worth judging side by
        side go to separate processes, light ones travel together)."""
        jobs: list[_Job] = []
        size = self._batch_size()
        while lane.outgoing and len(jobs) < size:
            job = lane.outgoing[0]
            if job.future.done():
                lane.outgoing.popleft()
                continue
            if job.alone and jobs:
                break
            jobs.append(lane.outgoing.popleft())
            if job.alone:
                break
        return jobs

    def _batch_size(self) -> int:
        per_record = self._per_record
        if per_record is None:
            return 1
        return max(1, min(MAX_BATCH, int(BATCH_SECONDS / max(per_record, 1e-6))))

    def _drop_unpicklable(self, jobs: list[_Job], batch: tuple[object, ...]) -> list[_Job]:
        kept = []
        for job, message in zip(jobs, batch, strict=True):
            try:
                pickle.dumps(message)
                kept.append(job)
            except Exception as exc:
                job.finish(failed(self, type(exc).__name__, f"record not picklable: {exc}"))
        return kept

    def _on_answers(self, child: _Child, lane: _Lane) -> None:
        self._stop_waiting(child, lane)
        try:
            message = child.inbox.recv()
        except (EOFError, OSError):
            self._process_failed(child, lane, f"the judge process ended ({_exit_status(child)})")
            return
        elapsed = time.perf_counter() - child.sent_at
        jobs, child.jobs = child.jobs, []
        answers = message[1] if _is_answers(message, len(jobs)) else None
        for index, job in enumerate(jobs):
            if job.future.done():
                continue
            if answers is None:
                job.finish(failed(self, errors.INVALID_RESULT, "not a batch's answers"))
                continue
            try:
                result = decode_evaluation(answers[index])
            except WireError as exc:
                result = failed(self, errors.INVALID_RESULT, str(exc))
            if result.duration_ms == 0.0:
                result = replace(result, duration_ms=elapsed * 1000.0 / len(jobs))
            job.finish(result)
        if jobs:
            per_record = elapsed / len(jobs)
            previous = self._per_record
            self._per_record = per_record if previous is None else 0.8 * previous + 0.2 * per_record
        self._release(child, healthy=answers is not None)
        if lane.outgoing:
            self._dispatch(lane)

    def _overran(self, child: _Child, lane: _Lane) -> None:
        """No answer ``timeout`` seconds after the batch was sent: end the process."""
        child.timer = None
        if len(child.jobs) == 1:
            job = child.jobs[0]
            explanation = f"no answer within {child.bound:g}s; the judge process was ended"
            if not job.future.done():
                job.finish(failed(self, errors.TIMEOUT, explanation, started=child.sent_at))
        self._process_failed(child, lane, "")

    def _process_failed(self, child: _Child, lane: _Lane, explanation: str) -> None:
        """``child`` ended or was ended with a batch: a record alone in it gets the error;
        the records of a larger batch go again, each alone, so only the one at fault fails."""
        self._stop_waiting(child, lane)
        jobs = [job for job in child.jobs if not job.future.done()]
        child.jobs = []
        self._release(child, healthy=False)
        if len(jobs) == 1 and explanation:
            jobs[0].finish(failed(self, errors.UNEXPECTED, explanation))
        elif jobs:
            for job in reversed(jobs):
                job.alone = True
                lane.outgoing.appendleft(job)
        if lane.outgoing and not lane.scheduled:
            lane.scheduled = True
            lane.loop.call_soon(self._dispatch, lane)

    def _cancel(self, lane: _Lane, job: _Job) -> None:
        """The caller stopped waiting for ``job`` (its timeout, a shutdown)."""
        with contextlib.suppress(ValueError):
            lane.outgoing.remove(job)
            return
        child = job.child
        if child is None or job not in child.jobs:
            return  # answered already
        # The process has the record and may be at it: it cannot be taken back. The
        # process ends; the batch's other records go again.
        self._stop_waiting(child, lane)
        others = [j for j in child.jobs if j is not job and not j.future.done()]
        child.jobs = []
        self._release(child, healthy=False)
        for other in reversed(others):
            lane.outgoing.appendleft(other)
        if lane.outgoing and not lane.scheduled:
            lane.scheduled = True
            lane.loop.call_soon(self._dispatch, lane)

    def _stop_waiting(self, child: _Child, lane: _Lane) -> None:
        if child.timer is not None:
            child.timer.cancel()
            child.timer = None
        if not lane.loop.is_closed():
            with contextlib.suppress(OSError, ValueError):
                lane.loop.remove_reader(child.inbox.fileno())

    def _fail_waiting(self, lane: _Lane, error_type: str, explanation: str) -> None:
        while lane.outgoing:
            job = lane.outgoing.popleft()
            if not job.future.done():
                job.finish(failed(self, error_type, explanation))

    def _release(self, child: _Child, healthy: bool) -> None:
        child.lane = None
        with self._lock:
            if child in self._state["busy"]:
                self._state["busy"].remove(child)
            keep = healthy and not self._closed and child.process.poll() is None
            if keep:
                self._state["idle"].append(child)
            else:
                self._started -= 1
        if not keep:
            child.kill()
        self._wake_one()

    def _wake_one(self) -> None:
        with self._lock:
            while self._waiters:
                lane = self._waiters.popleft()
                lane.waiting = False
                if lane.outgoing and not lane.loop.is_closed():
                    with contextlib.suppress(RuntimeError):
                        lane.loop.call_soon_threadsafe(self._dispatch, lane)
                        return


class _Job:
    """One record waiting for its evaluation, and the future its caller awaits."""

    __slots__ = (
        "alone",
        "caller_end",
        "child",
        "contradicting",
        "cut",
        "future",
        "lane",
        "metrics",
        "observe",
        "queued_at",
        "record",
        "timeout",
    )

    def __init__(
        self,
        record: RagRecord,
        metrics: tuple[str, ...],
        future: asyncio.Future[Evaluation],
        lane: _Lane | None,
        timeout: float | None,
        observe: Callable[[Evaluation], None] | None,
    ) -> None:
        self.record = record
        self.metrics = metrics
        self.future = future
        self.lane = lane
        self.timeout = timeout
        """Seconds of judge time it may take, from when a child has it; None: no bound."""
        self.observe = observe
        self.cut: tuple[float, float] | None = None
        """``(loop time, timeout)`` of its caller's bound on all of it (``start(whole=True)``)."""
        self.child: _Child | None = None
        self.alone = False
        """It was in a batch whose process died or overran: it goes alone from now on."""
        self.contradicting: tuple[Contradiction, ...] = ()
        """What an earlier judge found contradicting the record's claims (sent along)."""
        self.queued_at = 0.0
        """Loop time when it was queued."""
        self.caller_end: float | None = None
        """Loop time when its caller gives up (``time_left()`` in ``evaluate``): the child is
        told, and fits the user's metrics into it; the caller, not this pool, keeps it."""

    def finish(self, result: Evaluation) -> None:
        """Give the caller ``result``: seen by ``observe`` first, the bound's entry gone."""
        if self.cut is not None and self.lane is not None:
            self.lane.cuts.pop(self, None)
            self.cut = None
        if self.observe is not None:
            with _guard("ragpulse: a judge-attempt observer raised"):
                self.observe(result)
        self.future.set_result(result)


class _Lane:
    """One event loop's records on their way to the judge processes."""

    __slots__ = (
        "cut_timer",
        "cuts",
        "loop",
        "outgoing",
        "paused_since",
        "scheduled",
        "starting",
        "waiting",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.outgoing: collections.deque[_Job] = collections.deque()
        self.cuts: dict[_Job, float] = {}
        """Records started with a bound on all of them, and when it ends (loop time)."""
        self.cut_timer: asyncio.TimerHandle | None = None
        self.starting = 0
        """Processes starting for this lane now: its waiting records' bounds stand still."""
        self.paused_since: float | None = None
        """Loop time since when they stand still."""
        self.scheduled = False
        """A dispatch is on the loop's ready queue."""
        self.waiting = False
        """In the waiters, for a process to be released."""


def _paused(lane: _Lane, job: _Job) -> bool:
    """Whether ``job``'s bound stands still: it waits for a process while one starts."""
    return bool(lane.starting) and job in lane.outgoing


def _exit_status(child: _Child) -> str:
    """How ``child`` ended, in words: its pipe closed, so it is ending; a moment to reap it."""
    try:
        code = child.process.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        return "its pipe closed"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"


def _is_answers(message: object, count: int) -> bool:
    return (
        isinstance(message, tuple)
        and len(message) == 2
        and message[0] == ANSWERS
        and isinstance(message[1], tuple)
        and len(message[1]) == count
    )


class _Settings:
    """What a child is told, once, to make signals: the sink's spec, the content policy
    and the credentials to scrub."""

    __slots__ = ("message", "policy", "portable", "secrets", "spec")

    def __init__(self, spec: SignalSpec, policy: ContentPolicy, secrets: tuple[str, ...]) -> None:
        self.spec = spec
        self.policy = policy
        self.secrets = secrets
        self.message = (SETTINGS, spec.serial, spec.options, policy, secrets)
        self.portable = portable_policy(policy)
        if self.portable:
            try:
                pickle.dumps(self.message)
            except Exception as exc:
                _guard.warning("the content policy cannot reach the judge's processes: %r", exc)
                self.portable = False


_READY = "ready"
_READY_LOOK_EVERY = 0.05
"""Seconds between two looks for a process that is starting (``wait_ready``)."""


def _heard_ready(child: _Child) -> bool | None:
    """Whether an idle process said it is ready (True), ended or said something else
    (False), or has said nothing yet (None); without waiting."""
    try:
        if not child.inbox.poll():
            return None
        said: object = child.inbox.recv()
    except (EOFError, OSError):
        return False
    return said == _READY


def isolate(
    judge: Judge, *, processes: int = 1, timeout: float | None = None, nice: int = DEFAULT_NICE
) -> Judge:
    """``judge`` in a ``ProcessJudge`` when it declares ``cpu_bound = True``; else ``judge``.

    A judge that a child process could not rebuild (not picklable, or a class defined
    in the ``__main__`` script, which the child does not run) stays where it is, with
    a warning.
    """
    if isinstance(judge, ProcessJudge) or not is_cpu_bound(judge):
        return judge
    why = None
    if type(judge).__module__ == "__main__":
        why = "its class is defined in __main__; define it in an importable module"
    else:
        try:
            pickle.dumps(judge)
        except Exception as exc:
            why = f"it cannot be pickled ({exc!r})"
    if why is not None:
        _guard.warning(
            "judge %s runs on the worker thread, not in its own process: %s", judge.name, why
        )
        return judge
    return ProcessJudge(judge, processes=processes, timeout=timeout, nice=nice)


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
