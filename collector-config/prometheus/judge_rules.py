"""The answer-quality rules for one judge: what its pass/fail labels can be trusted to say.

A judge declares, per metric, whether it writes a label and what the label is worth
(``ragpulse.judges._labels``: the shares of correct and of hallucinated answers it labels
``fail``). The rules follow that declaration:

- a metric the judge writes no label for gets no rule (nothing is counted);
- a label whose rates are measured and keep the label's promise gets ``Rag<Name>Low``
  (page): the window's fail count above what a service with the tolerated share of
  hallucinated answers reaches by chance (``alert_bounds``);
- every label gets ``Rag<Name>Drop`` (ticket): the window's fail share above the service's
  own share over the day before, by more than chance and by more than a minimum rise.

The windows are the shortest that the expected evaluations (requests a second × sample
rate) let tell the tolerated share from a rise of ``rise`` in it. docs/operations.md derives
every number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from alert_bounds import (
    FALSE_PAGES_PER_MONTH,
    FALSE_TICKETS_PER_MONTH,
    WINDOWS,
    JudgeRates,
    choose_window,
    log_inverse_alpha,
    min_window,
)

LABELS_SERIES = "ragpulse_evaluation_labels_total"
FAIL = 'gen_ai_evaluation_score_label="fail"'
BY = "sum by (service_name, gen_ai_evaluation_name)"
ON = "and on (service_name, gen_ai_evaluation_name)"
PREFIX = "service_name:ragpulse_evaluation_labels:"
BASELINE = "1d"
"""The service's own baseline: its share over the day before the window."""
GROUP = "ragpulse-answer-labels"

TOLERATED = 0.1
"""The share of hallucinated answers a healthy service is taken to write."""
RISE = 0.2
"""The rise in that share the windows are sized to see."""
ASSUMED = JudgeRates(0.0, 1.0)
"""An unmeasured label taken at its word: only the baseline rule, a ticket, reads it."""


@dataclass(frozen=True)
class Traffic:
    """What the rules are sized for."""

    rate: float = 1.0
    """Requests a second of one service."""
    sample_rate: float = 1.0
    """Share of them evaluated (``RAGPULSE_SAMPLE_RATE``)."""
    tolerated: float = TOLERATED
    rise: float = RISE

    @property
    def evaluations_per_second(self) -> float:
        """The evaluations a second the windows count."""
        return self.rate * self.sample_rate


@dataclass(frozen=True)
class MetricRules:
    """The numbers of one metric's rules, as they appear in PromQL and the docs."""

    metric: str
    threshold: float | None
    rates: JudgeRates
    measured: bool
    pages: bool
    window: str
    healthy: float
    """f(tolerated): the fail share of a healthy service."""
    min_evaluations: int
    """The fewest evaluations a window needs before a rule may fire on it."""
    min_rise: float
    """The smallest rise of the fail share over the baseline the ticket reports."""

    @property
    def alert_low(self) -> str:
        """``RagFaithfulnessLow``."""
        return alert_name(self.metric, "Low")

    @property
    def alert_drop(self) -> str:
        """``RagFaithfulnessDrop``."""
        return alert_name(self.metric, "Drop")


def alert_name(metric: str, suffix: str) -> str:
    """``RagAnswerLengthLow`` for ``answer_length``."""
    return "Rag" + "".join(part.capitalize() for part in metric.split("_")) + suffix


def _label_policy(judge: str) -> Mapping[str, Any]:
    from ragpulse.judges._labels import label_policy

    return label_policy(judge)


def metric_rules(
    metric: str,
    threshold: float | None,
    measured: JudgeRates | None,
    promise_kept: bool,
    traffic: Traffic,
) -> MetricRules:
    """The numbers of ``metric``'s rules for a label with ``measured`` rates (``None``:
    unmeasured) that keeps its promise or not, at ``traffic``."""
    rates = measured if measured is not None else ASSUMED
    pages = measured is not None and promise_kept
    window, min_evaluations, min_rise = sized(rates, pages, traffic)
    return MetricRules(
        metric=metric,
        threshold=threshold,
        rates=rates,
        measured=measured is not None,
        pages=pages,
        window=window,
        healthy=rates.fail_share(traffic.tolerated),
        min_evaluations=min_evaluations,
        min_rise=min_rise,
    )


