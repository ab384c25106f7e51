"""The demo reads each metric against its own threshold, as the span's label does."""

from __future__ import annotations

from ragpulse.demo.app import Reply
from ragpulse.demo.generator import FaultKind, InjectedFault
from ragpulse.demo.runner import DemoOptions, Outcome, _table, detect
from ragpulse.evaluation.types import EvalStatus, Evaluation, MetricResult
from ragpulse.judges._labels import label_thresholds
from ragpulse.metrics._registry import thresholds_with
from ragpulse.signals.emit import label_for


def _outcome(request_id: int, fault: FaultKind | None = None, **scores: float) -> Outcome:
    injected = None if fault is None else InjectedFault(fault, "", "", 0, 0)
    reply = Reply(request_id, "q?", "a.", injected, trace_id=1, span_id=request_id + 1)
    evaluation = Evaluation(
        status=EvalStatus.OK,
        metrics={m: MetricResult(m, s, "") for m, s in scores.items()},
        judge="lexical",
    )
    return Outcome(request_id, "q?", reply, evaluation=evaluation)


def test_the_demo_defaults_to_the_offline_judges_declared_thresholds() -> None:
    assert DemoOptions().thresholds == label_thresholds("lexical")
    assert DemoOptions().thresholds["correctness"] == 0.5
    assert "context_relevance" not in DemoOptions().thresholds
    assert "groundedness" not in DemoOptions().thresholds  # the offline judge declines it


def test_a_flag_fires_exactly_where_the_label_says_fail() -> None:
    thresholds = DemoOptions().thresholds
    for score in (0.0, 0.69, 0.7, 0.71, 1.0):
        outcome = _outcome(0, groundedness=1.0, relevancy=score)
        fails = label_for(score, thresholds["relevancy"]) == "fail"
        assert ("relevancy" in outcome.signals(thresholds)) is fails, score


def test_moving_one_metrics_threshold_moves_only_its_detections() -> None:
    outcomes = [
        _outcome(0, groundedness=1.0, relevancy=0.5, completeness=0.6),
        _outcome(1, FaultKind.OFF_QUESTION, groundedness=1.0, relevancy=0.0),
    ]
    declared = detect(outcomes, DemoOptions().thresholds)
    assert declared.false_alarms == 1
    assert declared.false_alarms_by_kind["off_question"] == 1
    assert declared.false_alarms_by_kind["omitted_part"] == 1  # completeness 0.6 < 0.7
    moved = detect(outcomes, thresholds_with({"relevancy": 0.4}))
    assert moved.false_alarms_by_kind["off_question"] == 0
    assert moved.false_alarms_by_kind["omitted_part"] == 1
    assert moved.caught == declared.caught == 1


def test_the_table_colours_a_score_by_its_own_metrics_threshold() -> None:
    thresholds = DemoOptions().thresholds
    table = _table([_outcome(0, correctness=0.6, faithfulness=0.6, groundedness=0.6)], thresholds)
    cells = {column.header: next(iter(column.cells)) for column in table.columns}
    assert cells["corr"] == "[green]0.60[/]"  # 0.6 passes correctness (0.5)
    assert cells["faith"] == "[red]0.60[/]"  # and fails faithfulness (0.74)
    assert cells["grnd"] == "[default]0.60[/]"  # and groundedness has no label
