"""Reading feedback back: which lines count, which request an event belongs to, and the
judge's verdict it is paired with (``report/_feedback.py``, shared by report and calibrate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragpulse import semconv
from ragpulse.report._feedback_events import (
    OVERALL,
    attach_feedback,
    judge_passed,
    pair_verdicts,
    read_feedback,
)
from ragpulse.report._model import Feedback, ReportRequest

TRACE_A, TRACE_B, TRACE_C = "a" * 32, "b" * 32, "c" * 32
SPAN_1, SPAN_2, SPAN_3 = "1" * 16, "2" * 16, "3" * 16


def _record(trace_id: str, span_id: str | None, **attributes: Any) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        return {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}

    record: dict[str, Any] = {
        "eventName": semconv.FEEDBACK_EVENT,
        "traceId": trace_id,
        "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()],
    }
    if span_id is not None:
        record["spanId"] = span_id
    return record


def _line(*records: dict[str, Any]) -> str:
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": list(records)}]}]})


def _request(span: str, trace: str = TRACE_A, **scores: float) -> ReportRequest:
    return ReportRequest(id=f"{trace}/{span}", status="ok", scores=dict(scores))


def test_lines_of_spans_and_metrics_are_passed_over_without_a_note(tmp_path: Path) -> None:
    path = tmp_path / "all.jsonl"
    event = _record(TRACE_A, SPAN_1, **{semconv.FEEDBACK_SCORE: 1.0})
    lines = [json.dumps({"resourceSpans": []}), _line(event), json.dumps({"resourceMetrics": []})]
    path.write_text("\n".join(lines) + "\n")
    found = read_feedback(path)
    assert found.events == [Feedback(TRACE_A, SPAN_1, score=1.0)]
    assert found.notes() == []


def test_an_event_without_a_verdict_is_named_and_the_others_of_its_line_are_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.jsonl"
    good = _record(TRACE_A, SPAN_1, **{semconv.FEEDBACK_LABEL: "fail"})
    out_of_range = _record(TRACE_A, SPAN_2, **{semconv.FEEDBACK_SCORE: 7.0})
    path.write_text(_line(good, out_of_range) + "\n")
    found = read_feedback(path)
    assert found.events == [Feedback(TRACE_A, SPAN_1, label="fail")]
    (note,) = found.notes()
    assert note.startswith("logs.jsonl: skipped line 1: a feedback event with neither a score")


def test_plain_feedback_lines_are_read_like_events(tmp_path: Path) -> None:
    path = tmp_path / "reviews.jsonl"
    lines = [
        {"trace_id": TRACE_A.upper(), "span_id": SPAN_1, "score": 0, "metric": "groundedness"},
        {"trace_id": TRACE_B, "label": "pass", "comment": "fine"},
        {"trace_id": "not-hex", "score": 1.0},
        {"id": "7", "answer": "not feedback"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    found = read_feedback(path)
    assert found.events == [
        Feedback(TRACE_A, SPAN_1, score=0.0, metric="groundedness"),
        Feedback(TRACE_B, None, label="pass", comment="fine"),
    ]
    assert [note.split(": ", 2)[1] for note in found.notes()] == [
        "skipped line 3",
        "skipped line 4",
    ]


def test_other_log_events_are_not_feedback(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    judge_event = {**_record(TRACE_A, SPAN_1, **{semconv.FEEDBACK_SCORE: 1.0})}
    judge_event["eventName"] = semconv.GEN_AI_EVALUATION_RESULT_EVENT
    path.write_text(_line(judge_event) + "\n")
    assert read_feedback(path).events == []


def test_an_event_joins_the_request_whose_span_it_names() -> None:
    first, second = _request(SPAN_1), _request(SPAN_2)
    event = Feedback(TRACE_A, SPAN_2, score=0.0)
    assert attach_feedback([first, second], [event]) == 0
    assert (first.feedback, second.feedback) == ([], [event])


def test_an_event_on_another_span_of_a_trace_with_one_request_joins_that_request() -> None:
    unit = _request(SPAN_1, TRACE_B)
    on_the_handler, on_the_trace = Feedback(TRACE_B, SPAN_3, score=1.0), Feedback(TRACE_B, None)
    assert attach_feedback([unit], [on_the_handler, on_the_trace]) == 0
    assert unit.feedback == [on_the_handler, on_the_trace]


def test_an_event_that_fits_no_single_request_is_counted_not_guessed() -> None:
    first, second = _request(SPAN_1), _request(SPAN_2)  # two requests in TRACE_A
    unmatched = attach_feedback(
        [first, second], [Feedback(TRACE_A, None, score=1.0), Feedback(TRACE_C, SPAN_1, score=1.0)]
    )
    assert unmatched == 2
    assert first.feedback == second.feedback == []


def test_the_judge_verdict_is_the_label_on_the_span_before_the_score() -> None:
    request = _request(SPAN_1, groundedness=0.9)
    request.labels["groundedness"] = "fail"  # a calibrated threshold above 0.9
    assert judge_passed(request, "groundedness", {}) is False
    assert judge_passed(_request(SPAN_1, groundedness=0.9), "groundedness", {}) is True
    assert judge_passed(_request(SPAN_1, groundedness=0.5), "groundedness", {}) is False


def test_the_judge_overall_verdict_passes_only_when_every_scored_metric_passes() -> None:
    assert judge_passed(_request(SPAN_1, faithfulness=0.9, groundedness=0.8), None, {}) is True
    assert judge_passed(_request(SPAN_1, faithfulness=0.9, groundedness=0.1), None, {}) is False
    assert judge_passed(_request(SPAN_1), None, {}) is None


def test_pairs_leave_out_labels_that_are_no_verdict_and_metrics_the_judge_did_not_score() -> None:
    request = _request(SPAN_1, groundedness=0.2)
    request.feedback += [
        Feedback(TRACE_A, SPAN_1, score=0.9, metric="groundedness"),
        Feedback(TRACE_A, SPAN_1, label="thumbs_up"),
        Feedback(TRACE_A, SPAN_1, score=0.1, metric="correctness"),
        Feedback(TRACE_A, SPAN_1, score=0.1),
    ]
    pairs = pair_verdicts([request])
    assert dict(pairs.judge) == {"groundedness": [False], OVERALL: [False]}
    assert dict(pairs.human) == {"groundedness": [True], OVERALL: [False]}
    assert (pairs.no_verdict, pairs.unscored) == (1, 1)
