"""Reads ``ragpulse.feedback`` events back from OTLP-JSON log lines and sets them beside the judge.

An event names the request it judges by the trace id and span id on its log record.
It belongs to the evaluated request whose span it names; failing that (the span is
the web handler's, around the ``@rag`` unit, or the event named the trace alone), to
the one evaluated request of its trace. An event that fits neither is counted as
unmatched, never guessed onto a request.

Lines are read as ``report`` reads traces: one line that cannot be read costs that line
and is named; lines of another signal (spans, metrics) are passed over, so one file of
everything a Collector wrote serves as well as the ``-logs`` file ``configure()`` writes.
Feedback gathered outside OpenTelemetry comes as plain JSON lines instead:
``{"trace_id": "<32 hex>", "span_id": "<16 hex>", "score": 0.0, "label": ..., "metric": ...,
"comment": ...}``, the span id optional, a score or a label required.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragpulse import semconv
from ragpulse.outputs.files import read_lines
from ragpulse.report._model import (
    Feedback,
    ReportRequest,
    Run,
    SkippedLines,
    plural,
    threshold_for,
)
from ragpulse.report._traces import _items, _value, json_object

__all__ = [
    "OVERALL",
    "PLAIN_KEYS",
    "FeedbackFile",
    "Pairs",
    "add_feedback",
    "attach_feedback",
    "feedback_columns",
    "feedback_detail",
    "judge_passed",
    "pair_verdicts",
    "read_feedback",
]

OVERALL = "overall"
"""The row of feedback given without ``metric=``: the judge's overall verdict is a pass when
every metric it scored passes."""
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_OTHER_SIGNALS = ("resourceSpans", "resourceMetrics")
PLAIN_KEYS = {
    "score": semconv.FEEDBACK_SCORE,
    "label": semconv.FEEDBACK_LABEL,
    "metric": semconv.FEEDBACK_METRIC,
    "comment": semconv.FEEDBACK_COMMENT,
}
"""The keys of a plain feedback line (feedback gathered outside OpenTelemetry, a review tool's
export, say) and the event attributes they stand for."""
MAX_COMMENT = 2_000
"""Characters of a comment the page embeds (``configure()`` already capped what it exported)."""


@dataclass
class FeedbackFile:
    """The feedback events of one file, and the lines (or events) that could not be used."""

    path: Path
    events: list[Feedback] = field(default_factory=list)
    skipped: SkippedLines = field(default_factory=SkippedLines)

    def notes(self) -> list[str]:
        """What the reader should know: each skipped line, named after the file."""
        return [f"{self.path.name}: {note}" for note in self.skipped.notes()]


def _records(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in _items(payload, "resourceLogs"):
        for scope in _items(resource, "scopeLogs"):
            for record in _items(scope, "logRecords"):
                if isinstance(record, dict) and record.get("eventName") == semconv.FEEDBACK_EVENT:
                    yield record


def _feedback(
    trace_id: object, span_id: object, values: Mapping[str, Any]
) -> tuple[Feedback | None, str]:
    """The feedback of one event or line (``values`` under the attribute names), or why it
    holds none that can be used."""
    trace = str(trace_id or "").lower()
    span = str(span_id or "").lower() or None
    if not _TRACE_ID.fullmatch(trace) or (span is not None and not _SPAN_ID.fullmatch(span)):
        return None, "a feedback event without a readable trace id (that event only)"
    score = values.get(semconv.FEEDBACK_SCORE)
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0.0 <= score <= 1.0:
        score = None
    label, metric, comment = (
        values.get(key) if isinstance(values.get(key), str) else None
        for key in (semconv.FEEDBACK_LABEL, semconv.FEEDBACK_METRIC, semconv.FEEDBACK_COMMENT)
    )
    if score is None and label is None:
        return None, "a feedback event with neither a score in [0, 1] nor a label (that event only)"
    return Feedback(
        trace, span, None if score is None else float(score), label, metric, comment
    ), ""


def _otlp_event(record: dict[str, Any]) -> tuple[Feedback | None, str]:
    attributes = {
        a["key"]: _value(a.get("value"))
        for a in _items(record, "attributes")
        if isinstance(a, dict) and isinstance(a.get("key"), str)
    }
    return _feedback(record.get("traceId"), record.get("spanId"), attributes)


def _plain_event(line: dict[str, Any]) -> tuple[Feedback | None, str]:
    values = {attribute: line.get(key) for key, attribute in PLAIN_KEYS.items()}
    return _feedback(line.get("trace_id"), line.get("span_id"), values)


def read_feedback(path: Path) -> FeedbackFile:
    """The feedback of a file of OTLP-JSON log lines or plain feedback lines (``PLAIN_KEYS``,
    with ``trace_id`` and optional ``span_id``); ``OSError`` if it cannot be read."""
    found = FeedbackFile(path)
    for number, text in read_lines(path):
        if not text.strip():
            continue
        payload, reason = json_object(text)
        if payload is None:
            found.skipped.add(number, reason)
            continue
        if "trace_id" in payload:
            read = [_plain_event(payload)]
        elif isinstance(payload.get("resourceLogs"), list):
            read = [_otlp_event(record) for record in _records(payload)]
        elif any(isinstance(payload.get(key), list) for key in _OTHER_SIGNALS):
            continue  # another signal's export: nothing to read here, nothing wrong
        else:
            found.skipped.add(number, "neither an OTLP log export nor a line with a trace_id")
            continue
        for event, why in read:
            if event is None:
                found.skipped.add(number, why)
            else:
                found.events.append(event)
    return found


def _trace_and_span(request: ReportRequest) -> tuple[str, str] | None:
    trace_id, _, span_id = request.id.partition("/")
    return (trace_id, span_id) if span_id else None


def attach_feedback(requests: Sequence[ReportRequest], events: Iterable[Feedback]) -> int:
    """Add each event to the request it judges; returns how many matched none."""
    by_span: dict[tuple[str, str], ReportRequest] = {}
    by_trace: dict[str, list[ReportRequest]] = defaultdict(list)
    for request in requests:
        ids = _trace_and_span(request)
        if ids is not None:
            by_span[ids] = request
            by_trace[ids[0]].append(request)
    unmatched = 0
    for event in events:
        target = by_span.get((event.trace_id, event.span_id or ""))
        if target is None and len(by_trace.get(event.trace_id, ())) == 1:
            target = by_trace[event.trace_id][0]
        if target is None:
            unmatched += 1
        else:
            target.feedback.append(event)
    return unmatched


def judge_passed(
    request: ReportRequest, metric: str | None, thresholds: Mapping[str, float]
) -> bool | None:
    """The judge's verdict on ``metric`` (or, for ``None``, on every metric it scored):
    the pass/fail label the span carries, else the score against its threshold; none where
    the request records labels but none for ``metric`` (its judge declined to label it)."""
    if metric is None:
        verdicts = [judge_passed(request, m, thresholds) for m in request.scores]
        defined = [v for v in verdicts if v is not None]
        return all(defined) if defined else None
    score = request.scores.get(metric)
    if score is None or score != score:  # undefined, or NaN
        return None
    label = request.labels.get(metric)
    if label in (semconv.LABEL_PASS, semconv.LABEL_FAIL):
        return label == semconv.LABEL_PASS
    if request.labels and metric not in thresholds:
        return None
    threshold = threshold_for(metric, thresholds)
    return None if threshold is None else score >= threshold


@dataclass
class Pairs:
    """Per metric, the judge's and the people's verdicts on the same requests, in step."""

    judge: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    human: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    no_verdict: int = 0
    """Events with a label that is no verdict (neither a score nor ``pass``/``fail``)."""
    unscored: int = 0
    """Events on a metric the judge gave no score to on that request."""


def pair_verdicts(
    requests: Iterable[ReportRequest], thresholds: Mapping[str, float] | None = None
) -> Pairs:
    """Every feedback event with a verdict, paired with the judge's on the same metric."""
    pairs = Pairs()
    for request in requests:
        for event in request.feedback:
            human = event.passed
            if human is None:
                pairs.no_verdict += 1
                continue
            judge = judge_passed(request, event.metric, thresholds or {})
            if judge is None:
                pairs.unscored += 1
                continue
            row = event.metric or OVERALL
            pairs.judge[row].append(judge)
            pairs.human[row].append(human)
    return pairs


