"""Whether a metric's pass/fail label keeps its promise on labelled answers, and at what threshold.

A ``fail`` label pages someone, so it is judged by two shares of labelled answers: the
correct ones it labels ``fail`` (``false_fail``) and the hallucinated ones (``detection``).
A threshold keeps the promise when ``false_fail`` is at most ``max_false_fail`` and
``detection`` at least ``min_separation`` times ``false_fail`` (and above zero: a label
that never fails promises nothing). Records without a score carry no label and count in
neither share. Pure functions over scores and labels; ``scripts/derive_label_policy.py``
runs them on RAGTruth to write each judge's declaration (``ragpulse.judges._labels``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ragpulse.judges._labels import MAX_FALSE_FAIL, MIN_SEPARATION, TARGET_FALSE_FAIL

__all__ = [
    "CANDIDATES",
    "FailRates",
    "cross_validated",
    "declaration",
    "fail_rates",
    "folds_by_group",
    "keeps_promise",
    "promise_threshold",
]

CANDIDATES: tuple[float, ...] = tuple(round(i / 100, 2) for i in range(1, 101))
"""Thresholds tried, in hundredths: a shipped threshold reads as a round number."""


@dataclass(frozen=True, slots=True)
class FailRates:
    """The shares of correct and of hallucinated answers a threshold labels ``fail``."""

    false_fail: float
    detection: float
    correct: int
    hallucinated: int


def fail_rates(
    scores: Sequence[float | None], hallucinated: Sequence[bool], threshold: float
) -> FailRates:
    """The shares labelled ``fail`` (score below ``threshold``) among the scored answers."""
    correct = [
        s < threshold for s, h in zip(scores, hallucinated, strict=True) if s is not None and not h
    ]
    wrong = [
        s < threshold for s, h in zip(scores, hallucinated, strict=True) if s is not None and h
    ]
    return FailRates(
        sum(correct) / len(correct) if correct else 0.0,
        sum(wrong) / len(wrong) if wrong else 0.0,
        len(correct),
        len(wrong),
    )


def keeps_promise(
    rates: FailRates,
    max_false_fail: float = MAX_FALSE_FAIL,
    min_separation: float = MIN_SEPARATION,
) -> bool:
    """Whether these shares keep the promise (see the module docstring)."""
    return (
        rates.false_fail <= max_false_fail
        and rates.detection > 0.0
        and rates.detection >= min_separation * rates.false_fail
    )


def promise_threshold(
    scores: Sequence[float | None],
    hallucinated: Sequence[bool],
    max_false_fail: float = MAX_FALSE_FAIL,
    min_separation: float = MIN_SEPARATION,
) -> float | None:
    """The threshold that keeps the promise with the most detection (the lower on a tie:
    fewer correct answers fail); ``None`` when no threshold keeps it."""
    best: tuple[float, float] | None = None
    for threshold in CANDIDATES:
        rates = fail_rates(scores, hallucinated, threshold)
        if keeps_promise(rates, max_false_fail, min_separation) and (
            best is None or rates.detection > best[1]
        ):
            best = (threshold, rates.detection)
    return None if best is None else best[0]


def folds_by_group(groups: Sequence[str], k: int, seed: int = 0) -> list[int]:
    """Each answer's fold of ``k``; the answers of one group (about one source document)
    share a fold, so no source is both chosen on and scored."""
    names = sorted(set(groups))
    random.Random(seed).shuffle(names)
    fold_of = {name: i % k for i, name in enumerate(names)}
    return [fold_of[g] for g in groups]


def cross_validated(
    scores: Sequence[float | None],
    hallucinated: Sequence[bool],
    folds: Sequence[int],
    max_false_fail: float = MAX_FALSE_FAIL,
    min_separation: float = MIN_SEPARATION,
) -> tuple[FailRates, list[float | None]]:
    """The shares on answers the choice never saw: each fold labelled at the threshold
    ``promise_threshold`` chooses on the others (none chosen: the fold gets no label), the
    folds' labels pooled. Also the threshold chosen for each fold."""
    labels: list[bool | None] = [None] * len(scores)
    chosen: list[float | None] = []
    for fold in sorted(set(folds)):
        train = [i for i, f in enumerate(folds) if f != fold]
        threshold = promise_threshold(
            [scores[i] for i in train], [hallucinated[i] for i in train], max_false_fail,
            min_separation,
        )  # fmt: skip
        chosen.append(threshold)
        for i, f in enumerate(folds):
            score = scores[i]
            if f == fold and threshold is not None and score is not None:
                labels[i] = score < threshold
    correct = [bool(x) for x, h in zip(labels, hallucinated, strict=True) if not h]
    wrong = [bool(x) for x, h in zip(labels, hallucinated, strict=True) if h]
    # An answer without a score, or in a fold without a threshold, is never labelled fail.
    scored_correct = sum(
        1 for s, h in zip(scores, hallucinated, strict=True) if s is not None and not h
    )
    scored_wrong = sum(1 for s, h in zip(scores, hallucinated, strict=True) if s is not None and h)
    rates = FailRates(
        sum(correct) / scored_correct if scored_correct else 0.0,
        sum(wrong) / scored_wrong if scored_wrong else 0.0,
        scored_correct,
        scored_wrong,
    )
    return rates, chosen


def declaration(
    scores: Sequence[float | None],
    hallucinated: Sequence[bool],
    folds: Sequence[int],
    own_threshold: float | None,
    target: float = TARGET_FALSE_FAIL,
) -> dict[str, float | None]:
    """A judge's declaration for one metric, as ``ragpulse.judges._label_figures`` holds it:
    the threshold ``promise_threshold`` chooses on all the answers (``None``: declined) with
    its shares, or the shares at ``own_threshold`` (the metric's) where it is declined, and
    the shares cross-validated over ``folds``; rounded to three places."""
    shipped = promise_threshold(scores, hallucinated, target)
    at = shipped if shipped is not None else own_threshold
    tuned = fail_rates(scores, hallucinated, at) if at is not None else None
    crossed, _ = cross_validated(scores, hallucinated, folds, target)
    return {
        "threshold": shipped,
        "false_fail": round(tuned.false_fail, 3) if tuned else None,
        "detection": round(tuned.detection, 3) if tuned else None,
        "cv_false_fail": round(crossed.false_fail, 3) if shipped is not None else None,
        "cv_detection": round(crossed.detection, 3) if shipped is not None else None,
    }
