"""Runs evaluations off the request path: ``EvalWorker``.

Built like OpenTelemetry's ``BatchProcessor``: a bounded deque that request
threads append to, one daemon thread that drains it, ``os.register_at_fork`` to
re-create that thread in a child process, and ``flush``/``shutdown`` with
timeouts. The thread runs an asyncio event loop so that many slow judge calls
(HTTP to an LLM) overlap within ``concurrency``.

What the worker guarantees:

- ``submit`` never blocks and never raises; when the queue holds
  ``max_queue_size`` records it returns False (the caller counts ``queue_full``).
- Every accepted record gets exactly one ``callback(record, evaluation)`` on the
  worker thread, whatever the judge does (hangs, raises, returns garbage), unless
  ``shutdown`` ran out of time: records still queued or in flight then get no
  callback. The span processor forwards the spans it holds itself on shutdown, so
  nothing is lost downstream.
- Judge calls are bounded by ``timeout``, retried with exponential backoff and
  full jitter on ``RETRYABLE_ERRORS`` (at least ``retry_after`` when the judge's
  server sent one), and guarded by a circuit breaker.
- A ``FallbackJudge`` (anything with ``primary`` and ``fallback`` attributes) is
  taken apart: retries and the breaker apply to ``primary``; when the breaker is
  open, the primary's result is still an error after retries, or the judge-token
  budget is spent, the record is evaluated by ``fallback`` instead (degrade, do
  not skip).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context

from ragpulse import semconv
from ragpulse._breaker import CircuitBreaker
from ragpulse.evaluation.types import (
    ALL_METRICS,
    RETRYABLE_ERRORS,
    AnnotatorKind,
    EvalStatus,
    Evaluation,
    RagRecord,
)

if TYPE_CHECKING:
    from ragpulse.judges.base import Judge

__all__ = [
    "ERROR_BREAKER_OPEN",
    "ERROR_INVALID_RESULT",
    "ERROR_OVER_BUDGET",
    "ERROR_TIMEOUT",
    "EvalWorker",
    "WorkerStats",
]

_logger = logging.getLogger(__name__)

ERROR_TIMEOUT = "timeout"
"""The judge did not answer within ``timeout`` seconds."""
ERROR_BREAKER_OPEN = "breaker_open"
"""The judge was not called: its circuit breaker is open."""
ERROR_OVER_BUDGET = "over_budget"
"""The judge was not called: the judge-token budget is spent (status ``skipped``)."""
ERROR_INVALID_RESULT = "invalid_result"
"""The judge returned something that is not an ``Evaluation``."""

# Errors about one record, from a judge that is up and answering: they neither open the
# breaker nor are worth retrying. Any other error (including a judge that raises) counts
# as the judge being unavailable.
_RECORD_LEVEL_ERRORS = frozenset({"refusal", "truncated", "schema_mismatch", "bad_request"})

Callback = Callable[[RagRecord, Evaluation], None]
_Item = tuple[int, RagRecord, Callback]


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """A snapshot of the worker's counters since it started (or since a fork)."""

    submitted: int = 0
    """Records accepted by ``submit``."""
    completed: int = 0
    """Records whose evaluation finished (the callback was called)."""
    dropped: int = 0
    """Records refused by ``submit``: queue full or worker shut down."""
    retries: int = 0
    """Judge calls repeated after a retryable error."""
    fallbacks: int = 0
    """Records evaluated by a ``FallbackJudge``'s fallback."""
    timeouts: int = 0
    """Judge calls that ran past ``timeout``."""
    errors_by_type: Mapping[str, int] = field(default_factory=dict)
    """Failed judge calls and refusals (``breaker_open``, ``over_budget``) by error type."""


@dataclass(slots=True)
class _Counters:
    submitted: int = 0
    completed: int = 0
    dropped: int = 0
    retries: int = 0
    fallbacks: int = 0
    timeouts: int = 0
    errors_by_type: dict[str, int] = field(default_factory=dict)


