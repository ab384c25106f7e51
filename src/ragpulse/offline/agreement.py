"""How often the judge and people agree: Cohen's kappa over pass/fail verdicts, pure.

Each pair is one person's verdict on one request and the judge's verdict on the same
request and metric, both as pass (True) or fail (False). Raw agreement is the share
of pairs that match; Cohen's kappa discounts the matches two raters would reach by
chance given how often each says pass: ``(p_o - p_e) / (1 - p_e)``. It is 1 for
perfect agreement, 0 for chance level, negative below it, and undefined (NaN) when
both raters gave one and the same verdict to every pair (there is no chance to beat).
The 95% interval is the percentile bootstrap ``ragpulse calibrate`` uses for AUROC.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ragpulse.evaluation.types import Evaluation
from ragpulse.offline.calibrate import Calibration, LabelledRecord, bootstrap

__all__ = ["HUMAN_PASS_SCORE", "Agreement", "agreement", "cohen_kappa", "describe_agreements"]

HUMAN_PASS_SCORE = 0.5
"""A person's score at or above this is a pass; below it a fail."""


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels for the same items; NaN when undefined."""
    if len(first) != len(second):
        raise ValueError("both raters must label the same items")
    n = len(first)
    if n == 0:
        return float("nan")
    observed = sum(1 for a, b in zip(first, second, strict=True) if a == b) / n
    expected = sum(
        (first.count(label) / n) * (second.count(label) / n) for label in set(first) | set(second)
    )
    if math.isclose(expected, 1.0):
        return float("nan")
    return (observed - expected) / (1.0 - expected)


@dataclass(frozen=True, slots=True)
class Agreement:
    """The judge against people on one metric."""

    metric: str
    n: int
    """Pairs compared: feedback events with a verdict on a request the judge scored."""
    agreement: float
    """Share of pairs where both said pass or both said fail."""
    kappa: float
    kappa_interval: tuple[float, float]
    judge_pass: int
    human_pass: int


def agreement(
    metric: str, judge: Sequence[bool], human: Sequence[bool], rounds: int = 1000
) -> Agreement:
    """Raw agreement and Cohen's kappa (with a bootstrap interval) of paired verdicts."""
    n = len(judge)
    raw = sum(1 for a, b in zip(judge, human, strict=True) if a == b) / n if n else float("nan")
    interval = bootstrap(
        lambda picks: cohen_kappa([judge[i] for i in picks], [human[i] for i in picks]), n, rounds
    )
    return Agreement(
        metric=metric,
        n=n,
        agreement=raw,
        kappa=cohen_kappa(judge, human),
        kappa_interval=interval,
        judge_pass=sum(judge),
        human_pass=sum(human),
    )


def _fmt(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def describe_agreements(rows: Sequence[Agreement]) -> str:
    """The table ``ragpulse calibrate`` prints: one line per metric."""
    head = (
        f"{'metric':<16} {'n':>5} {'agreement':>10} {'kappa':>7} {'95% interval':>15} "
        f"{'judge pass':>11} {'people pass':>12}"
    )
    lines = [head]
    for row in rows:
        low, high = row.kappa_interval
        interval = "-" if math.isnan(low) else f"{_fmt(low)}-{_fmt(high)}"
        lines.append(
            f"{row.metric:<16} {row.n:>5} {_fmt(row.agreement):>10} {_fmt(row.kappa):>7} "
            f"{interval:>15} {row.judge_pass:>11} {row.human_pass:>12}"
        )
    return "\n".join(lines)


def label_agreement(
    labelled: Sequence[LabelledRecord],
    evaluations: Sequence[Evaluation],
    calibration: Calibration,
    rounds: int,
) -> Agreement:
    """The labels against the judge at the chosen threshold (an unscored record passes,
    as it is never flagged): the agreement this calibration file will give."""
    judge = [
        (score := e.score(calibration.metric)) is None or score >= calibration.threshold
        for e in evaluations
    ]
    human = [not item.hallucinated for item in labelled]
    return agreement(calibration.metric, judge, human, rounds)
