"""Which requests get evaluated: ``EvalSampler``.

The decision is deterministic by trace id, exactly like OpenTelemetry's
``TraceIdRatioBased``: a trace is in the sample when the low 64 bits of its trace
id are below ``round(rate * 2**64)``. So every process and service that sees the
same trace decides the same way, a trace sampled at 0.1 is also in the 0.2 set
(the selection is monotone in the rate), and a trace the OTel sampler kept at
rate ``r`` is evaluated by ragpulse at any rate ``>= r``.

Order of the rules, each decision naming its reason (``ragpulse.errors.REASON_*``):

1. forced: ``attributes[force_attribute]`` is truthy, or the unit's name or its
   ``http.route`` matches an ``always_evaluate`` glob -> ``forced`` (the rate is
   skipped).
2. rate: the trace id is above the (possibly boosted) bound -> ``not_sampled``.
3. throttle: the trace id is above the bound of the rate lowered to what the judge
   sustains (``set_throttle``, steered by ``ragpulse.sampling.coverage.Coverage`` while
   evaluations are dropped) -> ``throttled``. The same trace-id hash against a
   smaller ratio: still deterministic and monotone.
4. otherwise ``evaluated``.

The sampler holds no budget. ``max_evaluations_per_minute`` and
``max_judge_tokens_per_hour`` are settings it carries for the processor, which
turns them into the budgets that spend them: an ``EvaluationBudget`` that refuses
sampled and forced units alike past the cap (``over_budget``: a cost cap a flag
on every request must not blow through), and the judge's token budget, which
degrades an LLM judge to its fallback (or skips) rather than refusing requests,
so a token-heavy hour still gets lexical scores.
"""

from __future__ import annotations

import collections
import fnmatch
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse import errors, semconv
from ragpulse.settings import Settings

__all__ = ["Decision", "EvalSampler"]