def _env_number(name: str, kind: Callable[[str], Any]) -> Any:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        value = kind(raw)
    except ValueError:
        # Configuration from the environment must never stop the application.
        _logger.warning("ignoring %s=%r: not a number", name, raw)
        return None
    if value <= 0:
        _logger.warning("ignoring %s=%r: not positive", name, raw)
        return None
    return value


class EvalWorker:
    """Evaluates ``RagRecord``s with a judge on one background thread.

    Args:
        judge: the judge; a ``FallbackJudge`` is split into primary and fallback.
        max_queue_size: records waiting for a concurrency slot before ``submit`` refuses.
        concurrency: judge calls in flight at once.
        timeout: seconds one judge call may take.
        max_retries: extra attempts after a retryable error.
        backoff_base, backoff_max: the retry delay is uniform in
            ``[0, min(backoff_max, backoff_base * 2**attempt)]``, and at least
            ``min(retry_after, backoff_max)`` when the judge reports one.
        breaker_failure_threshold, breaker_reset_timeout: the circuit breaker
            opens after that many consecutive failed calls and probes again after
            that many seconds.
        judge_budget_available: asked before each record; when it says False the
            fallback judge is used (or, without one, the record is ``skipped``).
            Usually ``EvalSampler.judge_budget_available``.
        metrics: the metrics the judge is asked for.
        on_judge_call: called on the worker thread after every judge call with
            its ``Evaluation`` (usage, latency, errors): the hook for self-metrics
            and for ``EvalSampler.record_tokens``.
    """

    def __init__(
        self,
        judge: Judge,
        *,
        max_queue_size: int = 1000,
        concurrency: int = 4,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        breaker_failure_threshold: int = 5,
        breaker_reset_timeout: float = 30.0,
        judge_budget_available: Callable[[], bool] | None = None,
        metrics: Collection[str] = ALL_METRICS,
        on_judge_call: Callable[[Evaluation], None] | None = None,
    ) -> None:
        if max_queue_size < 1:
            raise ValueError(f"max_queue_size must be at least 1, got {max_queue_size!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries!r}")
        self._judge = judge
        primary = getattr(judge, "primary", None)
        fallback = getattr(judge, "fallback", None)
        if primary is not None and fallback is not None:
            self._primary: Judge = primary
            self._fallback: Judge | None = fallback
        else:
            self._primary, self._fallback = judge, None
        self._max_queue_size = max_queue_size
        self._concurrency = concurrency
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._breaker_threshold = breaker_failure_threshold
        self._breaker_reset = breaker_reset_timeout
        self._budget_available = judge_budget_available
        self._metrics = tuple(metrics)
        self._on_judge_call = on_judge_call
        self._shutdown = False
        self._start()

        if hasattr(os, "register_at_fork"):
            # A weak reference, so the hook (which lives as long as the process) does not
            # keep a discarded worker alive.
            weak_reinit = weakref.WeakMethod(self._at_fork_reinit)

            def _after_in_child() -> None:
                if (reinit := weak_reinit()) is not None:
                    reinit()

            os.register_at_fork(after_in_child=_after_in_child)

    @classmethod
    def from_env(cls, judge: Judge, **overrides: Any) -> EvalWorker:
        """A worker bounded by ``RAGPULSE_MAX_QUEUE_SIZE``, ``RAGPULSE_EVAL_CONCURRENCY``,
        ``RAGPULSE_EVAL_TIMEOUT`` and ``RAGPULSE_EVAL_MAX_RETRIES``; keyword arguments win.
        """
        kwargs: dict[str, Any] = {}
        for key, env, kind in (
            ("max_queue_size", semconv.ENV_MAX_QUEUE_SIZE, int),
            ("concurrency", semconv.ENV_EVAL_CONCURRENCY, int),
            ("timeout", semconv.ENV_EVAL_TIMEOUT, float),
        ):
            value = _env_number(env, kind)
            if value is not None:
                kwargs[key] = value
        retries = os.environ.get(semconv.ENV_EVAL_MAX_RETRIES, "").strip()
        if retries:
            if retries.isdigit():
                kwargs["max_retries"] = int(retries)
            else:
                _logger.warning("ignoring %s=%r", semconv.ENV_EVAL_MAX_RETRIES, retries)
        kwargs.update(overrides)
        return cls(judge, **kwargs)

    # --- state that a forked child re-creates --------------------------------------

    def _start(self) -> None:
        # One lock guards the queue, the outstanding set, the wake flag and the counters.
        # Request threads hold it only for an append and a few integer updates.
        self._lock = threading.Lock()
        self._completed_cond = threading.Condition(self._lock)
        self._queue: collections.deque[_Item] = collections.deque()
        self._seq = 0
        # Sequence numbers of accepted records not yet completed: flush(t) waits until
        # none at or below its call-time number is left.
        self._outstanding: set[int] = set()
        self._flush_waiters = 0
        # True while a wake-up of the loop is already scheduled (or the loop is starting
        # and will drain anyway), so a burst of submits schedules one wake-up, not many.
        self._wake_pending = True
        self._in_flight = 0
        self._abandoned = False
        self._counters = _Counters()
        self._breaker = CircuitBreaker(self._breaker_threshold, self._breaker_reset)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._pid = os.getpid()
        self._thread = threading.Thread(
            name="ragpulse-eval-worker", target=self._thread_main, daemon=True
        )
        self._thread.start()

    def _at_fork_reinit(self) -> None:
        # The parent's thread does not exist in the child, and its loop's selector and
        # locks are copies that may be in any state. Start over; records queued in the
        # parent stay the parent's to evaluate.
        if self._shutdown:
            return
        self._start()

    # --- the request side -------------------------------------------------------------

    def submit(self, record: RagRecord, callback: Callback) -> bool:
        """Queue ``record``; False (and nothing queued) when the queue is full or shut down.

        Never blocks and never raises. ``callback(record, evaluation)`` runs later, on
        the worker thread, between judge calls: keep it short (it should hand the
        result on, not do I/O), and an exception in it is logged and swallowed.
        """
        try:
            with self._lock:
                if self._shutdown or len(self._queue) >= self._max_queue_size:
                    self._counters.dropped += 1
                    return False
                self._seq += 1
                self._queue.append((self._seq, record, callback))
                self._outstanding.add(self._seq)
                self._counters.submitted += 1
                wake = not self._wake_pending
                self._wake_pending = True
                loop, wakeup = self._loop, self._wakeup
            if wake and loop is not None and wakeup is not None:
                loop.call_soon_threadsafe(wakeup.set)
            return True
        except Exception:
            # The loop was closed under us (interpreter exit): the record stays queued
            # and unevaluated, which is what a dropped record is to the caller anyway.
            _logger.debug("submit failed", exc_info=True)
            return False

    @property
    def queue_size(self) -> int:
        """Records waiting for a concurrency slot."""
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        """Records being evaluated now."""
        return self._in_flight

    @property
    def breaker_open(self) -> bool:
        """True while the judge's circuit breaker refuses calls (open or probing)."""
        return self._breaker.is_open

    @property
    def stats(self) -> WorkerStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            c = self._counters
            return WorkerStats(
                submitted=c.submitted,
                completed=c.completed,
                dropped=c.dropped,
                retries=c.retries,
                fallbacks=c.fallbacks,
                timeouts=c.timeouts,
                errors_by_type=dict(c.errors_by_type),
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record submitted before this call has completed.

        True when they all did within ``timeout`` seconds (``None``: no limit).
        """
        if threading.current_thread() is self._thread:
            # From a callback: waiting for ourselves would never end.
            return False
        with self._lock:
            target = self._seq

            def done() -> bool:
                return self._abandoned or not any(seq <= target for seq in self._outstanding)

            self._flush_waiters += 1
            try:
                finished = self._completed_cond.wait_for(done, timeout)
            finally:
                self._flush_waiters -= 1
            return finished and not self._abandoned

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop accepting records and evaluate those already accepted, within ``timeout``.

        Past the timeout, records still queued or in flight are abandoned without a
        callback and ``shutdown`` returns. Calling it again does nothing.
        """
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
            wake = not self._wake_pending
            self._wake_pending = True
            loop, wakeup = self._loop, self._wakeup
        if wake and loop is not None and wakeup is not None:
            # RuntimeError: the loop already ended.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wakeup.set)
        if threading.current_thread() is self._thread:
            return
        self._thread.join(timeout)
        if not self._thread.is_alive():
            return
        with self._lock:
            self._abandoned = True
            left = len(self._queue) + self._in_flight
            self._outstanding.clear()
            self._completed_cond.notify_all()
        _logger.warning("ragpulse worker shutdown timed out; %d evaluations abandoned", left)
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._abandon)

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
            _logger.exception("ragpulse worker loop failed")
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
        while True:
            with self._lock:
                self._wake_pending = False
            # Take records only as slots free up, so the ones waiting stay in the bounded
            # deque (and in ``queue_size``) instead of piling up as tasks.
            while True:
                await slots.acquire()
                with self._lock:
                    item = self._queue.popleft() if self._queue else None
                    if item is not None:
                        self._in_flight += 1
                    stopping = self._shutdown
                if item is None:
                    slots.release()
                    break
                task = asyncio.get_running_loop().create_task(self._evaluate_one(item))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                task.add_done_callback(lambda _: slots.release())
            if stopping:
                # submit refuses once _shutdown is set, so the queue stays empty now.
                if self._tasks:
                    await asyncio.gather(*self._tasks, return_exceptions=True)
                return
            await wakeup.wait()
            wakeup.clear()

    def _abandon(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._main_task is not None:
            self._main_task.cancel()

    async def _evaluate_one(self, item: _Item) -> None:
        seq, record, callback = item
        completed = False
        try:
            try:
                evaluation = await self._evaluate(record)
            except Exception as exc:
                # A bug of ours must still give the record its one evaluation.
                _logger.exception("ragpulse worker failed to evaluate a record")
                evaluation = self._failed(self._judge, type(exc).__name__)
            if not self._abandoned:
                completed = True
                try:
                    callback(record, evaluation)
                except Exception:
                    _logger.exception("ragpulse evaluation callback raised")
        finally:
            # Also on cancellation (shutdown timed out), so flush waiters are released.
            with self._lock:
                self._in_flight -= 1
                self._outstanding.discard(seq)
                if completed:
                    self._counters.completed += 1
                if self._flush_waiters:
                    self._completed_cond.notify_all()

    async def _evaluate(self, record: RagRecord) -> Evaluation:
        if not self._judge_budget_available():
            if self._fallback is not None:
                return await self._evaluate_with_fallback(record, None)
            self._count_error(ERROR_OVER_BUDGET)
            return Evaluation(
                status=EvalStatus.SKIPPED,
                metrics={},
                judge=self._name(self._primary),
                annotator_kind=self._kind(self._primary),
                error_type=ERROR_OVER_BUDGET,
                explanation="judge-token budget spent",
            )
        result = await self._call_with_retries(record)
        if result.status is EvalStatus.ERROR and self._fallback is not None:
            return await self._evaluate_with_fallback(record, result)
        return result

    def _judge_budget_available(self) -> bool:
        if self._budget_available is None:
            return True
        try:
            return bool(self._budget_available())
        except Exception:
            _logger.exception("judge_budget_available raised; assuming budget is available")
            return True

    async def _call_with_retries(self, record: RagRecord) -> Evaluation:
        judge = self._primary
        attempt = 0
        while True:
            if not self._breaker.allow():
                self._count_error(ERROR_BREAKER_OPEN)
                return self._failed(judge, ERROR_BREAKER_OPEN)
            try:
                result = await self._call(judge, record)
            except asyncio.CancelledError:
                self._breaker.release_probe()
                raise
            if result.status is not EvalStatus.ERROR:
                self._breaker.record_success()
                return result
            error_type = result.error_type or "unexpected"
            self._count_error(error_type)
            if error_type in _RECORD_LEVEL_ERRORS:
                self._breaker.record_success()
                return result
            self._breaker.record_failure()
            if error_type not in RETRYABLE_ERRORS or attempt >= self._max_retries:
                return result
            delay = random.uniform(0.0, min(self._backoff_max, self._backoff_base * 2**attempt))
            if result.retry_after is not None:
                delay = max(delay, min(result.retry_after, self._backoff_max))
            attempt += 1
            with self._lock:
                self._counters.retries += 1
            await asyncio.sleep(delay)

    async def _evaluate_with_fallback(
        self, record: RagRecord, primary_failure: Evaluation | None
    ) -> Evaluation:
        """The fallback's evaluation, explained the way ``FallbackJudge`` explains it.

        ``primary_failure`` is None when the primary was not tried (budget spent). When the
        fallback fails too, the primary's failure is returned: it says what went wrong first.
        """
        assert self._fallback is not None
        with self._lock:
            self._counters.fallbacks += 1
        primary, fallback = self._name(self._primary), self._name(self._fallback)
        if primary_failure is None:
            why = f"{primary} not called ({ERROR_OVER_BUDGET})"
        else:
            why = f"{primary} failed ({primary_failure.error_type})"
        result = await self._call(self._fallback, record)
        if result.status is EvalStatus.ERROR:
            self._count_error(result.error_type or "unexpected")
            explanation = f"{why}; fallback {fallback} failed too ({result.error_type})"
            return replace(primary_failure or result, explanation=explanation)
        explanation = f"fell back to {fallback}: {why}"
        if result.explanation:
            explanation = f"{explanation}. {result.explanation}"
        return replace(result, explanation=explanation)

    async def _call(self, judge: Judge, record: RagRecord) -> Evaluation:
        """One judge call, bounded by the timeout; never raises (except cancellation)."""
        started = time.perf_counter()
        result: Evaluation
        try:
            returned: object = await asyncio.wait_for(
                judge.evaluate(record, self._metrics), self._timeout
            )
        except asyncio.TimeoutError:
            with self._lock:
                self._counters.timeouts += 1
            result = self._failed(
                judge,
                ERROR_TIMEOUT,
                explanation=f"no answer within {self._timeout:g}s",
                started=started,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _logger.warning("judge %s raised %r", self._name(judge), exc, exc_info=True)
            result = self._failed(judge, type(exc).__name__, explanation=str(exc), started=started)
        else:
            if not isinstance(returned, Evaluation):
                result = self._failed(
                    judge,
                    ERROR_INVALID_RESULT,
                    explanation=f"judge returned {type(returned).__name__}",
                    started=started,
                )
            elif returned.duration_ms == 0.0:
                result = replace(returned, duration_ms=(time.perf_counter() - started) * 1000.0)
            else:
                result = returned
        if self._on_judge_call is not None:
            try:
                self._on_judge_call(result)
            except Exception:
                _logger.exception("on_judge_call hook raised")
        return result

    # --- helpers ------------------------------------------------------------------------

    def _count_error(self, error_type: str) -> None:
        with self._lock:
            errors = self._counters.errors_by_type
            errors[error_type] = errors.get(error_type, 0) + 1

    @staticmethod
    def _name(judge: Judge) -> str:
        return str(getattr(judge, "name", type(judge).__name__))

    @staticmethod
    def _kind(judge: Judge) -> AnnotatorKind:
        kind = getattr(judge, "annotator_kind", "CODE")
        return "LLM" if kind == "LLM" else "CODE"

    def _failed(
        self,
        judge: Judge,
        error_type: str,
        *,
        explanation: str | None = None,
        started: float | None = None,
    ) -> Evaluation:
        duration = 0.0 if started is None else (time.perf_counter() - started) * 1000.0
        return Evaluation.failed(
            error_type,
            judge=self._name(judge),
            annotator_kind=self._kind(judge),
            explanation=explanation,
            duration_ms=duration,
        )
