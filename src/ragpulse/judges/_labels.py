"""Which pass/fail label each judge writes for each metric, and what that label is worth.

A label is a promise to the person it pages: ``fail`` must mean the answer is likely
wrong. Whether a threshold keeps that promise depends on the judge that made the score,
so each built-in judge declares, per metric, the threshold its labels are read against
(``MetricLabel.threshold``; ``None``: the judge scores the metric but writes no label)
with the evidence: the share of correct answers it labels ``fail`` (``false_fail``) and
of hallucinated ones (``detection``), measured on RAGTruth (``_label_figures``).

Precedence, highest first: a threshold the user sets (``thresholds=``, ``--threshold``),
a calibration file's, the judge's declaration here, the metric module's own. So a user's
threshold brings back a label a judge declines.

The promise kept: at most ``MAX_FALSE_FAIL`` of correct answers labelled ``fail``, and
hallucinated answers labelled ``fail`` at least ``MIN_SEPARATION`` times as often.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragpulse.judges._kinds import JUDGE_KINDS
from ragpulse.judges._label_figures import EVIDENCE, MEASURED

__all__ = [
    "MAX_FALSE_FAIL",
    "MIN_SEPARATION",
    "TARGET_FALSE_FAIL",
    "MetricLabel",
    "declined",
    "judge_kind",
    "kind_named",
    "label_policy",
    "label_thresholds",
]

MAX_FALSE_FAIL = 0.10
"""The most correct answers a kept label may call ``fail``."""
MIN_SEPARATION = 2.0
"""How many times more often a kept label must fail hallucinated answers than correct ones."""
TARGET_FALSE_FAIL = 0.05
"""The share of correct development answers a threshold is chosen to fail at most: half of
``MAX_FALSE_FAIL``, as room for answers unlike the development set's (a threshold chosen at
the promise's edge fails more than it on some kinds of answer, summaries for one)."""

_UNMEASURED = (
    "not measured on real answers here: the {kind} judge needs a model or an API; measure "
    "it with `ragpulse calibrate` on your labelled answers"
)
_NO_DATA = "not measured: RAGTruth labels hallucinations, not this metric"
_CASCADE_GROUNDEDNESS = (
    "declined as the offline judge declines it: the cascade keeps the offline judge's "
    "groundedness on every record it is sure of"
)
_HALLUCINATION_METRICS = ("faithfulness", "groundedness")


@dataclass(frozen=True, slots=True)
class MetricLabel:
    """How one judge labels one metric, and the evidence for it."""

    threshold: float | None
    """A score below it is ``fail``; ``None``: the judge writes no label for the metric."""
    false_fail: float | None
    """Share of correct answers labelled ``fail`` on RAGTruth dev (tuned on it); for a
    declined metric, at the metric's own threshold. ``None``: not measured."""
    detection: float | None
    """Share of hallucinated answers labelled ``fail``, as ``false_fail`` is measured."""
    evidence: str
    """The command that measured the figures, or why there are none."""
    cv_false_fail: float | None = None
    """``false_fail`` cross-validated: the threshold chosen on four folds by source, scored
    on the fifth."""
    cv_detection: float | None = None
    """``detection`` cross-validated."""
    reason: str = ""
    """Why the judge declines the label (empty where it writes one)."""

    @property
    def labelled(self) -> bool:
        """Whether the judge writes a pass/fail label for the metric by default."""
        return self.threshold is not None

    @property
    def keeps_promise(self) -> bool:
        """Labelled, measured, and within the promise (see the module docstring)."""
        if self.threshold is None or self.false_fail is None or self.detection is None:
            return False
        return self.false_fail <= MAX_FALSE_FAIL and self.detection >= max(
            MIN_SEPARATION * self.false_fail, 1e-9
        )


def _module_threshold(metric: str) -> float | None:
    from ragpulse.metrics import _registry

    declared = _registry.get(metric)
    return None if declared is None else declared.threshold


def _measured(kind: str, metric: str) -> MetricLabel | None:
    figures = MEASURED.get(kind, {}).get(metric)
    if figures is None:
        return None
    threshold = figures["threshold"]
    reason = ""
    if threshold is None:
        reason = (
            f"no threshold keeps the promise on real answers: at {_module_threshold(metric)} "
            f"it labels {figures['false_fail']:.0%} of correct answers fail"
        )
    return MetricLabel(
        threshold=threshold,
        false_fail=figures["false_fail"],
        detection=figures["detection"],
        evidence=EVIDENCE,
        cv_false_fail=figures.get("cv_false_fail"),
        cv_detection=figures.get("cv_detection"),
        reason=reason,
    )


def _declared(kind: str, metric: str) -> MetricLabel:
    found = _measured(kind, metric)
    if found is not None:
        return found
    own = _module_threshold(metric)
    if own is None:
        return MetricLabel(None, None, None, "the metric has no label", reason="a share to read")
    if kind == "cascade" and metric == "groundedness":
        return MetricLabel(None, None, None, EVIDENCE, reason=_CASCADE_GROUNDEDNESS)
    if kind in ("lexical", "cascade") and metric not in _HALLUCINATION_METRICS:
        return MetricLabel(own, None, None, _NO_DATA)
    return MetricLabel(own, None, None, _UNMEASURED.format(kind=kind))


def label_policy(judge_kind: str | None) -> Mapping[str, MetricLabel]:
    """How the judge of ``judge_kind`` (a ``--judge`` value) labels each built-in metric.

    An unknown kind (a judge of the user's own): each metric's own threshold, unmeasured.
    """
    from ragpulse.metrics import _registry

    kind = judge_kind if judge_kind in JUDGE_KINDS else "custom"
    return {metric: _declared(kind, metric) for metric in _registry.builtin_names()}


def declined(judge_kind: str | None) -> dict[str, str]:
    """The metrics the judge scores without a label by default, with the reason each."""
    return {
        metric: label.reason
        for metric, label in label_policy(judge_kind).items()
        if not label.labelled and _module_threshold(metric) is not None
    }


def label_thresholds(
    judge_kind: str | None, overrides: Mapping[str, float] | None = None
) -> dict[str, float]:
    """The thresholds labels are written against: each metric's (a user's metric's too),
    the judge's declaration over them (a declined metric has none), ``overrides`` on top."""
    from ragpulse.metrics import _registry

    thresholds = _registry.default_thresholds()
    for metric, label in label_policy(judge_kind).items():
        if label.threshold is None:
            thresholds.pop(metric, None)
        else:
            thresholds[metric] = label.threshold
    if overrides:
        thresholds.update(overrides)
    return thresholds


def kind_named(judge_name: str | None) -> str | None:
    """The kind of a built-in judge from the name its evaluations carry under its default
    name (``lexical``, ``openai:MODEL``, ``nli``, ``tokens``); ``None`` for any other."""
    if not judge_name:
        return None
    kind = judge_name.split(":", 1)[0]
    return kind if kind in JUDGE_KINDS and kind != "cascade" else None


def judge_kind(judge: object) -> str | None:
    """The ``--judge`` kind of a judge object (through the wrappers that run it); ``None``
    for a judge of the user's own."""
    for attribute in ("judge", "primary", "inner"):
        wrapped = getattr(judge, attribute, None)
        if wrapped is not None and wrapped is not judge:
            return judge_kind(wrapped)
    kind = getattr(type(judge), "label_kind", None)
    return kind if isinstance(kind, str) else None
