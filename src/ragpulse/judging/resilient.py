"""``ResilientJudge``: retries, a circuit breaker, a fallback judge and a token budget.

Resilience is a wrapper around a judge, not code inside the loop that calls it
(as Logfire's ``WrapperSpanProcessor`` adds one concern and delegates the rest):
the worker, ``ragpulse eval`` and ``ragpulse serve`` all get the same behaviour by
calling ``evaluate``.

What one ``evaluate`` does:

1. While the judge-token ``budget`` is spent, the primary is not called: the
   fallback answers, or without one the record is ``skipped`` (``over_budget``).
2. The primary is called, each attempt bounded by ``retry.attempt_timeout``, and
   retried on ``RETRYABLE_ERRORS`` with exponential backoff and full jitter (at
   least the server's ``Retry-After``, capped by ``backoff_max``). Errors about the
   record (``RECORD_LEVEL_ERRORS``) are not retried and do not open the breaker.
3. The circuit ``breaker`` is asked before every attempt; while it is open the
   primary is not called (``breaker_open``).

   A CPU-bound primary (``cpu_bound = True``) is neither retried nor behind the
   breaker: its failures are about the input and would only repeat. It runs in a
   ``ProcessJudge`` whose child the attempt timeout kills.
4. When the primary's result is still an error, the fallback answers, and its
   result says why (``fell back to lexical: llm failed (rate_limited): ...``).
   When the fallback fails too, the primary's failure is returned.

Every attempt (primary and fallback) is reported to the observers registered with
``add_observer`` (self-metrics: calls, tokens, latency, errors), and its tokens are
spent from the budget. ``evaluate`` never raises.

Called with a bound (the worker's ``timeout``, read through ``time_left()``), it
fits into it: attempts are cut to what is left, a retry that cannot start before
the bound is not made, and a quarter of the bound (at most one attempt timeout)
is kept for the fallback, so a slow primary still leaves time to degrade.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from ragpulse import errors
from ragpulse._bucket import TokenBucket
from ragpulse._guard import Guard
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import AnnotatorKind, Evaluation, RagRecord
from ragpulse.judges.base import Judge, call_judge, failed, is_cpu_bound, time_left
from ragpulse.judging.breaker import CircuitBreaker
from ragpulse.judging.process import DEFAULT_NICE, ProcessJudge, isolate
from ragpulse.signals.make import SignalSpec

__all__ = ["AttemptObserver", "ResilienceStats", "ResilientJudge", "RetryPolicy"]

_guard = Guard(__name__)

AttemptObserver = Callable[[Evaluation], None]
"""Called after every judge attempt with its ``Evaluation`` (usage, latency, error type)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the primary judge is retried.

    The delay before retry ``n`` (from 0) is uniform in
    ``[0, min(backoff_max, backoff_base * 2**n)]``, and at least
    ``min(retry_after, backoff_max)`` when the judge's server sent a ``Retry-After``.
    """

    max_retries: int = 3
    """Extra attempts after a retryable error."""
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    attempt_timeout: float = 60.0
    """Seconds one attempt (primary or fallback) may take before it is a ``timeout``."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {self.max_retries!r}")
        if self.attempt_timeout <= 0:
            raise ValueError(f"attempt_timeout must be positive, got {self.attempt_timeout!r}")

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first retry)."""
        delay = random.uniform(0.0, min(self.backoff_max, self.backoff_base * 2**retry))
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    def longest(self, *, fallback: bool) -> float:
        """The longest one evaluation can take: every attempt and backoff, and the fallback."""
        attempts = (self.max_retries + 1 + (1 if fallback else 0)) * self.attempt_timeout
        return attempts + self.max_retries * self.backoff_max


NO_RETRY = RetryPolicy(max_retries=0)
"""One attempt, no retry."""

FALLBACK_SHARE = 0.25
"""Share of the caller's bound (``time_left()``) kept for the fallback's attempt."""

# Seconds (at most a twentieth of the bound) by which an evaluation ends before its
# caller's bound, so the caller receives our timeout instead of cancelling us.
_MARGIN = 0.05


def _end_of_bound() -> float | None:
    """When this evaluation should be over: a little before its caller's bound, so that a
    timeout is our result (counted and explained) rather than the caller cutting us off."""
    left = time_left()
    return None if left is None else time.monotonic() + left - min(_MARGIN, left / 20)


@dataclass(frozen=True, slots=True)
class ResilienceStats:
    """A snapshot of what a ``ResilientJudge`` did since it was built."""

    attempts: int = 0
    """Judge calls made (primary and fallback)."""
    retries: int = 0
    """Primary calls repeated after a retryable error."""
    fallbacks: int = 0
    """Records answered (or attempted) by the fallback."""
    errors_by_type: Mapping[str, int] = field(default_factory=dict)
    """Failed attempts and refusals (``breaker_open``, ``over_budget``) by error type."""


class ResilientJudge:
    """Wraps ``primary`` with retries, a breaker, a fallback and a budget; a ``Judge`` itself.

    Args:
        primary: the judge to ask first (usually an LLM judge).
        fallback: the judge that answers when the primary cannot (usually
            ``LexicalJudge()``); ``None``: no fallback, the failure is the result.
        retry: retries and per-attempt timeout of the primary (the timeout also
            bounds the fallback's attempt).
        breaker: the primary's circuit breaker; ``None``: a ``CircuitBreaker()``
            with its defaults (opens after 5 consecutive failures, probes after 30 s).
        budget: judge tokens (``TokenBucket.per_period(n, 3600)`` for n per hour);
            every attempt's tokens are spent from it, and while it is empty the
            primary is not called. Assignable after construction.
        on_attempt: an observer called after every attempt (see ``add_observer``).
        isolate_cpu_bound: run a judge declaring ``cpu_bound = True`` in a
            ``ProcessJudge``, so it neither holds the GIL nor outlives its timeout.
        processes: child processes such a judge may use at once (started on
            demand): match the caller's concurrency, so that no evaluation waits
            for a child while a runaway one holds it.
        name: the judge's name; default ``"<primary>|<fallback>"`` or the primary's.
    """

    def __init__(
        self,
        primary: Judge,
        *,
        fallback: Judge | None = None,
        retry: RetryPolicy = RetryPolicy(),
        breaker: CircuitBreaker | None = None,
        budget: TokenBucket | None = None,
        on_attempt: AttemptObserver | None = None,
        isolate_cpu_bound: bool = True,
        processes: int = 4,
        nice: int = DEFAULT_NICE,
        name: str | None = None,
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.retry = retry
        self.breaker = breaker if breaker is not None else CircuitBreaker()
        self.budget = budget
        self._processes = processes
        self._nice = nice
        if name is None:
            name = primary.name if fallback is None else f"{primary.name}|{fallback.name}"
        self.name = name
        # The kind of the judge that answers when all is well; each result carries its own.
        self.annotator_kind: AnnotatorKind = primary.annotator_kind
        # Retries and the breaker are for a judge that waits on a server, whose failures
        # pass; a CPU-bound judge's failure (a timeout on a huge input) would only repeat.
        self._transient_failures = not is_cpu_bound(primary)
        # A CPU-bound judge runs in its own process, which enforces the attempt timeout
        # itself: from when the child has the record, so a child's start-up is not counted.
        self._run_primary = self._isolated(primary) if isolate_cpu_bound else primary
        self._run_fallback = (
            self._isolated(fallback) if isolate_cpu_bound and fallback is not None else fallback
        )
        self._observers: list[AttemptObserver] = [] if on_attempt is None else [on_attempt]
        # A CPU-bound primary in processes of its own making, alone: one attempt per record.
        self._single_attempt = (
            fallback is None
            and not self._transient_failures
            and isinstance(self._run_primary, ProcessJudge)
            and self._run_primary is not primary
            and self._run_primary.timeout is not None
        )
        # Several worker tasks (and threads, when a judge is shared) update these.
        self._lock = threading.Lock()
        self._attempts = 0
        self._retries = 0
        self._fallbacks = 0
        self._errors: dict[str, int] = {}

    def _isolated(self, judge: Judge) -> Judge:
        return isolate(
            judge, processes=self._processes, timeout=self.retry.attempt_timeout, nice=self._nice
        )

    def close(self) -> None:
        """End the judge processes this judge started (they also end with the process)."""
        for run in (self._run_primary, self._run_fallback):
            if (
                isinstance(run, ProcessJudge)
                and run is not self.primary
                and run is not self.fallback
            ):
                run.close()

    def make_signals_for(self, spec: SignalSpec) -> None:
        """Have the judge processes this judge started make each evaluation's signals for
        the sink ``spec`` describes (see ``ProcessJudge.make_signals_for``)."""
        for run in (self._run_primary, self._run_fallback):
            if (
                isinstance(run, ProcessJudge)
                and run is not self.primary
                and run is not self.fallback
            ):
                run.make_signals_for(spec)

    def add_observer(self, observer: AttemptObserver) -> None:
        """Call ``observer(evaluation)`` after every attempt, on the evaluating thread."""
        self._observers.append(observer)

    @property
    def breaker_open(self) -> bool:
        """True while the primary's breaker refuses calls (open or probing)."""
        return self.breaker.is_open

    @property
    def longest_evaluation(self) -> float:
        """Seconds one ``evaluate`` may take at most, retries and fallback included."""
        return self.retry.longest(fallback=self.fallback is not None)

    @property
    def stats(self) -> ResilienceStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return ResilienceStats(
                self._attempts, self._retries, self._fallbacks, dict(self._errors)
            )

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """Evaluate ``record`` as the module docstring describes; never raises."""
        if self.budget is None and self._single_attempt:
            return await self._only_attempt(record, metrics)
        # The caller's bound covers everything, fallback included.
        end = _end_of_bound()
        if not self._budget_available():
            self._count_error(errors.OVER_BUDGET)
            if self.fallback is not None:
                return await self._fall_back(record, metrics, None, end)
            return replace(
                failed(self.primary, errors.OVER_BUDGET, "judge-token budget spent"),
                status=EvalStatus.SKIPPED,
            )
        deadline = end
        if end is not None and self.fallback is not None:
            # Keep a share of the bound for the fallback, so a slow primary leaves time
            # to degrade.
            left = max(0.0, end - time.monotonic())
            deadline = end - min(self.retry.attempt_timeout, left * FALLBACK_SHARE)
        result = await self._primary_with_retries(record, metrics, deadline)
        if result.status is EvalStatus.ERROR and self.fallback is not None:
            return await self._fall_back(record, metrics, result, end)
        return result

    async def _primary_with_retries(
        self, record: RagRecord, metrics: Collection[str], deadline: float | None
    ) -> Evaluation:
        spent: list[Evaluation] = []
        retry = 0
        while True:
            if self._transient_failures and not self.breaker.allow():
                self._count_error(errors.BREAKER_OPEN)
                return _with_costs(failed(self.primary, errors.BREAKER_OPEN), spent)
            try:
                result = await self._attempt(self._run_primary, record, metrics, deadline)
            except asyncio.CancelledError:
                self.breaker.release_probe()
                raise
            if not self._transient_failures:
                return result
            if result.status is not EvalStatus.ERROR:
                self.breaker.record_success()
                return _with_costs(result, spent)
            error_type = result.error_type or errors.UNEXPECTED
            if error_type in errors.RECORD_LEVEL_ERRORS:
                # The judge is up and answering; this record is the trouble.
                self.breaker.record_success()
                return _with_costs(result, spent)
            self.breaker.record_failure()
            if error_type not in errors.RETRYABLE_ERRORS or retry >= self.retry.max_retries:
                return _with_costs(result, spent)
            delay = self.retry.delay(retry, result.retry_after)
            if deadline is not None and time.monotonic() + delay >= deadline:
                return _with_costs(result, spent)  # no time left for another attempt
            spent.append(result)
            retry += 1
            with self._lock:
                self._retries += 1
            await asyncio.sleep(delay)

    async def _fall_back(
        self,
        record: RagRecord,
        metrics: Collection[str],
        primary_failure: Evaluation | None,
        end: float | None,
    ) -> Evaluation:
        """The fallback's evaluation, saying why; the primary's failure when both fail.

        ``primary_failure`` is None when the primary was not called (budget spent).
        """
        assert self.fallback is not None and self._run_fallback is not None
        with self._lock:
            self._fallbacks += 1
        if primary_failure is None:
            why = f"{self.primary.name} not called ({errors.OVER_BUDGET})"
        else:
            why = f"{self.primary.name} failed ({primary_failure.error_type})"
            if primary_failure.explanation:
                why = f"{why}: {primary_failure.explanation}"
        second = await self._attempt(self._run_fallback, record, metrics, end)
        spent = [] if primary_failure is None else [primary_failure]
        if second.status is EvalStatus.ERROR:
            explanation = f"{why}; fallback {self.fallback.name} failed too ({second.error_type})"
            first = primary_failure or second
            return replace(
                _with_costs(first, [second] if first is not second else []), explanation=explanation
            )
        explanation = f"fell back to {self.fallback.name}: {why}"
        if second.explanation:
            explanation = f"{explanation}. {second.explanation}"
        return replace(_with_costs(second, spent), explanation=explanation)

    def start(
        self, record: RagRecord, metrics: Collection[str], timeout: float
    ) -> asyncio.Future[Evaluation] | None:
        """``Judge.start`` (``ragpulse.judges.base.StartsEvaluations``): when each record is
        one attempt of a CPU-bound primary in processes of this judge's making (no fallback,
        no budget), that attempt started in them without a coroutine, ``timeout`` bounding
        all of it from now, and observed as ``evaluate``'s would be; None otherwise, and
        while those processes have as many records as they take at once."""
        run = self._run_primary
        if self.budget is not None or not self._single_attempt:
            return None
        assert isinstance(run, ProcessJudge)
        return run.start(record, metrics, timeout, whole=True, observe=self._observe)

    async def _only_attempt(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """The one attempt of a CPU-bound primary in its own processes, with no fallback and
        no budget: nothing to retry, break, fall back to or spend, so it is called and
        counted without the layers around it. Its process ends it at the attempt timeout,
        and the caller's bound (``time_left()``) cuts it as it would any attempt."""
        started = time.perf_counter()
        try:
            result = await call_judge(self._run_primary, record, metrics)
        except asyncio.CancelledError:
            self._observe(
                failed(self.primary, errors.TIMEOUT, "cut by the caller", started=started)
            )
            raise
        self._observe(result)
        return result

    async def _attempt(
        self,
        judge: Judge,
        record: RagRecord,
        metrics: Collection[str],
        deadline: float | None = None,
    ) -> Evaluation:
        """One call, bounded and never raising; counted, spent and observed."""
        own_timeout = isinstance(judge, ProcessJudge) and judge.timeout is not None
        timeout = None if own_timeout else self.retry.attempt_timeout
        if deadline is not None:
            left = max(0.0, deadline - time.monotonic())
            timeout = left if timeout is None else min(timeout, left)
        started = time.perf_counter()
        try:
            result = await call_judge(judge, record, metrics, timeout)
        except asyncio.CancelledError:
            # The caller's bound (or a shutdown) cut the attempt before its own timeout
            # returned: a busy event loop fires both at once. It was still an attempt.
            self._observe(failed(judge, errors.TIMEOUT, "cut by the caller", started=started))
            raise
        self._observe(result)
        return result

    def _observe(self, result: Evaluation) -> None:
        """Count, spend and tell the observers of one finished (or cut) attempt."""
        with self._lock:
            self._attempts += 1
        if result.status is EvalStatus.ERROR:
            self._count_error(result.error_type or errors.UNEXPECTED)
        tokens = result.usage.prompt_tokens + result.usage.completion_tokens
        if tokens and self.budget is not None:
            self.budget.spend(tokens)
        for observer in self._observers:
            with _guard("a judge-attempt observer raised"):
                observer(result)

    def _budget_available(self) -> bool:
        return self.budget is None or self.budget.available() > 0

    def _count_error(self, error_type: str) -> None:
        with self._lock:
            self._errors[error_type] = self._errors.get(error_type, 0) + 1


def _with_costs(result: Evaluation, earlier: list[Evaluation]) -> Evaluation:
    """``result`` carrying the usage and time of the ``earlier`` attempts as well."""
    if not earlier:
        return result
    usage = result.usage
    duration = result.duration_ms
    for attempt in earlier:
        usage = usage + attempt.usage
        duration += attempt.duration_ms
    return replace(result, usage=usage, duration_ms=duration)