def _number(value: float) -> float | None:
    return None if value != value else round(value, 3)  # NaN (undefined) is null in the page


def _code(verdict: bool | None) -> int:
    return -1 if verdict is None else int(verdict)


def feedback_columns(
    requests: Sequence[ReportRequest], thresholds: Mapping[str, float]
) -> dict[str, Any]:
    """What the page's run view shows of feedback: the agreement per metric and, per
    request, ``[people pass, people fail, disagreements with the judge]``; empty without any."""
    from ragpulse.offline.agreement import agreement

    if not any(request.feedback for request in requests):
        return {}
    pairs = pair_verdicts(requests, thresholds)
    summary = []
    for metric in pairs.judge:
        row = agreement(metric, pairs.judge[metric], pairs.human[metric], rounds=0)
        summary.append(
            [
                metric,
                row.n,
                _number(row.agreement),
                _number(row.kappa),
                row.judge_pass,
                row.human_pass,
            ]
        )
    counts = []
    for request in requests:
        verdicts = [
            (e.passed, judge_passed(request, e.metric, thresholds)) for e in request.feedback
        ]
        counts.append(
            [
                sum(1 for human, _ in verdicts if human is True),
                sum(1 for human, _ in verdicts if human is False),
                sum(
                    1 for human, judge in verdicts if None not in (human, judge) and human != judge
                ),
            ]
        )
    return {"fb": summary, "fbc": counts, "fbx": [pairs.no_verdict, pairs.unscored]}


def feedback_detail(request: ReportRequest, thresholds: Mapping[str, float]) -> list[list[Any]]:
    """Each event on one request beside the judge's verdict on the same metric:
    ``[metric, score, label, comment, person 1/0/-1, judge 1/0/-1]``."""
    return [
        [
            event.metric,
            event.score,
            event.label,
            None if event.comment is None else event.comment[:MAX_COMMENT],
            _code(event.passed),
            _code(judge_passed(request, event.metric, thresholds)),
        ]
        for event in request.feedback
    ]


def add_feedback(runs: Sequence[Run], files: Sequence[FeedbackFile]) -> None:
    """Attach the events of ``files`` to the runs' requests, and say in each run's notes
    what was read, what matched no request of that run, and which lines were skipped."""
    events = [event for found in files for event in found.events]
    skipped = [note for found in files for note in found.notes()]
    for run in runs:
        unmatched = attach_feedback(run.requests, events)
        names = ", ".join(found.path.name for found in files)
        note = f"feedback from {names}: {plural(len(events), 'event')}"
        if unmatched:
            note += f", {unmatched} matching no evaluated request of this run"
        run.notes.extend([note, *skipped])
