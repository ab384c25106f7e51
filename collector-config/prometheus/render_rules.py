"""Render rules.yaml for a judge and traffic, with an SLO, and with test-sized windows.

rules.yaml stays the only copy of the alert logic. With ``--judge KIND`` (or ``--rate``,
``--sample-rate``, ``--tolerated``) the answer-quality group is rendered again from that
judge's label declaration (``judge_rules``): a page only on a label whose measured rates keep
its promise, a baseline ticket for every label, no rule on a metric the judge writes no label
for, each window's bound derived from the rates and the traffic (``alert_bounds``;
docs/operations.md shows the arithmetic). ``--production-windows`` prints the result:

    python render_rules.py rules.yaml --judge openai --rate 20 --sample-rate 0.1 \
        --production-windows > rules.yaml

The alerts compare the share of scores labelled ``fail`` (``ragpulse_evaluation_labels_total``):
the label each span carries, so a score exactly at the threshold passes in the alert as on the
span, and a threshold moved by ``configure(thresholds=...)`` or a calibration moves the alert.

With ``--metric NAME`` (your own metric, declared with a threshold) a ticket
``Rag<Name>Drop`` is added for it: its label is unmeasured, so it never pages.

With ``--slo METRIC=OBJECTIVE`` (``faithfulness=0.95``: 95 % of evaluated answers not
hallucinated over 28 days, read through the judge's rates), a group of SLO rules replaces that
metric's group, if any: the fail share and the number of evaluations of each window, the error
budget left, and two multiwindow, multi-burn-rate alerts (the Google SRE workbook's 14.4x over
1h and 5m, 6x over 6h and 30m), each of which may fire only when both its windows hold the
minimum number of evaluations ``min_evaluations`` derives. An objective whose short windows
cannot hold that minimum at the rendered traffic is refused (exit 2).

``--promtool-tests RULES_NAME`` prints the promtool tests of the generated groups instead
(``rule_tests``), ``--list-alerts`` the alert list the docs carry. Without
``--production-windows`` every range selector (``[15m]``), offset and ``for:`` duration is
rewritten through explicit maps into seconds for the live alert test, refusing a duration it
has no mapping for, so a new rule cannot keep a production window by accident:

    python render_rules.py rules.yaml > rules.test-windows.yaml

Needs PyYAML, and ragpulse for the judges' label declarations.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling modules, however run

import judge_rules
import rule_tests
from alert_bounds import FALSE_PAGES_PER_MONTH, JudgeRates, log_inverse_alpha

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
_OFFSET = re.compile(r"offset ([0-9]+[smhdwy])")


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

    def shift(match: re.Match[str]) -> str:
        window = match.group(1)
        if window not in windows:
            raise ValueError(f"no test window for offset {window} in: {expr}")
        return f"offset {windows[window]}"

    return _OFFSET.sub(shift, _RANGE_SELECTOR.sub(replace, expr))


LABELS_SERIES = "ragpulse_evaluation_labels_total"
"""Scores by pass/fail label (``ragpulse.evaluation.labels``): what the quality alerts compare."""
FAIL = 'gen_ai_evaluation_score_label="fail"'
DEFAULT_JUDGE = "lexical"
"""The judge ``configure()`` and ``ragpulse serve`` use unless told otherwise."""

_METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def alert_name(metric: str) -> str:
    """``RagShoutingLow`` for ``shouting``, ``RagAnswerLengthLow`` for ``answer_length``."""
    return judge_rules.alert_name(metric, "Low")


def _groups(document: dict[str, Any]) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = document["groups"]
    return groups


def _replace_group(document: dict[str, Any], group: dict[str, Any]) -> None:
    groups = _groups(document)
    names = [g["name"] for g in groups]
    if group["name"] in names:
        groups[names.index(group["name"])] = group
    else:
        groups.append(group)


def with_judge(source: str, judge: str, traffic: judge_rules.Traffic) -> str:
    """``source`` with the answer-quality group of ``judge``'s labels at ``traffic``,
    replacing the one it has."""
    if judge not in _judge_kinds():
        raise ValueError(f"--judge {judge!r}: choose one of {', '.join(_judge_kinds())}")
    document: dict[str, Any] = yaml.safe_load(source)
    _replace_group(document, judge_rules.judge_group(judge, traffic))
    return dump(document)


def _judge_kinds() -> tuple[str, ...]:
    from ragpulse.judges._kinds import JUDGE_KINDS

    return tuple(JUDGE_KINDS)


def rendered_judge(document: dict[str, Any]) -> str | None:
    """The judge a rules document was rendered for (its ``ragpulse_rules:judge_info``)."""
    for group in _groups(document):
        for rule in group["rules"]:
            if rule.get("record") == "ragpulse_rules:judge_info":
                judge: str = rule["labels"]["judge"]
                return judge
    return None


def with_metric_alerts(source: str, metrics: list[str], traffic: judge_rules.Traffic) -> str:
    """``source`` with a baseline ticket per metric in ``metrics`` (your own, from
    ``@ragpulse.metric`` with a ``threshold``): its label is unmeasured, so it gets
    ``Rag<Name>Drop``, never a page. A metric without a threshold has no label, so its
    alert would never fire: declare one."""
    if not metrics:
        return source
    document: dict[str, Any] = yaml.safe_load(source)
    groups = [g for g in _groups(document) if g["name"] == judge_rules.GROUP]
    if not groups:
        raise ValueError("the rules have no answer-quality group: render them with --judge")
    group = groups[0]
    existing = {r.get("alert") for g in _groups(document) for r in g["rules"]}
    for metric in metrics:
        if "=" in metric:
            raise ValueError(
                f"--metric {metric!r}: name the metric only; its alert reads the pass/fail "
                "label, against the threshold its @ragpulse.metric declares"
            )
        if not _METRIC_NAME.match(metric):
            raise ValueError(f"--metric {metric!r}: use lower-case letters, digits, underscores")
        rules = judge_rules.metric_rules(metric, None, None, False, traffic)
        if rules.alert_drop in existing:
            raise ValueError(
                f"--metric {metric}: the rules already have an alert {rules.alert_drop}"
            )
        recorded = {r.get("record") for r in group["rules"]}
        for rule in judge_rules.recording_rules([rules.window]):
            if rule["record"] not in recorded:
                group["rules"].insert(1, rule)
        group["rules"].append(judge_rules.drop_alert(rules))
    return dump(document)


# --- SLOs: multiwindow, multi-burn-rate alerts ------------------------------------------------

SLO_PERIOD = "28d"
"""The window an SLO's error budget is counted over."""
SLO_PERIOD_HOURS = 28 * 24