_TRACE_ID_LOW_64 = (1 << 64) - 1
_TRUE_STRINGS = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether to evaluate one request, and why (a ``ragpulse.errors.REASON_*`` value)."""

    evaluate: bool
    reason: str


# Decisions are immutable and few: hand out shared instances so the request thread
# allocates nothing per call.
_EVALUATED = Decision(True, errors.REASON_EVALUATED)
_FORCED = Decision(True, errors.REASON_FORCED)
_NOT_SAMPLED = Decision(False, errors.REASON_NOT_SAMPLED)
_THROTTLED = Decision(False, errors.REASON_THROTTLED)


def _bound_for_rate(rate: float) -> int:
    # Same arithmetic as opentelemetry.sdk.trace.sampling.TraceIdRatioBased.get_bound_for_rate.
    return round(rate * (_TRACE_ID_LOW_64 + 1))


def _check_limit(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(value)


def _check_rate(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise ValueError(f"{name} must be in [0.0, 1.0], got {value!r}")
    return float(value)


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_STRINGS
    return bool(value)


class EvalSampler:
    """Decides which requests are evaluated: rate by trace id, rules, adaptive boost.

    Args:
        rate: share of traces to evaluate, chosen by trace id (0.0 to 1.0).
        max_evaluations_per_minute: cap on admitted evaluations, bursting up to
            one minute's worth; the processor that uses this sampler enforces it
            (``over_budget``). ``None``: no limit.
        max_judge_tokens_per_hour: cap on judge tokens; the processor hands it to
            the judge, which degrades to its fallback (or skips) while it is spent.
        always_evaluate: ``fnmatch`` globs on the unit's name or ``http.route``
            that are always evaluated (still within the per-minute cap).
        force_attribute: attribute whose truthy value forces evaluation.
        adaptive_threshold: while the mean of the last ``adaptive_window``
            groundedness scores is below it, the rate is ``max(rate, adaptive_rate)``.
        clock: monotonic clock in seconds for the budgets built from the caps
            (tests pass their own).
    """

    def __init__(
        self,
        rate: float = 1.0,
        *,
        max_evaluations_per_minute: float | None = None,
        max_judge_tokens_per_hour: float | None = None,
        always_evaluate: Sequence[str] = (),
        force_attribute: str = semconv.RAG_FORCE_EVALUATION,
        adaptive_threshold: float | None = None,
        adaptive_rate: float = 1.0,
        adaptive_window: int = 50,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = _check_rate("rate", rate)
        self._adaptive_rate = _check_rate("adaptive_rate", adaptive_rate)
        if adaptive_window < 1:
            raise ValueError(f"adaptive_window must be at least 1, got {adaptive_window!r}")
        self._adaptive_threshold = adaptive_threshold
        self._base_bound = _bound_for_rate(self._rate)
        self._boosted_bound = _bound_for_rate(max(self._rate, self._adaptive_rate))
        # Read without a lock on the request thread: rebinding an int attribute is atomic,
        # and a decision made with the bound from one score earlier is still a right one.
        self._bound = self._base_bound
        self._boosted = False
        # The share of the rate in force that is evaluated while the judge cannot keep up
        # (1.0: all of it), and the bound it gives; rebound together under the lock.
        self._throttle = 1.0
        self._throttled_bound = self._bound

        self._max_evaluations_per_minute = _check_limit(
            "max_evaluations_per_minute", max_evaluations_per_minute
        )
        self._max_judge_tokens_per_hour = _check_limit(
            "max_judge_tokens_per_hour", max_judge_tokens_per_hour
        )
        self._clock = clock

        self._force_attribute = force_attribute
        self._always = (
            re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in always_evaluate))
            if always_evaluate
            else None
        )

        self._scores: collections.deque[float] = collections.deque(maxlen=adaptive_window)
        # record_score may run on several worker threads (several processors share a sampler);
        # the window, the boost flag and the throttle, and the bounds derived from them,
        # change together under one lock.
        self._scores_lock = threading.Lock()

    @classmethod
    def from_env(cls, **overrides: Any) -> EvalSampler:
        """A sampler configured from ``RAGPULSE_SAMPLE_RATE``,
        ``RAGPULSE_MAX_EVALUATIONS_PER_MINUTE`` and ``RAGPULSE_MAX_JUDGE_TOKENS_PER_HOUR``
        as ``Settings`` reads them (an unusable value is logged once and ignored);
        keyword arguments win over the environment.
        """
        return cls.from_settings(Settings.load(), **overrides)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> EvalSampler:
        """The sampler ``settings`` describe; keyword arguments win over them."""
        kwargs: dict[str, Any] = {
            "rate": settings.sample_rate,
            "max_evaluations_per_minute": settings.max_evaluations_per_minute,
            "max_judge_tokens_per_hour": settings.max_judge_tokens_per_hour,
            "always_evaluate": settings.always_evaluate,
        }
        kwargs.update(overrides)
        return cls(**kwargs)

    @property
    def rate(self) -> float:
        """The configured rate."""
        return self._rate

    @property
    def max_evaluations_per_minute(self) -> float | None:
        """The evaluations-per-minute cap the processor enforces; ``None``: no limit."""
        return self._max_evaluations_per_minute

    @property
    def max_judge_tokens_per_hour(self) -> float | None:
        """The judge-token cap the processor hands to the judge; ``None``: no limit."""
        return self._max_judge_tokens_per_hour

    @property
    def clock(self) -> Callable[[], float]:
        """The monotonic clock budgets built from the caps run on."""
        return self._clock

    @property
    def effective_rate(self) -> float:
        """The rate in force now: boosted while recent groundedness is below the threshold,
        times the throttle while the judge cannot keep up."""
        return self._unthrottled_rate() * self._throttle

    @property
    def throttle(self) -> float:
        """The share of the rate in force that is evaluated (1.0 unless lowered)."""
        return self._throttle

    def set_throttle(self, factor: float) -> None:
        """Evaluate only ``factor`` (0 to 1] of the traces the rate selects: those of the
        lowest trace ids, so the decision stays deterministic by trace id."""
        if not 0.0 < factor <= 1.0:
            raise ValueError(f"throttle must be in (0.0, 1.0], got {factor!r}")
        with self._scores_lock:
            self._throttle = float(factor)
            self._rebind()

    def _unthrottled_rate(self) -> float:
        return max(self._rate, self._adaptive_rate) if self._boosted else self._rate

    def _rebind(self) -> None:
        self._bound = self._boosted_bound if self._boosted else self._base_bound
        self._throttled_bound = (
            self._bound
            if self._throttle >= 1.0
            else _bound_for_rate(self._unthrottled_rate() * self._throttle)
        )

    def should_evaluate(
        self,
        trace_id: int,
        *,
        name: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Decide for one evaluation unit. Cheap and allocation-free on the common path."""
        if self._is_forced(name, attributes):
            return _FORCED
        low = trace_id & _TRACE_ID_LOW_64
        if low >= self._bound:
            return _NOT_SAMPLED
        if low >= self._throttled_bound:
            return _THROTTLED
        return _EVALUATED

    def in_sample(self, trace_id: int) -> bool:
        """Whether the rate in force (boost included) selects ``trace_id``.

        The part of the decision that needs nothing but the trace id, so a relay can
        make it before decoding a span; it counts nothing. A unit of a trace in the
        sample is still decided by ``should_evaluate`` (the throttle, the reasons).
        """
        return trace_id & _TRACE_ID_LOW_64 < self._bound

    @property
    def selects_nothing(self) -> bool:
        """Whether no trace id is in the sample now (rate 0, not boosted)."""
        return self._bound == 0

    @property
    def has_rules(self) -> bool:
        """Whether ``always_evaluate`` globs were given (names or routes that force)."""
        return self._always is not None

    @property
    def force_attribute(self) -> str:
        """The attribute whose truthy value forces evaluation."""
        return self._force_attribute

    def forces(self, name: str | None, attributes: Mapping[str, Any] | None) -> bool:
        """Whether a unit of this name and attributes is evaluated whatever its trace id."""
        return self._is_forced(name, attributes)

    def _is_forced(self, name: str | None, attributes: Mapping[str, Any] | None) -> bool:
        if attributes is not None:
            flag = attributes.get(self._force_attribute)
            if flag is not None and _truthy(flag):
                return True
        if self._always is None:
            return False
        if name is not None and self._always.match(name):
            return True
        if attributes is not None:
            route = attributes.get(semconv.HTTP_ROUTE)
            if isinstance(route, str) and self._always.match(route):
                return True
        return False

    def record_score(self, groundedness: float | None) -> None:
        """Feed one groundedness score to the adaptive boost; ``None`` (undefined) is ignored."""
        if groundedness is None or self._adaptive_threshold is None:
            return
        if math.isnan(groundedness):
            return
        with self._scores_lock:
            self._scores.append(groundedness)
            # The window is small and this runs on the worker thread, not the request's:
            # an exact sum each time beats a running sum that drifts.
            mean = math.fsum(self._scores) / len(self._scores)
            self._boosted = mean < self._adaptive_threshold
            self._rebind()