def sized(rates: JudgeRates, pages: bool, traffic: Traffic) -> tuple[str, int, float]:
    """The window, the minimum evaluations and the minimum rise of a rule counting a label
    with ``rates`` at ``traffic``, a page's or a ticket's allowance of false alarms."""
    healthy = rates.fail_share(traffic.tolerated)
    log_inv = log_inverse_alpha(FALSE_PAGES_PER_MONTH if pages else FALSE_TICKETS_PER_MONTH)
    risen = rates.fail_share(min(1.0, traffic.tolerated + traffic.rise))
    window, _ = choose_window(traffic.evaluations_per_second, min_window(healthy, risen, log_inv))
    min_rise = traffic.rise / 2 * (rates.detection - rates.false_fail)
    return window, min_window(healthy, rates.detection, log_inv), min_rise


def judge_metric_rules(judge: str, traffic: Traffic) -> list[MetricRules]:
    """The rules of every metric ``judge`` writes a label for."""
    found = []
    for metric, label in _label_policy(judge).items():
        if label.threshold is None:
            continue
        measured = (
            JudgeRates(label.false_fail, label.detection)
            if label.false_fail is not None and label.detection is not None
            else None
        )
        found.append(metric_rules(metric, label.threshold, measured, label.keeps_promise, traffic))
    return found


def _g(value: float) -> str:
    return f"{value:.6g}"


def _share(window: str, offset: str = "") -> str:
    shift = f" offset {offset}" if offset else ""
    return (
        f"{BY}\n(increase({LABELS_SERIES}{{{FAIL}}}[{window}]{shift}))\n/\n"
        f"{BY}\n(increase({LABELS_SERIES}[{window}]{shift}))"
    )


def _count(window: str, offset: str = "") -> str:
    shift = f" offset {offset}" if offset else ""
    return f"{BY}\n(increase({LABELS_SERIES}[{window}]{shift}))"


def recording_rules(windows: list[str]) -> list[dict[str, Any]]:
    """Per service and metric, each window's fail share and count and the baseline's."""
    rules: list[dict[str, Any]] = []
    for window in windows:
        rules += [
            {"record": f"{PREFIX}evaluations{window}", "expr": _count(window)},
            {"record": f"{PREFIX}fail_ratio{window}", "expr": _share(window)},
            {
                "record": f"{PREFIX}baseline_evaluations{window}",
                "expr": _count(BASELINE, offset=window),
            },
            {
                "record": f"{PREFIX}baseline_fail_ratio{window}",
                "expr": _share(BASELINE, offset=window),
            },
        ]
    return rules


def _runbook(metric: str) -> str:
    return (
        f'Find the traces with TraceQL {{ span.ragpulse.eval.{metric}.label = "fail" }} and '
        f"read ragpulse.eval.{metric}.explanation and ragpulse.eval.claims; split the rise by "
        'deploy, model or tenant on the dashboard\'s "Where did it drop?" panel.'
    )


def low_alert(rules: MetricRules) -> dict[str, Any]:
    """The page: more fails than a service at the tolerated share writes by chance."""
    log_inv = log_inverse_alpha(FALSE_PAGES_PER_MONTH)
    keep = f'{{gen_ai_evaluation_name="{rules.metric}"}}'
    count = f"{PREFIX}evaluations{rules.window}{keep}"
    spread = 2 * log_inv * rules.healthy * (1 - rules.healthy)
    expr = (
        f"{PREFIX}fail_ratio{rules.window}{keep}\n"
        f"> {_g(rules.healthy)} + ({_g(log_inv / 3)} + sqrt({_g(log_inv**2 / 9)} + "
        f"{_g(spread)} * {count})) / {count}\n"
        f"{ON}\n{count} >= {rules.min_evaluations}"
    )
    return {
        "alert": rules.alert_low,
        "expr": expr,
        "for": "5m",
        "labels": {"severity": "page"},
        "annotations": {
            "summary": "{{ $labels.service_name }}: {{ $value | humanizePercentage }} of "
            f"{rules.metric} scores fail",
            "description": "{{ $value | humanizePercentage }} of the "
            f"{rules.metric} scores of {{{{ $labels.service_name }}}} in the last "
            f"{rules.window} fail its threshold ({_g(rules.threshold)}): more than a service "
            f"with {rules.healthy:.1%} failing (the judge's rates at "
            "the tolerated share of hallucinated answers) reaches by chance, "
            f"with at least {rules.min_evaluations} evaluations.",
            "runbook_url": f"collector-config/README.md#{rules.alert_low.lower()}",
            "runbook": _runbook(rules.metric),
        },
    }


