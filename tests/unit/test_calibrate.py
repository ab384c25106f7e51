"""Calibration on the user's own labels: threshold, AUROC, reliability, the file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ragpulse.evaluation.types import (
    Claim,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Verdict,
)
from ragpulse.offline.calibrate import (
    LabelledRecord,
    auroc,
    calibrate,
    calibrated_thresholds,
    load_calibration,
    read_labelled,
)


def _evaluation(score: float | None, flagged: tuple[int, int] | None = None) -> Evaluation:
    claims: tuple[ClaimVerdict, ...] = ()
    if flagged is not None:
        claims = (ClaimVerdict(Claim("x", *flagged), Verdict.NOT_FOUND),)
    status = EvalStatus.OK if score is not None else EvalStatus.NO_CLAIMS
    return Evaluation(status, {"faithfulness": MetricResult("faithfulness", score)}, claims)


def _labelled(hallucinated: bool, spans: frozenset[int] = frozenset()) -> LabelledRecord:
    return LabelledRecord("r", RagRecord("q", (), "a"), hallucinated, spans, bool(spans))


def test_auroc_is_one_when_every_hallucinated_record_scores_lower() -> None:
    assert auroc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    assert auroc([0.5, 0.5], [True, False]) == 0.5
    assert math.isnan(auroc([0.1, 0.2], [True, True]))


def test_the_threshold_with_the_best_f1_separates_the_labels() -> None:
    scores = [0.2, 0.4, 0.6, 0.9, 1.0, 1.0]
    labels = [True, True, True, False, False, False]
    result = calibrate([_labelled(y) for y in labels], [_evaluation(s) for s in scores], rounds=50)
    assert 0.6 < result.threshold <= 0.9
    assert (result.precision, result.recall, result.f1) == (1.0, 1.0, 1.0)
    assert result.auroc == 1.0
    assert result.objective == "best_f1"


def test_a_target_precision_picks_the_threshold_with_the_best_recall_reaching_it() -> None:
    scores = [0.1, 0.3, 0.5, 0.7, 0.8, 0.95]
    labels = [True, True, False, True, False, False]
    result = calibrate(
        [_labelled(y) for y in labels],
        [_evaluation(s) for s in scores],
        target_precision=1.0,
        rounds=0,
    )
    assert result.precision == 1.0
    assert result.recall == pytest.approx(2 / 3)
    assert result.threshold == 0.5


def test_an_unreachable_precision_falls_back_to_the_best_f1_and_says_so() -> None:
    result = calibrate(
        [_labelled(True), _labelled(False)],
        [_evaluation(0.9), _evaluation(0.1)],
        target_precision=1.0,
        rounds=0,
    )
    assert "unreachable" in result.objective


def test_an_answer_without_claims_is_never_flagged_and_has_its_own_reliability_row() -> None:
    result = calibrate(
        [_labelled(True), _labelled(False), _labelled(False)],
        [_evaluation(0.2), _evaluation(None), _evaluation(1.0)],
        rounds=0,
    )
    assert result.recall == 1.0 and result.precision == 1.0
    unscored = [row for row in result.reliability if row["score_from"] < 0]
    assert unscored == [
        {"score_from": -1.0, "score_to": -1.0, "records": 1, "hallucinated_rate": 0.0}
    ]


def test_span_f1_compares_flagged_characters_with_the_human_spans() -> None:
    labelled = [_labelled(True, frozenset(range(10, 20))), _labelled(False, frozenset())]
    labelled[1] = LabelledRecord("r", labelled[1].record, False, frozenset(), True)
    result = calibrate(labelled, [_evaluation(0.5, (10, 30)), _evaluation(1.0)], rounds=20)
    assert result.span_f1 == pytest.approx(2 * 0.5 * 1.0 / 1.5)


def test_the_calibration_file_round_trips(tmp_path: Path) -> None:
    result = calibrate(
        [_labelled(y) for y in (True, True, False, False)],
        [_evaluation(s) for s in (0.3, 0.5, 0.95, 1.0)],
        rounds=10,
    )
    path = tmp_path / "calibration.json"
    path.write_text(result.to_json())
    loaded = load_calibration(path)
    assert loaded.threshold == result.threshold
    assert loaded.thresholds == {"faithfulness": result.threshold}


def test_a_calibration_file_of_an_earlier_version_with_an_alert_bucket_loads(
    tmp_path: Path,
) -> None:
    result = calibrate(
        [_labelled(y) for y in (True, False)], [_evaluation(s) for s in (0.3, 1.0)], rounds=10
    )
    body = json.loads(result.to_json())
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({**body, "alert_bucket": 0.3}))
    assert load_calibration(path).threshold == result.threshold


def test_a_file_that_is_not_a_calibration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"threshold": 0.5}))
    with pytest.raises(ValueError, match="not a ragpulse calibration file"):
        load_calibration(path)


def test_configure_never_stops_on_an_unreadable_calibration_file(tmp_path: Path) -> None:
    thresholds = calibrated_thresholds(tmp_path / "missing.json", {"groundedness": 0.7})
    assert thresholds == {"groundedness": 0.7}


def test_a_calibration_file_sets_its_metrics_threshold_beside_the_others(tmp_path: Path) -> None:
    result = calibrate(
        [_labelled(True), _labelled(False)], [_evaluation(0.4), _evaluation(1.0)], rounds=0
    )
    path = tmp_path / "c.json"
    path.write_text(result.to_json())
    thresholds = calibrated_thresholds(path, {"groundedness": 0.7})
    assert thresholds == {"groundedness": 0.7, "faithfulness": result.threshold}


def test_a_users_own_threshold_wins_over_a_calibration_files(tmp_path: Path) -> None:
    result = calibrate(
        [_labelled(True), _labelled(False)], [_evaluation(0.4), _evaluation(1.0)], rounds=0
    )
    path = tmp_path / "c.json"
    path.write_text(result.to_json())
    assert calibrated_thresholds(path, {"faithfulness": 0.3}) == {"faithfulness": 0.3}


def test_labels_are_booleans_or_scores_and_spans_are_character_ranges(tmp_path: Path) -> None:
    path = tmp_path / "labelled.jsonl"
    rows = [
        {"id": "a", "question": "q", "contexts": ["c"], "answer": "a b", "hallucinated": True,
         "spans": [{"start": 0, "end": 1}]},
        {"id": "b", "question": "q", "context": ["c"], "answer": "a", "hallucinated": 0.2},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    first, second = read_labelled(path)
    assert (first.hallucinated, first.spans, first.has_spans) == (True, frozenset({0}), True)
    assert (second.hallucinated, second.has_spans) == (False, False)


def test_a_record_without_a_label_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "labelled.jsonl"
    path.write_text(json.dumps({"id": "a", "contexts": [], "answer": "x"}) + "\n")
    with pytest.raises(ValueError, match="line 1: no 'hallucinated' label"):
        read_labelled(path)
