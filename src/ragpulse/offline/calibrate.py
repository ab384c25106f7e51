"""``ragpulse calibrate``: fit a metric's pass/fail threshold to the user's own labels.

A judge's absolute scores mean little until they are checked against human labels on
the user's own data. ``ragpulse calibrate LABELLED.jsonl`` reads records as for
``ragpulse eval`` (``id``, ``question``, ``contexts``, ``answer``, optional
``reference``) plus a human label, judges them, and reports:

- AUROC of ``1 - score`` against the labels, with a bootstrap interval;
- the threshold that reaches a target precision (``--target-precision``), or else the
  one with the best F1, with its precision, recall and F1;
- a reliability table: for bins of the score, how many records and how many of them
  the humans marked hallucinated;
- span-level character F1 of the flagged claims against the human spans, when the
  labels carry spans.

It writes a small calibration file (JSON) that ``ragpulse eval --calibration``,
``ragpulse.configure(calibration=...)`` and ``collector-config/prometheus/render_rules.py
--calibration`` read: the metric, its threshold (a score below it is ``fail``) and the
figures it was chosen by.

Labels: ``hallucinated`` is ``true``/``false`` or a 0-1 score (0.5 and above counts as
hallucinated); ``spans`` (optional) lists ``{"start": .., "end": ..}`` character ranges of
the answer that the human marked. An answer without claims has no score and is never
flagged.
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragpulse.evaluation.types import FAITHFULNESS, Evaluation, RagRecord, Verdict

__all__ = [
    "CALIBRATION_FORMAT",
    "Calibration",
    "Detection",
    "LabelledRecord",
    "auroc",
    "calibrate",
    "calibrated_thresholds",
    "describe_family",
    "detection",
    "load_calibration",
    "read_labelled",
    "span_f1",
]

_logger = logging.getLogger("ragpulse.calibrate")

CALIBRATION_FORMAT = 1
"""Version of the calibration file's layout."""
_FLAG_VERDICTS = frozenset({Verdict.NOT_FOUND, Verdict.CONTRADICTED})
_RELIABILITY_BINS = 10


# --- measures (pure) -------------------------------------------------------------------