def above_baseline(
    share: str,
    count: str,
    base: str,
    base_count: str,
    log_inv: float,
    min_rise: float,
    min_evaluations: int,
    on: str,
) -> str:
    """PromQL: a window's ``share`` of ``count`` evaluations above the baseline's ``base``
    of ``base_count`` by more than chance (``alert_bounds.excess`` with the variance of both
    shares: n·b·(1 − b)·(1 + n/m)), by at least ``min_rise``, with ``min_evaluations``."""
    return (
        f"{share}\n> {base} + ({_g(log_inv / 3)} + sqrt({_g(log_inv**2 / 9)} + "
        f"{_g(2 * log_inv)} * {count} * {base} * (1 - {base}) * (1 + {count} / {base_count})))"
        f" / {count}\n"
        f"{on}\n{share} - {base} >= {_g(min_rise)}\n"
        f"{on}\n{count} >= {min_evaluations}"
    )


def drop_alert(rules: MetricRules) -> dict[str, Any]:
    """The ticket: more fails than the service's own day before, by chance and by size."""
    log_inv = log_inverse_alpha(FALSE_TICKETS_PER_MONTH)
    keep = f'{{gen_ai_evaluation_name="{rules.metric}"}}'
    w = rules.window
    share = f"{PREFIX}fail_ratio{w}{keep}"
    count = f"{PREFIX}evaluations{w}{keep}"
    base = f"{PREFIX}baseline_fail_ratio{w}{keep}"
    base_count = f"{PREFIX}baseline_evaluations{w}{keep}"
    expr = above_baseline(
        share, count, base, base_count, log_inv, rules.min_rise, rules.min_evaluations, ON
    )
    return {
        "alert": rules.alert_drop,
        "expr": expr,
        "for": "15m",
        "labels": {"severity": "ticket"},
        "annotations": {
            "summary": "{{ $labels.service_name }}: "
            f"{rules.metric} fails more than the day before",
            "description": "{{ $value | humanizePercentage }} of the "
            f"{rules.metric} scores of {{{{ $labels.service_name }}}} in the last {w} fail "
            f"its threshold, more than the service's own share over the {BASELINE} before "
            f"by more than chance and by at least {rules.min_rise:.1%}.",
            "runbook_url": f"collector-config/README.md#{rules.alert_drop.lower()}",
            "runbook": _runbook(rules.metric),
        },
    }


def judge_group(judge: str, traffic: Traffic) -> dict[str, Any]:
    """The rules group of ``judge``'s labels at ``traffic``."""
    found = judge_metric_rules(judge, traffic)
    groundedness = _label_policy(judge).get("groundedness")
    diagnoses = judge_diagnosis_rules(
        traffic,
        labels_groundedness=groundedness is not None and groundedness.threshold is not None,
        groundedness_pages=groundedness is not None and groundedness.keeps_promise,
    )
    used = {r.window for r in found}
    windows = [name for name, _ in WINDOWS if name in used]
    rules: list[dict[str, Any]] = [
        {
            "record": "ragpulse_rules:judge_info",
            "expr": "vector(1)",
            "labels": {"judge": judge},
        },
        *recording_rules(windows),
    ]
    for metric in found:
        if metric.pages:
            rules.append(low_alert(metric))
        rules.append(drop_alert(metric))
    # The dashboard plots the 15-minute diagnosis shares, whatever window the alerts count.
    diagnosed = {"15m"} | {d.window for d in diagnoses}
    rules += diagnosis_recording_rules([name for name, _ in WINDOWS if name in diagnosed])
    rules += [diagnosis_alert(d) for d in diagnoses]
    return {"name": GROUP, "rules": rules}


