"""The choice of a label's threshold: the promise, the threshold that keeps it, cross-validation;
and the offline judge's shipped declaration is what that choice makes of RAGTruth dev."""

from __future__ import annotations

import json

from cases.ragtruth import ragtruth_dev
from ragpulse.evaluation.types import FAITHFULNESS, GROUNDEDNESS
from ragpulse.judges._label_figures import MEASURED
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.metrics import _registry
from ragpulse.offline.calibrate import read_labelled
from ragpulse.offline.promise import (
    FailRates,
    cross_validated,
    declaration,
    fail_rates,
    folds_by_group,
    keeps_promise,
    promise_threshold,
)


def test_shares_count_scored_answers_only_and_a_score_at_the_threshold_passes() -> None:
    rates = fail_rates([0.5, 0.7, None, 0.2, 0.9], [False, False, False, True, True], 0.7)
    assert rates == FailRates(false_fail=0.5, detection=0.5, correct=2, hallucinated=2)


def test_the_promise_needs_few_false_fails_and_twice_as_many_detections() -> None:
    assert keeps_promise(FailRates(0.05, 0.10, 1, 1))
    assert not keeps_promise(FailRates(0.05, 0.09, 1, 1))  # not twice as often
    assert not keeps_promise(FailRates(0.12, 0.90, 1, 1))  # too many correct answers fail
    assert not keeps_promise(FailRates(0.0, 0.0, 1, 1))  # a label that never fails


def test_the_threshold_with_most_detection_within_the_promise_is_chosen() -> None:
    scores = [1.0] * 18 + [0.6, 0.8] + [0.5, 0.7, 0.85, 1.0]
    hallucinated = [False] * 20 + [True] * 4
    # Below 0.71: one correct answer of 20 fails (5 %), two hallucinated of 4.
    # Below 0.86: two correct fail (10 %), three hallucinated; the lowest such threshold.
    assert promise_threshold(scores, hallucinated, 0.05) == 0.71
    assert promise_threshold(scores, hallucinated, 0.10) == 0.86


def test_no_threshold_is_chosen_where_none_keeps_the_promise() -> None:
    # Correct answers score as low as hallucinated ones: every threshold fails both alike.
    scores = [0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4]
    assert promise_threshold(scores, [False] * 4 + [True] * 4) is None


def test_each_source_lands_in_one_fold() -> None:
    groups = ["a", "a", "b", "c", "c", "c", "d"]
    folds = folds_by_group(groups, 3)
    for group in set(groups):
        assert len({f for f, g in zip(folds, groups, strict=True) if g == group}) == 1


def test_a_fold_is_labelled_by_the_threshold_chosen_on_the_others() -> None:
    scores = [1.0, 0.5, 1.0, 0.5]
    hallucinated = [False, True, False, True]
    rates, chosen = cross_validated(scores, hallucinated, [0, 0, 1, 1], 0.10)
    assert chosen == [0.51, 0.51]
    assert (rates.false_fail, rates.detection) == (0.0, 1.0)


def test_the_offline_judges_shipped_declaration_is_what_ragtruth_dev_gives() -> None:
    path = ragtruth_dev()
    labelled = read_labelled(path)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    folds = folds_by_group([str(r["source_id"]) for r in rows], 5)
    judge = LexicalJudge()
    evaluations = [
        judge.evaluate_sync(item.record, (FAITHFULNESS, GROUNDEDNESS)) for item in labelled
    ]
    hallucinated = [item.hallucinated for item in labelled]
    for metric in (FAITHFULNESS, GROUNDEDNESS):
        declared = _registry.get(metric)
        assert declared is not None
        scores = [e.score(metric) for e in evaluations]
        derived = declaration(scores, hallucinated, folds, declared.threshold)
        assert MEASURED["lexical"][metric] == derived, metric
