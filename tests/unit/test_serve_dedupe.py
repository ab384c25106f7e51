"""The dedupe memory of ragpulse serve: a unit seen again within the window, never past it."""

from __future__ import annotations

from ragpulse.serve._trust import SeenUnits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_unit_seen_again_within_the_window_is_not_new() -> None:
    seen = SeenUnits(window=60.0, max_units=10, clock=Clock())

    assert seen.first_time(1, 2)
    assert not seen.first_time(1, 2)
    assert seen.first_time(1, 3)


def test_a_unit_seen_again_after_the_window_is_new_again() -> None:
    clock = Clock()
    seen = SeenUnits(window=60.0, max_units=10, clock=clock)
    seen.first_time(1, 2)

    clock.now += 61.0

    assert seen.first_time(1, 2)


def test_memory_holds_at_most_the_bound_forgetting_the_oldest() -> None:
    seen = SeenUnits(window=60.0, max_units=3, clock=Clock())
    for span_id in range(1, 6):
        seen.first_time(1, span_id)

    assert len(seen) == 3
    assert not seen.first_time(1, 5)
    assert seen.first_time(1, 1)