# --- diagnoses: whose fault a poor answer is --------------------------------------------------

EVALUATIONS_SERIES = "ragpulse_evaluator_evaluations_total"
"""Every evaluation, by its diagnosis (``ragpulse.evaluator.evaluations``)."""
DIAGNOSED = 'ragpulse_eval_diagnosis!=""'
DIAGNOSIS_PREFIX = "service_name:ragpulse_evaluator_evaluations:"
ON_SERVICE = "and on (service_name, ragpulse_eval_diagnosis)"


class Diagnosis(NamedTuple):
    """What a diagnosis alert says: its diagnosis and the words of its annotations."""

    diagnosis: str
    summary: str
    description: str
    runbook: str
    """What to read in the traces found, from a connective on: " and read ...", "; ..."."""
    severity: str | None
    """``page`` or ``ticket``; ``None``: as the judge's groundedness label, which it rests on."""


DIAGNOSES: Mapping[str, Diagnosis] = {
    "RagRetrievalMissRising": Diagnosis(
        "retrieval_miss",
        "of answers fail for want of the right passages",
        "the retrieved passages lack what the question or the reference needs, and the answer "
        "is unsupported, abstains or follows the wrong passages.",
        " and read ragpulse.eval.diagnosis.explanation and the retrieval span's documents: an "
        "index that lost documents, an embedding model change, a filter or top-k that cuts too "
        "much.",
        None,
    ),
    "RagGenerationDriftRising": Diagnosis(
        "generation_drift",
        "of answers drift from good passages",
        "the passages held what was needed, and the answer is unsupported by them, contradicts "
        "them or abstains.",
        " and read the failing claims in ragpulse.eval.groundedness.explanation: a model or prompt "
        "change, a temperature raised, a context window that cuts the passages.",
        None,
    ),
    "RagToolFailureRising": Diagnosis(
        "tool_failure",
        "of agent answers follow a failed tool",
        "the tool the agent fetches its evidence with failed or returned nothing, and the agent "
        "answered anyway.",
        "; the unit span's ragpulse.tools.failed names the tools, their execute_tool spans carry "
        "the error: a search backend down, an expired credential, a schema change, a timeout.",
        "page",
    ),
}


@dataclass(frozen=True)
class DiagnosisRules:
    """The numbers of one diagnosis alert, as they appear in PromQL and the docs."""

    alert: str
    diagnosis: Diagnosis
    severity: str
    window: str
    typical: float
    """The share of a service's evaluations the window is sized to see a rise from."""
    min_evaluations: int
    min_rise: float


def diagnosis_rules(alert: str, severity: str, traffic: Traffic) -> DiagnosisRules:
    """The numbers of the diagnosis alert ``alert`` at ``severity`` and ``traffic``: a
    diagnosis is no judge's label with measured rates, so its share is taken at its word
    (``ASSUMED``) and sized as a baseline ticket on such a label is, with a page's
    allowance of false alarms when it pages."""
    window, min_evaluations, min_rise = sized(ASSUMED, severity == "page", traffic)
    return DiagnosisRules(
        alert=alert,
        diagnosis=DIAGNOSES[alert],
        severity=severity,
        window=window,
        typical=ASSUMED.fail_share(traffic.tolerated),
        min_evaluations=min_evaluations,
        min_rise=min_rise,
    )


def judge_diagnosis_rules(
    traffic: Traffic, labels_groundedness: bool, groundedness_pages: bool
) -> list[DiagnosisRules]:
    """The diagnosis alerts of a judge: those resting on groundedness (a retrieval miss,
    generation drift) only for a judge that labels it, paging only where that label keeps
    its promise; the tool failure (read from the agent's spans, no label) always."""
    found = []
    for alert, diagnosis in DIAGNOSES.items():
        severity = diagnosis.severity
        if severity is None:
            if not labels_groundedness:
                continue
            severity = "page" if groundedness_pages else "ticket"
        found.append(diagnosis_rules(alert, severity, traffic))
    return found