class BurnRateAlert(NamedTuple):
    """One pair of windows of the SRE workbook's multiwindow, multi-burn-rate alerts."""

    name: str
    factor: float
    """How many times faster than the budget allows the errors arrive."""
    long: str
    short: str
    long_hours: float
    short_seconds: int
    severity: str


BURN_RATE_ALERTS = (
    BurnRateAlert("Fast", 14.4, "1h", "5m", 1.0, 300, "page"),
    BurnRateAlert("Slow", 6.0, "6h", "30m", 6.0, 1800, "page"),
)


def _relative_entropy(q: float, p: float) -> float:
    """KL(q || p) of two Bernoulli distributions, in nats."""
    return q * math.log(q / p) + (1 - q) * math.log((1 - q) / (1 - p))


def min_evaluations(
    objective: float, factor: float, rates: JudgeRates = judge_rules.ASSUMED
) -> int:
    """The evaluations a window needs before a ``factor``-times burn of the error budget may
    fire on it.

    An error is a hallucinated answer; the judge labels it ``fail`` with chance p1 and a
    correct answer with chance p0, so a service whose errors arrive at the budget's rate
    b = 1 - ``objective`` fails f(b) = p0 + b (p1 - p0) of its evaluations and one burning
    ``factor`` times f(factor·b). The chance that n evaluations at f(b) show f(factor·b) or
    more is at most exp(-n KL(f(factor·b) ‖ f(b))) (Chernoff's bound), which is at most the
    chance one rule evaluation may have of a false page (``alert_bounds.log_inverse_alpha``)
    from n = ln(1/α) / KL(f(factor·b) ‖ f(b)) on."""
    budget = 1.0 - objective
    burn = factor * budget
    if not 0.0 < budget < burn < 1.0:
        raise ValueError(
            f"an objective of {objective:g} leaves a budget of {budget:g}: a {factor:g}x burn "
            f"would need {burn:g} of the answers hallucinated; choose an objective above "
            f"{1 - 1 / factor:.4f}"
        )
    healthy, burning = rates.fail_share(budget), rates.fail_share(burn)
    return math.ceil(log_inverse_alpha(FALSE_PAGES_PER_MONTH) / _relative_entropy(burning, healthy))


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


