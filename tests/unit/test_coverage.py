"""Coverage: evaluations completed / asked for over a sliding window, the throttle it puts on
the sampler while evaluations are dropped, and its once-a-minute warning."""

from __future__ import annotations

import logging
import random

import pytest

from ragpulse import errors
from ragpulse.sampling.coverage import HEADROOM, MIN_FACTOR, Coverage
from ragpulse.sampling.sampler import EvalSampler


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _coverage(rate: float = 1.0, window: float = 60.0) -> tuple[Coverage, EvalSampler, ManualClock]:
    clock = ManualClock()
    sampler = EvalSampler(rate, clock=clock)
    return Coverage(sampler, window=window), sampler, clock


def _second(
    coverage: Coverage, clock: ManualClock, asked: int, completed: int, dropped: int = 0
) -> None:
    """One second of traffic, then the clock moves on."""
    for _ in range(asked):
        coverage.asked()
    for _ in range(completed):
        coverage.completed()
    for _ in range(dropped):
        coverage.dropped(errors.REASON_QUEUE_FULL)
    clock.now += 1.0


def test_coverage_is_completed_over_asked() -> None:
    coverage, _, clock = _coverage()
    for _ in range(10):
        _second(coverage, clock, asked=10, completed=4, dropped=6)
    assert coverage.value() == pytest.approx(0.4)


def test_coverage_is_none_while_nothing_was_asked() -> None:
    coverage, _, _ = _coverage()
    assert coverage.value() is None


def test_coverage_forgets_what_left_the_window() -> None:
    coverage, _, clock = _coverage(window=60.0)
    for _ in range(60):
        _second(coverage, clock, asked=10, completed=1, dropped=9)
    for _ in range(60):
        _second(coverage, clock, asked=10, completed=10)
    assert coverage.value() == pytest.approx(1.0)


def test_coverage_memory_is_bounded_by_the_window() -> None:
    coverage, _, clock = _coverage(window=60.0)
    for _ in range(10_000):
        _second(coverage, clock, asked=1, completed=1)
    assert len(coverage._buckets) <= 60


def test_main_reason_is_the_most_frequent_drop() -> None:
    coverage, _, _ = _coverage()
    coverage.dropped(errors.REASON_OVER_BUDGET)
    coverage.dropped(errors.REASON_QUEUE_FULL)
    coverage.dropped(errors.REASON_QUEUE_FULL)
    assert coverage.main_reason() == errors.REASON_QUEUE_FULL


def test_drops_lower_the_effective_rate_to_what_the_judge_sustains() -> None:
    coverage, sampler, clock = _coverage(rate=0.5)
    # The rate asks for 100 evaluations a second; the judge finishes 20, the queue drops the rest.
    for _ in range(5):
        _second(coverage, clock, asked=100, completed=20, dropped=80)
    coverage.asked()  # the next second's first unit applies the feedback
    assert sampler.throttle == pytest.approx(HEADROOM * 0.2, rel=0.02)
    assert sampler.effective_rate == pytest.approx(0.5 * HEADROOM * 0.2, rel=0.02)


def test_effective_rate_recovers_when_drops_stop() -> None:
    coverage, sampler, clock = _coverage(rate=1.0)
    for _ in range(5):
        _second(coverage, clock, asked=100, completed=10, dropped=90)
    coverage.asked()
    lowered = sampler.throttle
    assert lowered < 0.2
    for _ in range(60):
        _second(coverage, clock, asked=100, completed=100)
    assert sampler.throttle == 1.0
    assert sampler.effective_rate == 1.0


def test_effective_rate_never_falls_below_the_floor() -> None:
    coverage, sampler, clock = _coverage(rate=1.0)
    for _ in range(5):
        _second(coverage, clock, asked=100, completed=0, dropped=100)
    coverage.asked()
    assert sampler.throttle == pytest.approx(MIN_FACTOR)


def test_throttled_sample_is_a_deterministic_subset_of_the_rate_sample() -> None:
    rng = random.Random(3)
    ids = [rng.getrandbits(128) for _ in range(20_000)]
    sampler = EvalSampler(0.5)
    full = {i for i in ids if sampler.should_evaluate(i).evaluate}
    sampler.set_throttle(0.2)
    lowered = {i for i in ids if sampler.should_evaluate(i).evaluate}
    again = {i for i in ids if sampler.should_evaluate(i).evaluate}
    assert lowered == again
    assert lowered < full
    assert len(lowered) / len(ids) == pytest.approx(0.1, abs=0.01)


def test_traces_left_out_by_the_throttle_are_counted_as_throttled() -> None:
    sampler = EvalSampler(1.0)
    sampler.set_throttle(0.5)
    high = (1 << 64) - 1  # the highest trace id in the rate's sample
    assert sampler.should_evaluate(high).reason == errors.REASON_THROTTLED


def test_throttle_is_refused_outside_zero_to_one() -> None:
    with pytest.raises(ValueError, match="throttle"):
        EvalSampler(1.0).set_throttle(0.0)


def test_low_coverage_warns_once_a_minute_naming_coverage_rate_and_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    coverage, _, clock = _coverage(rate=0.5)
    with caplog.at_level(logging.WARNING, logger="ragpulse.coverage"):
        for _ in range(59):
            _second(coverage, clock, asked=10, completed=1, dropped=9)
        first = [r.getMessage() for r in caplog.records]
        # The first warning came at second 1; the next is due 60 s later, at second 61.
        for _ in range(3):
            _second(coverage, clock, asked=10, completed=1, dropped=9)
    assert len(first) == 1
    assert "coverage 10%" in first[0]
    assert "sample rate 0.5" in first[0]
    assert "queue_full" in first[0]
    assert len(caplog.records) == 2


def test_full_coverage_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    coverage, _, clock = _coverage()
    with caplog.at_level(logging.WARNING, logger="ragpulse.coverage"):
        for _ in range(120):
            _second(coverage, clock, asked=10, completed=10)
    assert caplog.records == []


def test_evaluations_still_running_are_not_called_missing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Four asked for, one dropped, three still running when the second turns: a quarter was
    # dropped, and nothing says none completed or that a rate of 1 was "lowered".
    coverage, sampler, clock = _coverage(rate=1.0)
    with caplog.at_level(logging.WARNING, logger="ragpulse.coverage"):
        for _ in range(4):
            coverage.asked()
        coverage.dropped(errors.NO_EVIDENCE)
        clock.now += 1.0
        coverage.asked()
    [message] = [r.getMessage() for r in caplog.records]
    assert "coverage 75%" in message
    assert "1 of 4 evaluations asked for in the last 60 s were dropped" in message
    assert "0 completed, 3 still running" in message
    assert "lowered" not in message
    assert sampler.effective_rate == 1.0


def test_lowered_rate_is_named_only_when_it_was_lowered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    coverage, sampler, clock = _coverage(rate=1.0)
    with caplog.at_level(logging.WARNING, logger="ragpulse.coverage"):
        for _ in range(3):
            _second(coverage, clock, asked=10, completed=2, dropped=8)
    assert sampler.effective_rate < 1.0
    assert any("effective rate lowered to" in r.getMessage() for r in caplog.records)
