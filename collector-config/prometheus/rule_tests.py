"""promtool unit tests for the generated rules, generated with them.

Each generated alert gets a test written from the same numbers its expression was written
from: ``Rag<Name>Low`` stays quiet while a service fails at the healthy share and fires once
its window fails at the judge's detection rate (every answer hallucinated) with at least the
minimum evaluations, while a second service failing every answer with fewer stays quiet;
``Rag<Name>Drop`` fires when a day at the healthy share is followed by a window at the
detection rate; each burn-rate alert fires when both its windows fail at the detection rate
with their minimum, and stays quiet at the budget's rate; each diagnosis alert fires when a
day at the typical share is followed by a window of that diagnosis alone, and stays quiet on
a steady share and on too few evaluations. So a rendered objective, judge or
traffic comes with tests that pin its own numbers: ``render_rules.py --promtool-tests``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from alert_bounds import WINDOWS

SERVICE, QUIET = "support-bot", "quiet-bot"
_LABELS = "ragpulse_evaluation_labels_total"
_TEMPLATE = re.compile(r"\{\{ (\$labels\.(\w+)|\$value \| humanizePercentage) \}\}")
_MINUTES = {name: seconds // 60 for name, seconds in WINDOWS} | {"5m": 5, "30m": 30, "1d": 1440}


def _humanize_percentage(value: float) -> str:
    # Prometheus' humanizePercentage: humanize(v * 100) + "%", four significant digits.
    return f"{value * 100:.4g}%"


def _expand(text: str, labels: dict[str, str], value: float) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(2):
            return labels[match.group(2)]
        return _humanize_percentage(value)

    return " ".join(_TEMPLATE.sub(replace, text).split())


def _expected(rule: dict[str, Any], labels: dict[str, str], value: float) -> dict[str, Any]:
    return {
        "exp_labels": {**rule.get("labels", {}), **labels},
        "exp_annotations": {
            key: _expand(str(text), labels, value) for key, text in rule["annotations"].items()
        },
    }


def _counter(service: str, metric: str, label: str, phases: list[tuple[int, float]]) -> dict:
    """A label counter's series: for each (minutes, increase a minute) phase in turn."""
    series = (
        f'{_LABELS}{{job="ragpulse",instance="a:9464",service_name="{service}",'
        f'gen_ai_evaluation_name="{metric}",ragpulse_rag_name="handle_request",'
        f'gen_ai_evaluation_score_label="{label}"}}'
    )
    return {"series": series, "values": _values(phases)}


def _values(phases: list[tuple[int, float]]) -> str:
    """A counter's values: for each (minutes, increase a minute) phase in turn."""
    parts, total = [], 0.0
    for minutes, per_minute in phases:
        parts.append(f"{total:g}+{per_minute:g}x{minutes}")
        total += per_minute * minutes
        total = round(total, 9)
    return _join(parts)


def _join(parts: list[str]) -> str:
    # Phases continue from the last sample: "0+1x10 10+2x5" repeats the sample at 10, so each
    # later phase starts one step on.
    out = [parts[0]]
    for part in parts[1:]:
        start, rest = part.split("+", 1)
        step, count = rest.split("x")
        out.append(f"{float(start) + float(step):g}+{step}x{int(count) - 1}")
    return " ".join(out)


def _service(metric: str, service: str, per_minute: float, phases: list[tuple[int, float]]):
    """The pass and fail series of a service evaluating ``per_minute`` a minute, failing the
    share of each (minutes, share) phase."""
    fail = [(m, round(per_minute * s, 9)) for m, s in phases]
    passed = [(m, round(per_minute * (1 - s), 9)) for m, s in phases]
    return [_counter(service, metric, "fail", fail), _counter(service, metric, "pass", passed)]


def _per_minute(minimum: int, window_minutes: int) -> float:
    return float(math.ceil(2 * minimum / window_minutes))


