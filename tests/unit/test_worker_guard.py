"""The internal-error guard: ragpulse's own failures are logged, throttled, and never raised."""

from __future__ import annotations

import logging

import pytest

from ragpulse._guard import Guard, ThrottleFilter


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_exception_inside_the_guard_is_logged_and_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = Guard("ragpulse.tests.guard.swallow")
    with (
        caplog.at_level(logging.ERROR, logger="ragpulse.tests.guard.swallow"),
        guard("hook %s raised", "x"),
    ):
        raise RuntimeError("user hook bug")
    (record,) = caplog.records
    assert record.getMessage() == "hook x raised"
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError


def test_a_failure_repeated_in_a_loop_is_logged_once_per_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = Guard("ragpulse.tests.guard.loop")
    with caplog.at_level(logging.ERROR, logger="ragpulse.tests.guard.loop"):
        for _ in range(1000):
            with guard("the callback raised"):
                raise ValueError("again")
    assert len(caplog.records) == 1


def test_different_failures_are_each_logged() -> None:
    throttle = ThrottleFilter(window=60.0, clock=ManualClock())
    first = logging.LogRecord("r", logging.ERROR, __file__, 1, "a failed", None, None)
    second = logging.LogRecord("r", logging.ERROR, __file__, 1, "b failed", None, None)
    assert throttle.filter(first) and throttle.filter(second)


def test_the_next_record_after_the_window_says_how_many_were_suppressed() -> None:
    clock = ManualClock()
    throttle = ThrottleFilter(window=60.0, clock=clock)

    def record() -> logging.LogRecord:
        return logging.LogRecord("r", logging.WARNING, __file__, 1, "judge %s raised", ("x",), None)

    assert throttle.filter(record())
    assert not any(throttle.filter(record()) for _ in range(41))
    clock.now += 61.0
    later = record()
    assert throttle.filter(later)
    assert later.getMessage() == "judge x raised (41 more like this suppressed)"
