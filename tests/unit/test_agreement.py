"""Cohen's kappa and the agreement ``ragpulse calibrate`` prints, checked on known values."""

from __future__ import annotations

import math

import pytest

from ragpulse.offline.agreement import agreement, cohen_kappa


def _table(
    both_yes: int, first_only: int, second_only: int, both_no: int
) -> tuple[list[bool], list[bool]]:
    """Two raters' labels from a 2x2 table: (yes, yes), (yes, no), (no, yes), (no, no)."""
    first = [True] * (both_yes + first_only) + [False] * (second_only + both_no)
    second = [True] * both_yes + [False] * first_only + [True] * second_only + [False] * both_no
    return first, second


@pytest.mark.parametrize(
    ("table", "kappa"),
    [
        # p_o = 0.70, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.50: kappa = 0.20 / 0.50.
        ((20, 5, 10, 15), 0.4),
        # Same observed agreement (0.60), different marginals (Cohen's kappa paradox):
        # p_e = 0.6 * 0.7 + 0.4 * 0.3 = 0.54, so 0.06 / 0.46; and p_e = 0.46, so 0.14 / 0.54.
        ((45, 15, 25, 15), 0.06 / 0.46),
        ((25, 35, 5, 35), 0.14 / 0.54),
    ],
)
def test_kappa_of_textbook_tables(table: tuple[int, int, int, int], kappa: float) -> None:
    first, second = _table(*table)
    assert cohen_kappa(first, second) == pytest.approx(kappa)


def test_kappa_is_one_for_full_agreement_and_minus_one_for_full_disagreement() -> None:
    labels = [True, False, True, False]
    assert cohen_kappa(labels, labels) == pytest.approx(1.0)
    assert cohen_kappa(labels, [not x for x in labels]) == pytest.approx(-1.0)


def test_kappa_is_undefined_when_both_raters_always_say_the_same_thing() -> None:
    assert math.isnan(cohen_kappa([True] * 5, [True] * 5))


def test_kappa_is_zero_when_one_rater_always_says_the_same_thing() -> None:
    # Agreement 0.5 is exactly what chance gives when one rater never varies.
    assert cohen_kappa([True, True, True, True], [True, False, True, False]) == pytest.approx(0.0)


def test_kappa_refuses_raters_of_different_items() -> None:
    with pytest.raises(ValueError):
        cohen_kappa([True], [True, False])


def test_agreement_counts_pairs_and_passes_and_brackets_kappa() -> None:
    judge, human = _table(20, 5, 10, 15)
    row = agreement("faithfulness", judge, human, rounds=300)
    assert (row.n, row.judge_pass, row.human_pass) == (50, 25, 30)
    assert row.agreement == pytest.approx(0.7)
    assert row.kappa == pytest.approx(0.4)
    low, high = row.kappa_interval
    assert -1.0 <= low < row.kappa < high <= 1.0


def test_agreement_without_bootstrap_has_no_interval() -> None:
    row = agreement("groundedness", [True, False], [True, True], rounds=0)
    assert all(math.isnan(bound) for bound in row.kappa_interval)
