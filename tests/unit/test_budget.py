"""TokenBucket: the budget behind evaluations per minute and judge tokens per hour."""

from __future__ import annotations

import threading

import pytest

from ragpulse._bucket import TokenBucket


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_new_bucket_admits_its_capacity_then_refuses() -> None:
    clock = ManualClock()
    bucket = TokenBucket(3, 1.0, clock=clock)
    assert [bucket.try_take() for _ in range(4)] == [True, True, True, False]


def test_refused_take_takes_nothing() -> None:
    clock = ManualClock()
    bucket = TokenBucket(2, 1.0, clock=clock)
    assert bucket.try_take(2)
    assert not bucket.try_take(1)
    assert bucket.available() == 0


def test_bucket_refills_at_its_rate() -> None:
    clock = ManualClock()
    bucket = TokenBucket(10, 2.0, clock=clock)
    assert bucket.try_take(10)
    clock.now += 1.5
    assert bucket.available() == pytest.approx(3.0)
    assert bucket.try_take(3)
    assert not bucket.try_take(0.5)


def test_refill_never_exceeds_capacity() -> None:
    clock = ManualClock()
    bucket = TokenBucket(5, 100.0, clock=clock)
    clock.now += 3600
    assert bucket.available() == 5


def test_spend_leaves_debt_that_refill_must_repay() -> None:
    clock = ManualClock()
    bucket = TokenBucket(100, 10.0, clock=clock)
    bucket.spend(130)
    assert bucket.available() == pytest.approx(-30)
    clock.now += 2.0
    assert bucket.available() == pytest.approx(-10)
    clock.now += 2.0
    assert bucket.available() == pytest.approx(10)


def test_per_period_admits_the_amount_over_each_period() -> None:
    clock = ManualClock()
    bucket = TokenBucket.per_period(120, 60.0, clock=clock)
    assert sum(bucket.try_take() for _ in range(500)) == 120
    clock.now += 60.0
    assert sum(bucket.try_take() for _ in range(500)) == 120


def test_clock_going_backwards_mints_no_tokens() -> None:
    clock = ManualClock()
    bucket = TokenBucket(4, 1.0, clock=clock)
    assert bucket.try_take(4)
    clock.now -= 100.0
    assert bucket.available() == 0
    clock.now += 100.0
    assert bucket.available() == 0


def test_concurrent_takers_never_take_more_than_the_capacity() -> None:
    bucket = TokenBucket(1000, 0.0)
    taken = [0] * 8
    start = threading.Barrier(8)

    def take(slot: int) -> None:
        start.wait()
        for _ in range(500):
            if bucket.try_take():
                taken[slot] += 1

    threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(taken) == 1000


@pytest.mark.parametrize(("capacity", "rate"), [(0, 1.0), (-1, 1.0), (1, -0.5)])
def test_invalid_bounds_are_refused(capacity: float, rate: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(capacity, rate)