def _quiet_then_firing(
    rule: dict[str, Any], quiet: int, firing: int, expected: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The checks of a test: ``rule`` quiet at minute ``quiet``, firing ``expected`` at
    minute ``firing``."""
    return [
        {"eval_time": f"{quiet}m", "alertname": rule["alert"], "exp_alerts": []},
        {"eval_time": f"{firing}m", "alertname": rule["alert"], "exp_alerts": expected},
    ]


def low_test(rule: dict[str, Any], metric: str, window: str, healthy: float, broken: float,
             minimum: int) -> dict[str, Any]:  # fmt: skip
    """``Rag<Name>Low``: quiet at the healthy share, fires at ``broken`` with enough
    evaluations, quiet with too few."""
    minutes = _MINUTES[window]
    hold = minutes + 5 + 10
    rate = _per_minute(minimum, minutes)
    few = max(minimum - 1, 1) / minutes / 2
    labels = {"service_name": SERVICE, "gen_ai_evaluation_name": metric}
    return {
        "name": f"{rule['alert']} fires on {broken:.3g} failing with {rate:g} evaluations a "
        f"minute, not at {healthy:.3g}, not with too few",
        "interval": "1m",
        "input_series": [
            *_service(metric, SERVICE, rate, [(hold, healthy), (hold, broken)]),
            *_service(metric, QUIET, few, [(2 * hold, 1.0)]),
        ],
        "alert_rule_test": _quiet_then_firing(
            rule, hold, 2 * hold, [_expected(rule, labels, broken)]
        ),
    }


def drop_test(rule: dict[str, Any], metric: str, window: str, healthy: float, broken: float,
              minimum: int) -> dict[str, Any]:  # fmt: skip
    """``Rag<Name>Drop``: a day at the healthy share, then a window at ``broken``."""
    minutes = _MINUTES[window]
    day = 1440 + minutes
    hold = minutes + 15 + 10
    rate = _per_minute(minimum, minutes)
    labels = {"service_name": SERVICE, "gen_ai_evaluation_name": metric}
    return {
        "name": f"{rule['alert']} fires when {broken:.3g} fail after a day at {healthy:.3g}",
        "interval": "1m",
        "input_series": _service(metric, SERVICE, rate, [(day, healthy), (hold, broken)]),
        "alert_rule_test": _quiet_then_firing(
            rule, day, day + hold, [_expected(rule, labels, broken)]
        ),
    }


def burn_test(rule: dict[str, Any], metric: str, long: str, short: str, healthy: float,
              broken: float, minimum: int) -> dict[str, Any]:  # fmt: skip
    """A burn-rate alert: quiet at the budget's rate, fires when both windows burn."""
    long_minutes = _MINUTES[long]
    rate = _per_minute(minimum, _MINUTES[short])
    labels = {"service_name": SERVICE, "gen_ai_evaluation_name": metric}
    hold = long_minutes + 10
    return {
        "name": f"{rule['alert']} fires when {broken:.3g} fail in both windows, not at "
        f"{healthy:.3g}",
        "interval": "1m",
        "input_series": _service(metric, SERVICE, rate, [(hold, healthy), (hold, broken)]),
        "alert_rule_test": _quiet_then_firing(
            rule, hold, 2 * hold, [_expected(rule, {**labels, "slo": metric}, broken)]
        ),
    }


def diagnosis_test(rule: dict[str, Any], diagnosis: str, window: str, typical: float,
                   minimum: int) -> dict[str, Any]:  # fmt: skip
    """A diagnosis alert: fires when a day at the ``typical`` share of evaluations diagnosed
    ``diagnosis``, or at none, is followed by a window of nothing else; quiet on a service
    whose larger share stays what it was the day before, and on one that rises with fewer
    than the minimum evaluations. Each diagnosis has services of its own, so the diagnosis
    tests share a timeline when merged."""
    suffix = diagnosis.replace("_", "-")
    rising, new, steady, few = (
        f"{name}-{suffix}" for name in (SERVICE, "new-bot", "steady-bot", QUIET)
    )
    minutes = _MINUTES[window]
    day = 1440 + minutes
    hold = minutes + 5 + 10
    rate = _per_minute(minimum, minutes)
    few_rate = max(minimum - 1, 1) / minutes / 2
    steady_share = min(1.0, 3 * typical)

    def series(name: str, value: str) -> str:
        return (
            'ragpulse_evaluator_evaluations_total{job="ragpulse",instance="a:9464",'
            f'service_name="{name}",ragpulse_eval_status="ok",ragpulse_eval_diagnosis="{value}"}}'
        )

    def service(name: str, per_minute: float, shares: list[tuple[int, float]]) -> list[dict]:
        return [
            {
                "series": series(name, diagnosis),
                "values": _values([(m, round(per_minute * s, 9)) for m, s in shares]),
            },
            {
                "series": series(name, "ok"),
                "values": _values([(m, round(per_minute * (1 - s), 9)) for m, s in shares]),
            },
        ]

    skipped = (
        'ragpulse_evaluator_evaluations_total{job="ragpulse",instance="a:9464",'
        f'service_name="{rising}",ragpulse_eval_status="skipped"}}'
    )
    fired = [{"service_name": name, "ragpulse_eval_diagnosis": diagnosis} for name in (rising, new)]
    return {
        "name": f"{rule['alert']} fires when {diagnosis} rises from {typical:.3g} or 0 to all "
        f"answers with {rate:g} evaluations a minute, not at a steady {steady_share:.3g}, not "
        "with too few",
        "interval": "1m",
        "input_series": [
            *service(rising, rate, [(day, typical), (hold, 1.0)]),
            # A diagnosis the day before never saw: its counter starts with the window.
            *service(new, rate, [(day, 0.0), (hold, 1.0)])[1:],
            {"series": series(new, diagnosis), "values": f"_x{day} " + _values([(hold, rate)])},
            *service(steady, rate, [(day + hold, steady_share)]),
            *service(few, few_rate, [(day, typical), (hold, 1.0)]),
            # Answers with no evidence are skipped, not diagnosed: they never count.
            {"series": skipped, "values": _values([(day + hold, 10 * rate)])},
        ],
        "alert_rule_test": _quiet_then_firing(
            rule, day, day + hold, [_expected(rule, labels, 1.0) for labels in fired]
        ),
    }


def merged(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tests of one kind (their names' verb: Low, Drop, burn, diagnosis) merged into one
    test on one timeline: promtool evaluates every rule at every step of each test, so a
    day-long baseline paid once instead of once per metric."""
    kinds: dict[str, dict[str, Any]] = {}
    for test in tests:
        kind = re.sub(r"^Rag\w*?(Low|Drop|BudgetBurn\w+|Rising)\b.*", r"\1", test["name"])
        into = kinds.setdefault(
            kind,
            {"name": "", "interval": test["interval"], "input_series": [], "alert_rule_test": []},
        )
        into["name"] = (into["name"] + "; " if into["name"] else "") + test["name"]
        into["input_series"] += test["input_series"]
        into["alert_rule_test"] += test["alert_rule_test"]
    return list(kinds.values())
