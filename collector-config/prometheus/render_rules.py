"""Render rules.yaml with other time windows, e.g. seconds instead of minutes for a live test.

rules.yaml stays the only copy of the alert logic; this script rewrites every range selector
(``[15m]``) and every ``for:`` duration through explicit maps and refuses a duration it has no
mapping for, so a new rule cannot keep a production window by accident.

    python render_rules.py rules.yaml > rules.test-windows.yaml

The alerts on answer quality compare the share of scores labelled ``fail``
(``ragpulse_evaluation_labels_total``): the label each span carries, against its metric's own
threshold, so a score exactly at the threshold passes in the alert as on the span, and a
threshold moved by ``configure(thresholds=...)`` or a calibration moves the alert with it.

With ``--metric NAME`` (your own metric, declared with a threshold), an alert
``Rag<Name>Low`` of the same form as ``RagRelevancyLow`` is added for it; ``--production-windows``
keeps the production windows:

    python render_rules.py rules.yaml --metric shouting --production-windows

With ``--slo METRIC=OBJECTIVE`` (``groundedness=0.95``: 95 % of evaluated answers pass the
metric's threshold over 28 days), a group of SLO rules replaces that metric's group, if any:
the error ratio (the share labelled ``fail``) and the number of evaluations of each window, the
error budget left, and two multiwindow, multi-burn-rate alerts (the Google SRE workbook's 14.4x
over 1h and 5m, 6x over 6h and 30m), each of which may fire only when both its windows hold the
minimum number of evaluations that ``min_evaluations`` derives (docs/operations.md shows the
arithmetic):

    python render_rules.py rules.yaml --slo groundedness=0.95 --production-windows

Needs PyYAML.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml

# Production window -> test window. The ratios need not be exact; what matters is that the
# windows keep their order (15m < 1h < 1d) so each rule still means the same thing.
TEST_RANGE_WINDOWS: Mapping[str, str] = {
    "5m": "10s",
    "15m": "20s",
    "30m": "30s",
    "1h": "40s",
    "6h": "80s",
    "1d": "2m",
    "28d": "10m",
}
TEST_FOR_DURATIONS: Mapping[str, str] = {"5m": "2s", "15m": "5s"}

_RANGE_SELECTOR = re.compile(r"\[([0-9]+[smhdwy])\]")


class _Dumper(yaml.SafeDumper):
    """Writes a multi-line expression as a literal block, the way rules.yaml lays them out."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_text)


def dump(document: dict[str, Any]) -> str:
    """The rules document as YAML, expressions kept readable."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=100)


def _rewrite_ranges(expr: str, windows: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        window = match.group(1)
        if window not in windows:
            raise ValueError(f"no test window for range [{window}] in: {expr}")
        return f"[{windows[window]}]"

    return _RANGE_SELECTOR.sub(replace, expr)


LABELS_SERIES = "ragpulse_evaluation_labels_total"
"""Scores by pass/fail label (``ragpulse.evaluation.labels``): what the quality alerts compare."""
FAIL = 'gen_ai_evaluation_score_label="fail"'


_METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TEMPLATE_ALERT = "RagRelevancyLow"


def alert_name(metric: str) -> str:
    """``RagShoutingLow`` for ``shouting``, ``RagAnswerLengthLow`` for ``answer_length``."""
    return "Rag" + "".join(part.capitalize() for part in metric.split("_")) + "Low"


def with_metric_alerts(source: str, metrics: list[str]) -> str:
    """``source`` with an alert per metric in ``metrics`` (your own, from ``@ragpulse.metric``
    with a ``threshold``), of the same form as the relevancy alert: the share of its scores
    labelled ``fail`` over 15 minutes. A metric without a threshold has no label, so its
    alert would never fire: declare one."""
    if not metrics:
        return source
    document: dict[str, Any] = yaml.safe_load(source)
    template = next(
        (r for g in document["groups"] for r in g["rules"] if r.get("alert") == _TEMPLATE_ALERT),
        None,
    )
    if template is None:
        raise ValueError(f"no {_TEMPLATE_ALERT} rule to take the form of a metric's alert from")
    existing = {r.get("alert") for g in document["groups"] for r in g["rules"]}
    group = next(g for g in document["groups"] if template in g["rules"])
    for metric in metrics:
        if "=" in metric:
            raise ValueError(
                f"--metric {metric!r}: name the metric only; its alert reads the pass/fail "
                "label, against the threshold its @ragpulse.metric declares"
            )
        if not _METRIC_NAME.match(metric):
            raise ValueError(f"--metric {metric!r}: use lower-case letters, digits, underscores")
        name = alert_name(metric)
        if name in existing:
            raise ValueError(f"--metric {metric}: the rules already have an alert {name}")
        selector = f'gen_ai_evaluation_name="{metric}"'
        anchor = name.lower()
        group["rules"].append(
            {
                "alert": name,
                "expr": str(template["expr"]).replace(
                    'gen_ai_evaluation_name="relevancy"', selector
                ),
                "for": template["for"],
                "labels": dict(template["labels"]),
                "annotations": {
                    "summary": "{{ $labels.service_name }}: {{ $value | humanizePercentage }} "
                    f"of {metric} scores fail",
                    "description": f"{{{{ $value | humanizePercentage }}}} of the {metric} scores "
                    f"of {{{{ $labels.service_name }}}} in the last 15 minutes fail its "
                    "threshold.",
                    "runbook_url": f"collector-config/README.md#{anchor}",
                    "runbook": f"Find the traces with TraceQL {{ span.ragpulse.eval.{metric}.label "
                    f'= "fail" }} and read ragpulse.eval.{metric}.explanation.',
                },
            }
        )
    return dump(document)


# --- SLOs: multiwindow, multi-burn-rate alerts ------------------------------------------------

SLO_PERIOD = "28d"
"""The window an SLO's error budget is counted over."""
SLO_PERIOD_HOURS = 28 * 24
MISFIRE = 0.001
"""The chance a window may have of showing a burn while errors arrive exactly at the budget's
rate: what the minimum number of evaluations per window is derived from."""


