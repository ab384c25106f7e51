"""How many of a window's answers may fail before an alert may say something changed.

Pure arithmetic, no YAML: ``render_rules.py`` writes what this computes into PromQL, and
docs/operations.md derives it by hand ("Alerts that count what the judge can decide").

A judge labels an answer ``fail`` with a measured chance: ``false_fail`` (p0) when the answer
is correct, ``detection`` (p1) when it is hallucinated. A service whose share of hallucinated
answers is h therefore fails a share f(h) = (1 − h)·p0 + h·p1 of its evaluations, and a window
of n evaluations fails X ~ Binomial(n, f(h)) of them. Bernstein's inequality bounds the chance
that X exceeds its mean by t:

    P(X − n·f ≥ t) ≤ exp(−t² / (2·n·f·(1 − f) + 2t/3))

so with L = ln(1/α) the bound is exceeded with a chance of at most α from

    t(n) = L/3 + sqrt(L²/9 + 2·L·n·f·(1 − f))

on, for every n: no normal approximation, no minimum sample the bound needs by itself. α is
the chance allowed to one evaluation of the rule; a rule evaluated every ``interval`` seconds
for a month is evaluated month/interval times, so α = (false pages allowed a month) /
(evaluations a month) keeps the month's chance of a false page under its allowance whatever
the correlation between consecutive windows (Bonferroni's inequality; the rules' ``for:`` only
lowers it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

MONTH_SECONDS = 30 * 24 * 3600
RULE_INTERVAL_SECONDS = 15
"""How often Prometheus evaluates the rules (the kit's ``evaluation_interval``)."""
FALSE_PAGES_PER_MONTH = 0.01
"""The chance a page rule may have of firing on a service with nothing wrong, per month."""
FALSE_TICKETS_PER_MONTH = 0.1
"""The same for a ticket."""


class JudgeRates(NamedTuple):
    """What a judge's ``fail`` label means for one metric, measured on labelled answers."""

    false_fail: float
    """p0: the share of correct answers it labels ``fail``."""
    detection: float
    """p1: the share of hallucinated answers it labels ``fail``."""

    def fail_share(self, hallucinated: float) -> float:
        """f(h): the share of a service's evaluations labelled ``fail`` when a share
        ``hallucinated`` of its answers is hallucinated."""
        return (1.0 - hallucinated) * self.false_fail + hallucinated * self.detection


def log_inverse_alpha(
    false_alarms_per_month: float, interval_seconds: float = RULE_INTERVAL_SECONDS
) -> float:
    """L = ln(1/α), α the chance one evaluation of a rule may have of a false alarm."""
    if not 0.0 < false_alarms_per_month < 1.0:
        raise ValueError(f"false alarms per month {false_alarms_per_month:g}: choose in (0, 1)")
    evaluations = MONTH_SECONDS / interval_seconds
    return math.log(evaluations / false_alarms_per_month)


def excess(n: float, share: float, log_inv_alpha: float) -> float:
    """t(n): how far above n·``share`` a window's fail count may reach by chance alone."""
    variance = n * share * (1.0 - share)
    return log_inv_alpha / 3 + math.sqrt(log_inv_alpha**2 / 9 + 2 * log_inv_alpha * variance)


def fires(fails: float, n: float, share: float, log_inv_alpha: float) -> bool:
    """Whether a window of ``n`` evaluations with ``fails`` labelled ``fail`` is above what a
    service failing a share ``share`` reaches by chance."""
    return fails > n * share + excess(n, share, log_inv_alpha)


def min_window(healthy: float, broken: float, log_inv_alpha: float) -> int:
    """The fewest evaluations in which a window failing at ``broken`` on average is above the
    bound of one failing at ``healthy``: below it the rule cannot tell them apart.

    ``broken`` = p1 (every answer hallucinated) gives the smallest window worth alerting on.
    """
    if broken <= healthy:
        raise ValueError(
            f"a broken service fails {broken:.3f} of its evaluations, a healthy one "
            f"{healthy:.3f}: the judge cannot tell them apart"
        )
    n = 1
    while not fires(broken * n, n, healthy, log_inv_alpha):
        n *= 2
    low, high = n // 2, n
    while high - low > 1:
        middle = (low + high) // 2
        if fires(broken * middle, middle, healthy, log_inv_alpha):
            high = middle
        else:
            low = middle
    return high


WINDOWS: Sequence[tuple[str, int]] = (("15m", 900), ("1h", 3600), ("6h", 21600))
"""The windows a rule may count over, shortest first."""


def choose_window(evaluations_per_second: float, needed: int) -> tuple[str, int]:
    """The shortest window expected to hold ``needed`` evaluations; the longest if none does."""
    if evaluations_per_second <= 0:
        raise ValueError("the evaluations a second must be above 0")
    for name, seconds in WINDOWS:
        if evaluations_per_second * seconds >= needed:
            return name, seconds
    return WINDOWS[-1]