def slo_rates(judge: str, metric: str) -> JudgeRates:
    """What ``judge``'s label on ``metric`` says of a hallucinated answer; refused where the
    label is missing, unmeasured or breaks its promise, since an SLO's alerts page."""
    from ragpulse.judges._labels import label_policy

    label = label_policy(judge).get(metric)
    if label is None or label.threshold is None:
        reason = label.reason if label is not None and label.reason else "no label"
        raise ValueError(
            f"--slo {metric}: the {judge} judge writes no pass/fail label for {metric} "
            f"({reason}); an SLO needs a metric with a pass/fail threshold"
        )
    if label.false_fail is None or label.detection is None or not label.keeps_promise:
        raise ValueError(
            f"--slo {metric}: the {judge} judge's {metric} label has no measured rates that "
            f"keep its promise ({label.evidence}); its burn-rate alerts would page on what "
            "the judge cannot decide"
        )
    return JudgeRates(label.false_fail, label.detection)


def slo_rules(
    metric: str,
    objective: float,
    rates: JudgeRates = judge_rules.ASSUMED,
    evaluations_per_second: float | None = None,
) -> dict[str, Any]:
    """The rules group of an SLO: ``objective`` of ``metric``'s evaluated answers are not
    hallucinated over ``SLO_PERIOD``, read from the share the judge labels ``fail`` through
    its ``rates``. With ``evaluations_per_second``, an objective whose windows cannot hold
    the evaluations its alerts need is refused."""
    if not _METRIC_NAME.match(metric):
        raise ValueError(f"--slo {metric!r}: use lower-case letters, digits, underscores")
    if not 0.0 < objective < 1.0:
        raise ValueError(f"--slo {metric}={objective:g}: the objective lies in (0, 1)")
    budget = round(1.0 - objective, 12)
    minimums = {a.name: min_evaluations(objective, a.factor, rates) for a in BURN_RATE_ALERTS}
    if evaluations_per_second is not None:
        for alert in BURN_RATE_ALERTS:
            expected = evaluations_per_second * alert.short_seconds
            if minimums[alert.name] > expected:
                raise ValueError(
                    f"--slo {metric}={objective:g}: the {alert.factor:g}x burn alert needs "
                    f"{minimums[alert.name]} evaluations in {alert.short}, and "
                    f"{evaluations_per_second:g} evaluations a second give {expected:g}: no "
                    "window can reach the objective; choose a lower one or raise --rate or "
                    "--sample-rate"
                )
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
    spread = rates.detection - rates.false_fail
    rules.append(
        {
            # The hallucinated share the fail share implies, against the budget.
            "record": f"{prefix}error_budget_remaining",
            "expr": f"1 - (clamp_min({prefix}error_ratio_{SLO_PERIOD}{keep} - "
            f"{rates.false_fail:g}, 0) / {spread:g}) / {budget:g}",
        }
    )
    for alert in BURN_RATE_ALERTS:
        rules.append(
            {
                # How many times faster than the budget allows the implied hallucinated
                # share arrives: what the dashboard plots against 14.4 and 6.
                "record": f"{prefix}burn_rate_{alert.long}",
                "expr": f"clamp_min({prefix}error_ratio_{alert.long}{keep} - "
                f"{rates.false_fail:g}, 0) / {spread:g} / {budget:g}",
            }
        )
    title = "".join(part.capitalize() for part in metric.split("_"))
    for alert in BURN_RATE_ALERTS:
        minimum = minimums[alert.name]
        burn = alert.factor * budget
        fail_share = round(rates.fail_share(burn), 6)
        spent = alert.factor * alert.long_hours / SLO_PERIOD_HOURS
        parts = [
            f"{prefix}error_ratio_{alert.long}{keep} > {fail_share:g}",
            f"{prefix}error_ratio_{alert.short}{keep} > {fail_share:g}",
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
                    f"over {fail_share:.1%} in the last {alert.short}) fail its threshold: "
                    f"what the judge labels when {burn:.0%} of the answers are hallucinated; "
                    f"the objective allows {budget:.0%} over {SLO_PERIOD}. At this rate "
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


def with_slo(
    source: str,
    spec: str,
    judge: str = DEFAULT_JUDGE,
    evaluations_per_second: float | None = None,
) -> str:
    """``source`` with the SLO group of ``spec`` (``faithfulness=0.95``) for ``judge``'s
    labels, replacing that metric's SLO group when the rules have one."""
    metric, sep, value = spec.partition("=")
    try:
        objective = float(value)
    except ValueError:
        objective = math.nan
    if not sep or not 0.0 < objective < 1.0:
        raise ValueError(f"--slo {spec!r}: expected METRIC=OBJECTIVE with OBJECTIVE in (0, 1)")
    document: dict[str, Any] = yaml.safe_load(source)
    group = slo_rules(metric, objective, slo_rates(judge, metric), evaluations_per_second)
    _replace_group(document, group)
    return dump(document)


def with_slo_groups_for(
    source: str, judge: str, evaluations_per_second: float, keep: bool = True
) -> str:
    """``source`` with its SLO groups rendered again for ``judge`` and the traffic: a group on
    a metric the judge cannot decide is dropped, one whose objective the traffic cannot reach
    is refused (``ValueError``); ``keep=False`` drops them all."""
    document: dict[str, Any] = yaml.safe_load(source)
    groups = []
    for group in _groups(document):
        metric = group["name"].removeprefix("ragpulse-slo-")
        if metric == group["name"]:
            groups.append(group)
            continue
        if not keep:
            continue
        try:
            rates = slo_rates(judge, metric)
        except ValueError:
            continue
        objective = next(
            float(str(r["expr"]).removeprefix("vector(").removesuffix(")"))
            for r in group["rules"]
            if r.get("record") == "ragpulse_evaluation_labels:slo_objective"
        )
        try:
            groups.append(slo_rules(metric, objective, rates, evaluations_per_second))
        except ValueError as exc:
            raise ValueError(f"{exc} (or render without the SLO: --no-slo)") from exc
    document["groups"] = groups
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
    """Command line: render a rules file (with the test windows unless told) to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rules", type=Path, help="the rules.yaml to render")
    parser.add_argument(
        "--production-windows", action="store_true", help="keep the production windows"
    )
    parser.add_argument(
        "--judge",
        help="render the answer-quality rules for this judge's labels (lexical, openai, nli, "
        "tokens, cascade; default: the judge the rules were rendered for): a page only on a "
        "label whose measured rates keep its promise; SLO groups on metrics it cannot decide "
        "are dropped",
    )
    parser.add_argument("--rate", type=float, help="requests a second of one service (default 1)")
    parser.add_argument(
        "--sample-rate",
        type=float,
        help="share of requests evaluated, RAGPULSE_SAMPLE_RATE (default 1)",
    )
    parser.add_argument(
        "--tolerated",
        type=float,
        help="share of hallucinated answers a healthy service writes (default "
        f"{judge_rules.TOLERATED:g}): the page fires on significantly more",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        help="your own metric (from @ragpulse.metric or RubricMetric, with a threshold), by "
        "NAME: add its baseline ticket, Rag<Name>Drop (repeatable)",
    )
    parser.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC=OBJECTIVE",
        help="an SLO: OBJECTIVE (0.95) of the metric's evaluated answers are not hallucinated "
        f"over {SLO_PERIOD}, read through the judge's measured rates, with multiwindow, "
        "multi-burn-rate alerts (repeatable)",
    )
    parser.add_argument(
        "--no-slo",
        action="store_true",
        help="leave out the SLO groups the rules have (with --judge or the traffic options)",
    )
    parser.add_argument(
        "--promtool-tests",
        metavar="RULES_NAME",
        help="print the promtool unit tests of the generated rules instead (a file that reads "
        "the rendered rules as RULES_NAME, e.g. rules.yaml); needs --production-windows",
    )
    parser.add_argument(
        "--list-alerts",
        action="store_true",
        help="print the alerts of the rendered rules as the Markdown list the docs carry",
    )
    args = parser.parse_args(argv)
    try:
        given = (args.rate, args.sample_rate, args.tolerated)
        traffic = judge_rules.Traffic(
            *(value if value is not None else default for value, default in zip(
                given, (1.0, 1.0, judge_rules.TOLERATED), strict=True
            ))
        )  # fmt: skip
        if not traffic.evaluations_per_second > 0.0 or not 0.0 <= traffic.tolerated < 1.0:
            raise ValueError("--rate and --sample-rate must be above 0, --tolerated in [0, 1)")
        source = args.rules.read_text(encoding="utf-8")
        judge = args.judge or rendered_judge(yaml.safe_load(source)) or DEFAULT_JUDGE
        if args.judge or any(value is not None for value in given):
            # Re-rendered only when asked: a render for other traffic stays as it was.
            source = with_judge(source, judge, traffic)
            source = with_slo_groups_for(
                source, judge, traffic.evaluations_per_second, keep=not args.no_slo
            )
        source = with_metric_alerts(source, args.metric, traffic)
        for spec in args.slo:
            source = with_slo(source, spec, judge, traffic.evaluations_per_second)
    except (OSError, ValueError) as exc:
        print(f"render_rules.py: {exc}", file=sys.stderr)
        return 2
    if args.promtool_tests:
        tests = promtool_tests(yaml.safe_load(source), judge, traffic, args.promtool_tests)
        header = (
            "# promtool unit tests of the generated rules, written by render_rules.py "
            "--promtool-tests. Do not edit.\n"
        )
        sys.stdout.write(header + dump(tests))
        return 0
    if args.list_alerts:
        print(alert_list(yaml.safe_load(source)))
        return 0
    if args.production_windows:
        sys.stdout.write(source)
        return 0
    sys.stdout.write(render_rules(source))
    return 0


def promtool_tests(
    document: dict[str, Any], judge: str, traffic: judge_rules.Traffic, rules_name: str
) -> dict[str, Any]:
    """The promtool unit tests of the generated groups of ``document`` (``rule_tests``)."""
    known = {r.metric: r for r in judge_rules.judge_metric_rules(judge, traffic)}
    tests: list[dict[str, Any]] = []
    for group in _groups(document):
        for rule in group["rules"]:
            name = rule.get("alert")
            if name is None:
                continue
            selected = re.search(r'gen_ai_evaluation_name="(\w+)"', str(rule["expr"]))
            if group["name"] == judge_rules.GROUP and selected:
                metric = selected.group(1)
                rules = known.get(metric) or judge_rules.metric_rules(
                    metric, None, None, False, traffic
                )
                make = rule_tests.low_test if name == rules.alert_low else rule_tests.drop_test
                tests.append(
                    make(rule, metric, rules.window, rules.healthy, rules.rates.detection,
                         rules.min_evaluations)
                )  # fmt: skip
            elif group["name"] == judge_rules.GROUP:
                d = judge_rules.diagnosis_rules(name, rule["labels"]["severity"], traffic)
                tests.append(
                    rule_tests.diagnosis_test(
                        rule, d.diagnosis.diagnosis, d.window, d.typical, d.min_evaluations
                    )
                )
            elif group["name"].startswith("ragpulse-slo-") and selected:
                metric = selected.group(1)
                objective = next(
                    float(r["expr"].removeprefix("vector(").removesuffix(")"))
                    for r in group["rules"]
                    if r.get("record") == "ragpulse_evaluation_labels:slo_objective"
                )
                rates = slo_rates(judge, metric)
                burn = next(a for a in BURN_RATE_ALERTS if name.endswith(a.name))
                tests.append(
                    rule_tests.burn_test(
                        rule, metric, burn.long, burn.short, rates.fail_share(1 - objective),
                        rates.detection, min_evaluations(objective, burn.factor, rates),
                    )
                )  # fmt: skip
    # Rules evaluated every 5 minutes over series sampled every minute: a day-long baseline
    # costs a fifth, and every `for:` and eval_time here is a multiple of it.
    header = {"rule_files": [rules_name], "evaluation_interval": "5m"}
    return {**header, "tests": rule_tests.merged(tests)}


def alert_names(document: dict[str, Any]) -> list[str]:
    """Each alert name of a rules document once, in the order the rules first use it."""
    names: list[str] = []
    for group in _groups(document):
        for rule in group["rules"]:
            if "alert" in rule and rule["alert"] not in names:
                names.append(rule["alert"])
    return names


def alert_list(document: dict[str, Any]) -> str:
    """The alerts of a rules document as a Markdown list, each with its severities: the list
    the docs carry (``--list-alerts``)."""
    lines = []
    for name in alert_names(document):
        severities: list[str] = []
        for group in _groups(document):
            for rule in group["rules"]:
                severity = str(rule.get("labels", {}).get("severity", ""))
                if rule.get("alert") == name and severity not in severities:
                    severities.append(severity)
        lines.append(f"- `{name}` ({', '.join(severities)})")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