class BurnRateAlert(NamedTuple):
    """One pair of windows of the SRE workbook's multiwindow, multi-burn-rate alerts."""

    name: str
    factor: float
    """How many times faster than the budget allows the errors arrive."""
    long: str
    short: str
    long_hours: float
    severity: str


BURN_RATE_ALERTS = (
    BurnRateAlert("Fast", 14.4, "1h", "5m", 1.0, "page"),
    BurnRateAlert("Slow", 6.0, "6h", "30m", 6.0, "page"),
)


def _relative_entropy(q: float, p: float) -> float:
    """KL(q || p) of two Bernoulli distributions, in nats."""
    return q * math.log(q / p) + (1 - q) * math.log((1 - q) / (1 - p))


def min_evaluations(objective: float, factor: float, misfire: float = MISFIRE) -> int:
    """The evaluations a window needs before a ``factor``-times burn of the error budget may
    fire on it: with errors arriving exactly at the budget's rate b = 1 - ``objective``, the
    chance that n evaluations show an error ratio above ``factor`` × b is at most
    exp(-n KL(factor·b ‖ b)) (Chernoff's bound), which is at most ``misfire`` from
    n = ln(1/misfire) / KL(factor·b ‖ b) on."""
    budget = 1.0 - objective
    burn = factor * budget
    if not 0.0 < budget < burn < 1.0:
        raise ValueError(
            f"an objective of {objective:g} leaves a budget of {budget:g}: a {factor:g}x burn "
            f"would need an error ratio of {burn:g}; choose an objective above "
            f"{1 - 1 / factor:.4f}"
        )
    return math.ceil(math.log(1 / misfire) / _relative_entropy(burn, budget))


def _slo_group_name(metric: str) -> str:
    return f"ragpulse-slo-{metric}"


def _ratio(selector: str, window: str) -> str:
    by = "sum by (service_name, gen_ai_evaluation_name)"
    return (
        f"{by}\n(increase({LABELS_SERIES}{{{selector},{FAIL}}}[{window}]))\n/\n"
        f"{by}\n(increase({LABELS_SERIES}{{{selector}}}[{window}]))"
    )


def _count(selector: str, window: str) -> str:
    by = "sum by (service_name, gen_ai_evaluation_name)"
    return f"{by}\n(increase({LABELS_SERIES}{{{selector}}}[{window}]))"