def _diagnosed(window: str, by: str, offset: str = "") -> str:
    shift = f" offset {offset}" if offset else ""
    return f"sum by ({by})\n(increase({EVALUATIONS_SERIES}{{{DIAGNOSED}}}[{window}]{shift}))"


def _per_diagnosis(window: str, offset: str = "") -> str:
    return _diagnosed(window, "service_name, ragpulse_eval_diagnosis", offset)


def diagnosis_recording_rules(windows: list[str]) -> list[dict[str, Any]]:
    """Per service and diagnosis, each window's share of the evaluations with a diagnosis and
    their number, and the same over the day before the window. A diagnosis the day before
    never saw has a baseline share of 0; the numbers sit on each diagnosis's series, so the
    alerts compare like with like."""
    rules: list[dict[str, Any]] = []
    for window in windows:
        share = f"{DIAGNOSIS_PREFIX}diagnosis_share{window}"
        carried = f"0 * {share}\n+ on (service_name) group_left\n"
        rules += [
            {
                "record": share,
                "expr": f"{_per_diagnosis(window)}\n/ ignoring (ragpulse_eval_diagnosis) "
                f"group_left\n{_diagnosed(window, 'service_name')}",
            },
            {
                "record": f"{DIAGNOSIS_PREFIX}diagnosis_evaluations{window}",
                "expr": carried + _diagnosed(window, "service_name"),
            },
            {
                "record": f"{DIAGNOSIS_PREFIX}baseline_diagnosis_share{window}",
                "expr": f"(\n{_per_diagnosis(BASELINE, window)}\n/ ignoring "
                f"(ragpulse_eval_diagnosis) group_left\n"
                f"{_diagnosed(BASELINE, 'service_name', window)}\n)\nor 0 * {share}",
            },
            {
                "record": f"{DIAGNOSIS_PREFIX}baseline_diagnosis_evaluations{window}",
                "expr": carried + _diagnosed(BASELINE, "service_name", window),
            },
        ]
    return rules


def diagnosis_alert(rules: DiagnosisRules) -> dict[str, Any]:
    """A diagnosis's share of a service's evaluations above its own share over the day
    before, by more than chance and by a minimum rise: the baseline ticket's test
    (``above_baseline``) on the diagnosis counter."""
    d = rules.diagnosis
    w = rules.window
    keep = f'{{ragpulse_eval_diagnosis="{d.diagnosis}"}}'
    share = f"{DIAGNOSIS_PREFIX}diagnosis_share{w}{keep}"
    count = f"{DIAGNOSIS_PREFIX}diagnosis_evaluations{w}{keep}"
    base = f"{DIAGNOSIS_PREFIX}baseline_diagnosis_share{w}{keep}"
    base_count = f"{DIAGNOSIS_PREFIX}baseline_diagnosis_evaluations{w}{keep}"
    log_inv = log_inverse_alpha(
        FALSE_PAGES_PER_MONTH if rules.severity == "page" else FALSE_TICKETS_PER_MONTH
    )
    expr = above_baseline(
        share, count, base, base_count, log_inv, rules.min_rise, rules.min_evaluations, ON_SERVICE
    )
    return {
        "alert": rules.alert,
        "expr": expr,
        "for": "5m",
        "labels": {"severity": rules.severity},
        "annotations": {
            "summary": "{{ $labels.service_name }}: {{ $value | humanizePercentage }} " + d.summary,
            "description": "{{ $value | humanizePercentage }} of the evaluated answers of "
            f"{{{{ $labels.service_name }}}} in the last {w} are diagnosed {d.diagnosis}: "
            f"{d.description} More than the service's own share over the {BASELINE} before, "
            f"by more than chance and by at least {rules.min_rise:.1%}.",
            "runbook_url": f"collector-config/README.md#{rules.alert.lower()}",
            "runbook": "Find the traces with TraceQL { span.ragpulse.eval.diagnosis = "
            f'"{d.diagnosis}" }}{d.runbook}',
        },
    }
