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
collected, or its process exits.
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
from collections.abc import Collection
from dataclasses import replace
from multiprocessing import spawn
from multiprocessing.connection import Connection

from ragpulse import errors
from ragpulse._guard import Guard
from ragpulse._signals import SignalSpec, portable_policy
from ragpulse.capture._content import ContentPolicy, get_policy
from ragpulse.evaluation.types import AnnotatorKind, Evaluation, RagRecord
from ragpulse.judges._wire import SETTINGS, WireError, decode_evaluation, encode_record
from ragpulse.judges.base import Judge, failed, is_cpu_bound
from ragpulse.privacy import known_secrets

__all__ = ["DEFAULT_NICE", "START_TIMEOUT", "ProcessJudge", "isolate"]

_guard = Guard(__name__)

DEFAULT_NICE = 0
"""How much lower than the application the judge processes are scheduled (``nice``):
``Settings.judge_nice``'s default. At 10 a busy host starved the judge to a fifth of
its throughput and most sampled evaluations were dropped."""
START_TIMEOUT = 60.0
"""Seconds a judge process may take to start (an interpreter and the judge's imports)."""

_CHILD_CODE = (
    "import sys; from ragpulse.judges._process_child import main; main(*map(int, sys.argv[1:]))"
)


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
        self.ready = False
        self.computing = False
        """True from sending a record until its evaluation is back."""
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
        """End the process now and release its pipes."""
        try:
            self.process.kill()
            self.process.wait(timeout=5.0)
        except (OSError, subprocess.TimeoutExpired):
            _guard.warning("a judge process did not end after SIGKILL")
        self.outbox.close()
        self.inbox.close()


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
    An owner whose results go straight to a sink (``ResilientJudge``, ``EvalWorker``)
    may ask, with ``make_signals_for``, for each evaluation's signals to be made in
    the child (``ragpulse._signals``): an evaluation with claims then comes back as
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
        self._waiters: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]
        self._waiters = collections.deque()
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
        self._finalizer()
        with self._lock:
            self._started = 0

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """The wrapped judge's evaluation of ``record``, made in a child process."""
        child = await self._acquire()
        if child is None:
            return failed(self, errors.UNEXPECTED, "the judge process pool is closed")
        healthy = False
        started = time.perf_counter()
        try:
            result = await self._run(child, record, metrics)
            healthy = True
            return result
        except _Overran:
            explanation = f"no answer within {self.timeout:g}s; the judge process was ended"
            return failed(self, errors.TIMEOUT, explanation, started=started)
        except (EOFError, OSError) as exc:
            code = child.process.poll()
            return failed(self, errors.UNEXPECTED, f"the judge process ended ({code}): {exc!r}")
        except asyncio.CancelledError:
            # The caller's timeout. A child cancelled while it computes may still be at it:
            # it cannot take another record. One still starting holds no record: it stays
            # for the next caller, or a timeout shorter than an interpreter's start would
            # kill every start and no evaluation would ever run.
            healthy = not child.computing and child.process.poll() is None
            raise
        finally:
            self._release(child, healthy)

    async def _run(self, child: _Child, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        if not child.ready:
            # Starting an interpreter is not the judge's time: the timeout begins after it,
            # and the start has its own bound, so a wedged start cannot hold a slot.
            try:
                ready = await _receive(child, START_TIMEOUT)
            except asyncio.TimeoutError:
                raise EOFError(
                    f"the judge process did not start within {START_TIMEOUT:g}s"
                ) from None
            if ready != _READY:
                raise EOFError("the judge process did not start")
            child.ready = True
        settings = self._signal_settings()
        if settings is not None and child.settings is not settings:
            child.outbox.send(settings.message)
            child.settings = settings
        started = time.perf_counter()
        child.computing = True
        child.outbox.send(encode_record(record, metrics, signals=settings is not None))
        try:
            answer = await _receive(child, self.timeout)
        except asyncio.TimeoutError:
            # The child is still computing: the caller kills it (it is not healthy).
            raise _Overran() from None
        child.computing = False
        try:
            result = decode_evaluation(answer)
        except WireError as exc:
            return failed(self, errors.INVALID_RESULT, str(exc))
        if result.duration_ms == 0.0:
            result = replace(result, duration_ms=(time.perf_counter() - started) * 1000.0)
        return result

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

    async def _acquire(self) -> _Child | None:
        while True:
            start = False
            with self._lock:
                if self._closed:
                    return None
                if self._state["idle"]:
                    child = self._state["idle"].pop()
                    self._state["busy"].append(child)
                    return child
                if self._started < self.processes:
                    self._started += 1
                    start = True
                else:
                    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                    self._waiters.append((asyncio.get_running_loop(), waiter))
            if start:
                try:
                    child = _Child(self.judge, self._nice)
                except BaseException:
                    with self._lock:
                        self._started -= 1
                    self._wake_one()
                    raise
                with self._lock:
                    self._state["busy"].append(child)
                return child
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # our turn came as we were cancelled: pass it on
                raise

    def _release(self, child: _Child, healthy: bool) -> None:
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
                loop, waiter = self._waiters.popleft()
                if not waiter.done() and not loop.is_closed():
                    loop.call_soon_threadsafe(self._deliver, waiter)
                    return

    def _deliver(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():
            # Cancelled between the wake-up and now: the turn goes to the next waiter.
            self._wake_one()
        else:
            waiter.set_result(None)


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


class _Overran(Exception):
    """The child did not answer within the timeout."""


_READY = "ready"


async def _receive(child: _Child, timeout: float | None) -> object:
    """The child's next message, awaited without blocking the event loop.

    ``asyncio.TimeoutError`` when none came within ``timeout`` seconds. The timeout is a
    timer on the same future, not ``wait_for``'s extra task per message.
    """
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()
    fd = child.inbox.fileno()

    def on_readable() -> None:
        if not readable.done():
            readable.set_result(None)

    def on_timeout() -> None:
        if not readable.done():
            readable.set_exception(asyncio.TimeoutError())

    loop.add_reader(fd, on_readable)
    timer = None if timeout is None else loop.call_later(timeout, on_timeout)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
        if timer is not None:
            timer.cancel()
    return child.inbox.recv()


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