def slo_rules(metric: str, objective: float) -> dict[str, Any]:
    """The rules group of an SLO: ``objective`` of ``metric``'s evaluated answers pass its
    threshold (labelled ``pass``, as its alert reads them) over ``SLO_PERIOD``."""
    if not _METRIC_NAME.match(metric):
        raise ValueError(f"--slo {metric!r}: use lower-case letters, digits, underscores")
    if not 0.0 < objective < 1.0:
        raise ValueError(f"--slo {metric}={objective:g}: the objective lies in (0, 1)")
    budget = round(1.0 - objective, 6)
    selector = f'gen_ai_evaluation_name="{metric}"'
    prefix = "service_name:ragpulse_evaluation_labels:slo_"
    keep = f"{{{selector}}}"
    windows = sorted(
        {w for a in BURN_RATE_ALERTS for w in (a.long, a.short)},
        key=lambda w: float(w[:-1]) * {"m": 1, "h": 60, "d": 1440}[w[-1]],
    )
    rules: list[dict[str, Any]] = [
        {
            "record": "ragpulse_evaluation_labels:slo_objective",
            "expr": f"vector({objective:g})",
            "labels": {"gen_ai_evaluation_name": metric},
        },
    ]
    for window in windows:
        rules.append({"record": f"{prefix}error_ratio_{window}", "expr": _ratio(selector, window)})
        rules.append({"record": f"{prefix}evaluations_{window}", "expr": _count(selector, window)})
    rules.append(
        {"record": f"{prefix}error_ratio_{SLO_PERIOD}", "expr": _ratio(selector, SLO_PERIOD)}
    )
    rules.append(
        {
            "record": f"{prefix}error_budget_remaining",
            "expr": f"1 - {prefix}error_ratio_{SLO_PERIOD}{keep} / {budget:g}",
        }
    )
    title = metric.capitalize()
    for alert in BURN_RATE_ALERTS:
        minimum = min_evaluations(objective, alert.factor)
        burn = round(alert.factor * budget, 6)
        spent = alert.factor * alert.long_hours / SLO_PERIOD_HOURS
        parts = [
            f"{prefix}error_ratio_{alert.long}{keep} > {burn:g}",
            f"{prefix}error_ratio_{alert.short}{keep} > {burn:g}",
            f"{prefix}evaluations_{alert.long}{keep} >= {minimum}",
            f"{prefix}evaluations_{alert.short}{keep} >= {minimum}",
        ]
        rules.append(
            {
                "alert": f"Rag{title}BudgetBurn{alert.name}",
                "expr": "\nand on (service_name, gen_ai_evaluation_name)\n".join(parts),
                "labels": {"severity": alert.severity, "slo": metric},
                "annotations": {
                    "summary": f"{{{{ $labels.service_name }}}}: {metric} spends its "
                    f"{SLO_PERIOD} error budget {alert.factor:g} times too fast",
                    "description": f"{{{{ $value | humanizePercentage }}}} of the {metric} "
                    f"scores of {{{{ $labels.service_name }}}} in the last {alert.long} (and "
                    f"over {burn:.0%} in the last {alert.short}) fail its threshold; the "
                    f"objective allows {budget:.0%} over {SLO_PERIOD}. At this rate "
                    f"{alert.long} spends {spent:.1%} of the budget. Each window held at least "
                    f"{minimum} evaluations.",
                    "runbook_url": "collector-config/README.md#slo-burn-rate-alerts",
                    "runbook": f"Find the traces with TraceQL {{ span.ragpulse.eval.{metric}.label "
                    f'= "fail" }}; group them by ragpulse.eval.diagnosis (retrieval_miss or '
                    "generation_drift) to see which side burns the budget.",
                },
            }
        )
    return {"name": _slo_group_name(metric), "rules": rules}


def with_slo(source: str, spec: str) -> str:
    """``source`` with the SLO group of ``spec`` (``groundedness=0.95``), replacing that
    metric's SLO group when the rules have one."""
    metric, sep, value = spec.partition("=")
    try:
        objective = float(value)
    except ValueError:
        objective = math.nan
    if not sep or not 0.0 < objective < 1.0:
        raise ValueError(f"--slo {spec!r}: expected METRIC=OBJECTIVE with OBJECTIVE in (0, 1)")
    document: dict[str, Any] = yaml.safe_load(source)
    alerts = {r.get("alert") for g in document["groups"] for r in g["rules"]}
    if alert_name(metric) not in alerts:
        # A metric without a threshold has no pass/fail label, so nothing to count errors by.
        raise ValueError(
            f"--slo {spec!r}: the rules have no {alert_name(metric)}; an SLO needs a metric "
            "with a pass/fail threshold (your own: add its alert with --metric first)"
        )
    group = slo_rules(metric, objective)
    groups = document["groups"]
    names = [g["name"] for g in groups]
    if group["name"] in names:
        groups[names.index(group["name"])] = group
    else:
        groups.append(group)
    return dump(document)


def render_rules(
    source: str,
    windows: Mapping[str, str] = TEST_RANGE_WINDOWS,
    for_durations: Mapping[str, str] = TEST_FOR_DURATIONS,
) -> str:
    """Return the rules document ``source`` with its windows and ``for`` durations rewritten."""
    document: dict[str, Any] = yaml.safe_load(source)
    for group in document["groups"]:
        for rule in group["rules"]:
            rule["expr"] = _rewrite_ranges(str(rule["expr"]), windows)
            if "for" in rule:
                duration = str(rule["for"])
                if duration not in for_durations:
                    raise ValueError(f"no test duration for `for: {duration}`")
                rule["for"] = for_durations[duration]
    header = "# Rendered from rules.yaml by render_rules.py with test-sized windows. Do not edit.\n"
    return header + dump(document)


def main(argv: list[str] | None = None) -> int:
    """Command line: render a rules file with the test windows to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rules", type=Path, help="the rules.yaml to render")
    parser.add_argument(
        "--production-windows", action="store_true", help="keep the production windows"
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        help="your own metric (from @ragpulse.metric or RubricMetric, with a threshold), by "
        "NAME: add its alert, Rag<Name>Low, of the same form as RagRelevancyLow (repeatable)",
    )
    parser.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC=OBJECTIVE",
        help="an SLO: OBJECTIVE (0.95) of the metric's evaluated answers pass its threshold "
        f"over {SLO_PERIOD}, with multiwindow, multi-burn-rate alerts (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        source = with_metric_alerts(args.rules.read_text(encoding="utf-8"), args.metric)
        for spec in args.slo:
            source = with_slo(source, spec)
    except (OSError, ValueError) as exc:
        print(f"render_rules.py: {exc}", file=sys.stderr)
        return 2
    if args.production_windows:
        sys.stdout.write(source)
        return 0
    sys.stdout.write(render_rules(source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