def auroc(risks: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve by ranks (Mann-Whitney U), ties counted half; NaN if one class."""
    pairs = sorted(zip(risks, labels, strict=True), key=lambda p: p[0])
    positives = sum(1 for _, label in pairs if label)
    negatives = len(pairs) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    rank_sum = 0.0
    i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        rank_sum += (i + j + 1) / 2 * sum(1 for _, label in pairs[i:j] if label)
        i = j
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


@dataclass(frozen=True, slots=True)
class Detection:
    """Precision, recall and F1 of flagging the hallucinated records."""

    precision: float
    recall: float
    f1: float
    flagged: int


def detection(flags: Sequence[bool], labels: Sequence[bool]) -> Detection:
    """How well ``flags`` find the records ``labels`` mark hallucinated."""
    tp = sum(1 for f, y in zip(flags, labels, strict=True) if f and y)
    fp = sum(1 for f, y in zip(flags, labels, strict=True) if f and not y)
    fn = sum(1 for f, y in zip(flags, labels, strict=True) if not f and y)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Detection(precision, recall, f1, tp + fp)


def span_f1(
    flagged: Sequence[frozenset[int]], human: Sequence[frozenset[int]]
) -> tuple[float, float, float]:
    """Character-level precision, recall and F1 of flagged against human-marked characters."""
    overlap = sum(len(f & h) for f, h in zip(flagged, human, strict=True))
    flagged_total = sum(len(f) for f in flagged)
    human_total = sum(len(h) for h in human)
    precision = overlap / flagged_total if flagged_total else 0.0
    recall = overlap / human_total if human_total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def bootstrap(
    measure: Callable[[list[int]], float], n: int, rounds: int, seed: int = 0
) -> tuple[float, float]:
    """95% percentile interval of ``measure`` over ``rounds`` resamples of ``n`` records."""
    if rounds <= 0 or n == 0:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    values = sorted(measure([rng.randrange(n) for _ in range(n)]) for _ in range(rounds))
    values = [v for v in values if not math.isnan(v)] or [float("nan")]
    return values[int(0.025 * len(values))], values[max(0, int(0.975 * len(values)) - 1)]


# --- labelled records --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelledRecord:
    """A record to judge and what a human said of it."""

    id: str
    record: RagRecord
    hallucinated: bool
    spans: frozenset[int] = frozenset()
    """Characters of the answer the human marked (empty when no spans were given)."""
    has_spans: bool = False


def _label(value: object, line: int) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and 0.0 <= float(value) <= 1.0:
        return float(value) >= 0.5
    raise ValueError(f"line {line}: 'hallucinated' must be true/false or a score in [0, 1]")


def _spans(value: object, line: int) -> frozenset[int]:
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise ValueError(f"line {line}: 'spans' must be a list of {{start, end}} objects")
    chars: set[int] = set()
    for span in value:
        if not isinstance(span, dict) or not all(
            isinstance(span.get(k), int) for k in ("start", "end")
        ):
            raise ValueError(f"line {line}: each span needs integer 'start' and 'end'")
        chars.update(range(span["start"], span["end"]))
    return frozenset(chars)


def read_labelled(path: Path) -> list[LabelledRecord]:
    """The labelled records of a JSONL file; raises ``ValueError`` naming a bad line."""
    from ragpulse.offline.evaluate import record_from_json

    records = []
    with path.open(encoding="utf-8") as lines:
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {number}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or "hallucinated" not in obj:
                raise ValueError(f"line {number}: no 'hallucinated' label")
            item = record_from_json(obj, number)
            records.append(
                LabelledRecord(
                    item.id,
                    item.record,
                    _label(obj["hallucinated"], number),
                    _spans(obj.get("spans"), number),
                    "spans" in obj,
                )
            )
    return records


# --- the calibration ---------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """A metric's threshold fitted to labels, and the figures it was chosen by."""

    metric: str
    threshold: float
    """A score below this is ``fail`` (flagged as likely hallucinated)."""
    objective: str
    judge: str
    records: int
    hallucinated: int
    auroc: float
    auroc_interval: tuple[float, float]
    precision: float
    recall: float
    f1: float
    span_f1: float | None = None
    span_f1_interval: tuple[float, float] | None = None
    reliability: list[dict[str, float]] = field(default_factory=list)
    format: int = CALIBRATION_FORMAT

    @property
    def thresholds(self) -> dict[str, float]:
        """The pass/fail thresholds this calibration sets, by metric."""
        return {self.metric: self.threshold}

    def to_json(self) -> str:
        """The calibration file's text (an undefined figure is ``null``)."""
        return json.dumps(_finite(asdict(self)), indent=2, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration file written by ``ragpulse calibrate``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise ValueError(f"{path}: not a ragpulse calibration file (format {CALIBRATION_FORMAT})")
    threshold = data.get("threshold")
    if not isinstance(threshold, int | float) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"{path}: 'threshold' must be a number in [0, 1]")
    data.pop("alert_bucket", None)  # written by earlier versions, when alerts read buckets
    for key in ("auroc_interval", "span_f1_interval"):
        if isinstance(data.get(key), list):
            data[key] = tuple(float("nan") if v is None else v for v in data[key])
    if data.get("auroc") is None:
        data["auroc"] = float("nan")
    try:
        return Calibration(**data)
    except TypeError as exc:
        raise ValueError(f"{path}: not a ragpulse calibration file ({exc})") from None


def _score(evaluation: Evaluation, metric: str) -> float | None:
    return evaluation.score(metric)


def _choose_threshold(
    scores: Sequence[float | None], labels: Sequence[bool], target_precision: float | None
) -> tuple[float, str]:
    """The threshold (flag when score < t) for the target precision, else the best F1."""
    defined = sorted({s for s in scores if s is not None})
    # Flag below each distinct score, and below 1.0 plus a hair (flag every scored record).
    candidates = [*defined, 1.0 + 1e-9]

    def result(t: float) -> Detection:
        return detection([s is not None and s < t for s in scores], labels)

    if target_precision is not None:
        reaching = [t for t in candidates if result(t).precision >= target_precision]
        if reaching:
            best = max(reaching, key=lambda t: (result(t).recall, -t))
            return min(best, 1.0), f"precision>={target_precision:g}"
    best = max(candidates, key=lambda t: (result(t).f1, -t))
    objective = "best_f1"
    if target_precision is not None:
        objective = f"best_f1 (precision {target_precision:g} unreachable)"
    return min(best, 1.0), objective


def _reliability(scores: Sequence[float | None], labels: Sequence[bool]) -> list[dict[str, float]]:
    rows = []
    for b in range(_RELIABILITY_BINS):
        lo, hi = b / _RELIABILITY_BINS, (b + 1) / _RELIABILITY_BINS
        members = [
            y
            for s, y in zip(scores, labels, strict=True)
            if s is not None and (lo <= s < hi or (b == _RELIABILITY_BINS - 1 and s == 1.0))
        ]
        if members:
            rows.append(
                {
                    "score_from": lo,
                    "score_to": hi,
                    "records": len(members),
                    "hallucinated_rate": sum(members) / len(members),
                }
            )
    unscored = [y for s, y in zip(scores, labels, strict=True) if s is None]
    if unscored:
        rows.append(
            {"score_from": -1.0, "score_to": -1.0, "records": len(unscored),
             "hallucinated_rate": sum(unscored) / len(unscored)}
        )  # fmt: skip
    return rows


def _flagged_chars(evaluation: Evaluation) -> frozenset[int]:
    chars: set[int] = set()
    for cv in evaluation.claims:
        if cv.verdict not in _FLAG_VERDICTS:
            continue
        ranges = cv.unsupported or (
            ((cv.claim.answer_start, cv.claim.answer_end),)
            if cv.claim.answer_start is not None and cv.claim.answer_end is not None
            else ()
        )
        for start, end in ranges:
            chars.update(range(start, end))
    return frozenset(chars)


def calibrate(
    labelled: Sequence[LabelledRecord],
    evaluations: Sequence[Evaluation],
    *,
    metric: str = FAITHFULNESS,
    target_precision: float | None = None,
    judge: str = "",
    rounds: int = 1000,
) -> Calibration:
    """Fit ``metric``'s threshold to the labels of judged records."""
    labels = [item.hallucinated for item in labelled]
    scores = [_score(e, metric) for e in evaluations]
    risks = [0.0 if s is None else 1.0 - s for s in scores]
    threshold, objective = _choose_threshold(scores, labels, target_precision)
    chosen = detection([s is not None and s < threshold for s in scores], labels)
    n = len(labelled)
    area = auroc(risks, labels)
    interval = bootstrap(
        lambda picks: auroc([risks[i] for i in picks], [labels[i] for i in picks]), n, rounds
    )
    span, span_interval = None, None
    with_spans = [i for i, item in enumerate(labelled) if item.has_spans]
    if with_spans:
        flagged = [_flagged_chars(evaluations[i]) for i in with_spans]
        human = [labelled[i].spans for i in with_spans]
        span = span_f1(flagged, human)[2]
        span_interval = bootstrap(
            lambda picks: span_f1([flagged[i] for i in picks], [human[i] for i in picks])[2],
            len(with_spans),
            rounds,
        )
    return Calibration(
        metric=metric,
        threshold=round(threshold, 6),
        objective=objective,
        judge=judge,
        records=n,
        hallucinated=sum(labels),
        auroc=area,
        auroc_interval=interval,
        precision=chosen.precision,
        recall=chosen.recall,
        f1=chosen.f1,
        span_f1=span,
        span_f1_interval=span_interval,
        reliability=_reliability(scores, labels),
    )


# --- command line ------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.3f}"


def describe(calibration: Calibration) -> str:
    """The calibration as the report ``ragpulse calibrate`` prints."""
    c = calibration
    lines = [
        f"{c.records} labelled records ({c.hallucinated} hallucinated), judge {c.judge}, "
        f"metric {c.metric}",
        f"AUROC of 1 - {c.metric}: {_fmt(c.auroc)} "
        f"(95% bootstrap interval {_fmt(c.auroc_interval[0])}-{_fmt(c.auroc_interval[1])})",
        f"threshold ({c.objective}): {c.metric} < {c.threshold:g} is fail; "
        f"precision {_fmt(c.precision)}, recall {_fmt(c.recall)}, F1 {_fmt(c.f1)}",
    ]
    if c.span_f1 is not None and c.span_f1_interval is not None:
        lines.append(
            f"span-level character F1: {_fmt(c.span_f1)} (95% bootstrap interval "
            f"{_fmt(c.span_f1_interval[0])}-{_fmt(c.span_f1_interval[1])})"
        )
    lines.append("")
    lines.append(f"{'reliability: ' + c.metric:<32} {'records':>8} {'hallucinated':>13}")
    for row in c.reliability:
        if row["score_from"] < 0:
            band = "no score (no claims)"
        else:
            band = f"{row['score_from']:.1f} <= score < {row['score_to']:.1f}"
        lines.append(f"{band:<32} {int(row['records']):>8} {row['hallucinated_rate']:>12.0%}")
    return "\n".join(lines)


def describe_family(evaluations: Sequence[Evaluation]) -> str | None:
    """The judge's model, and how many records it judged were written by its own model
    family (their scores may be inflated); None when the judge has no model."""
    models = sorted({e.judge_model for e in evaluations if e.judge_model})
    if not models:
        return None
    same = sum(1 for e in evaluations if e.same_family is True)
    known = sum(1 for e in evaluations if e.same_family is not None)
    line = f"judge model: {', '.join(models)}"
    if not known:
        return line + (
            "; the generators' models are unknown (a record's \"generator_model\" names it), "
            "so the judge's family was not checked"
        )
    if not same:
        return line + f"; of another family than the generator on all {known} records checked"
    return line + (
        f"; SAME FAMILY as the generator on {same} of {known} records checked: a judge rates "
        "its own family's answers higher, so these scores (and this threshold) may be "
        "inflated; calibrate with a judge of another family"
    )


def calibrated_thresholds(
    path: str | Path | None, base: Mapping[str, float] | None
) -> Mapping[str, float] | None:
    """The threshold a calibration file sets, with the user's own thresholds ``base`` over it.

    Only what the user and the file set: the judge's declared thresholds and the metrics'
    own lie under both (``ragpulse.judges._labels.label_thresholds``). Without a file,
    ``base`` as it is. A file that cannot be read is logged once and ignored: a bad setting
    never stops the application.
    """
    if path is None:
        return base
    merged: dict[str, float] = {}
    try:
        merged.update(load_calibration(path).thresholds)
    except (OSError, ValueError) as exc:
        _logger.warning("ragpulse: calibration file not used: %s", exc)
    merged.update(base or {})
    return merged
