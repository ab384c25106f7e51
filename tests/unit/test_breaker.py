"""CircuitBreaker: closed -> open after N consecutive failures -> one half-open probe."""

from __future__ import annotations

import pytest

from ragpulse.judging.breaker import BreakerState, CircuitBreaker


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def _opened(clock: ManualClock, threshold: int = 3, reset: float = 10.0) -> CircuitBreaker:
    breaker = CircuitBreaker(threshold, reset, clock=clock)
    for _ in range(threshold):
        assert breaker.allow()
        breaker.record_failure()
    return breaker


def test_closed_breaker_allows_calls() -> None:
    breaker = CircuitBreaker(3, 10.0)
    assert breaker.allow()
    assert breaker.state is BreakerState.CLOSED
    assert not breaker.is_open


def test_breaker_opens_after_threshold_consecutive_failures() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(3, 10.0, clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    assert breaker.is_open


def test_a_success_resets_the_consecutive_failure_count() -> None:
    breaker = CircuitBreaker(3, 10.0)
    breaker.record_failure()
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED


def test_open_breaker_refuses_until_reset_timeout() -> None:
    clock = ManualClock()
    breaker = _opened(clock)
    clock.now += 9.9
    assert not breaker.allow()


def test_after_reset_timeout_exactly_one_probe_goes_through() -> None:
    clock = ManualClock()
    breaker = _opened(clock)
    clock.now += 10.0
    assert breaker.allow()
    assert breaker.state is BreakerState.HALF_OPEN
    assert not breaker.allow()
    assert not breaker.allow()


def test_successful_probe_closes_the_breaker() -> None:
    clock = ManualClock()
    breaker = _opened(clock)
    clock.now += 10.0
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED
    assert breaker.allow()


def test_failed_probe_reopens_for_another_full_reset_timeout() -> None:
    clock = ManualClock()
    breaker = _opened(clock)
    clock.now += 10.0
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    clock.now += 9.9
    assert not breaker.allow()
    clock.now += 0.1
    assert breaker.allow()


def test_released_probe_lets_the_next_caller_probe_at_once() -> None:
    clock = ManualClock()
    breaker = _opened(clock)
    clock.now += 10.0
    assert breaker.allow()
    breaker.release_probe()
    assert breaker.state is BreakerState.OPEN
    assert breaker.allow()


def test_release_probe_leaves_a_closed_breaker_closed() -> None:
    breaker = CircuitBreaker(3, 10.0)
    breaker.release_probe()
    assert breaker.state is BreakerState.CLOSED


@pytest.mark.parametrize(("threshold", "reset"), [(0, 1.0), (1, -1.0)])
def test_invalid_bounds_are_refused(threshold: int, reset: float) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(threshold, reset)
