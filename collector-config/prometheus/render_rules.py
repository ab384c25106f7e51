"""Render rules.yaml with other time windows, e.g. seconds instead of minutes for a live test.

rules.yaml stays the only copy of the alert logic; this script rewrites every range selector
(``[15m]``) and every ``for:`` duration through explicit maps and refuses a duration it has no
mapping for, so a new rule cannot keep a production window by accident.

    python render_rules.py rules.yaml > rules.test-windows.yaml

With ``--calibration FILE`` (written by ``ragpulse calibrate`` for one metric), the alert
on that metric, and only that one, compares the calibrated bound (the histogram bucket at
or below the calibrated threshold) instead of 0.7, through a recording rule of its own;
``--production-windows`` keeps the production windows:

    python render_rules.py rules.yaml --calibration calibration.json --production-windows

With ``--metric NAME`` (your own metric), an alert ``Rag<Name>Low`` of the same form as
``RagRelevancyLow`` is added for it (and ``--calibration`` may then move its bound).

Needs PyYAML.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

# Production window -> test window. The ratios need not be exact; what matters is that the
# windows keep their order (15m < 1h < 1d) so each rule still means the same thing.
TEST_RANGE_WINDOWS: Mapping[str, str] = {"15m": "20s", "1h": "40s", "1d": "2m"}
TEST_FOR_DURATIONS: Mapping[str, str] = {"5m": "2s", "15m": "5s"}

_RANGE_SELECTOR = re.compile(r"\[([0-9]+[smhdwy])\]")


def _rewrite_ranges(expr: str, windows: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        window = match.group(1)
        if window not in windows:
            raise ValueError(f"no test window for range [{window}] in: {expr}")
        return f"[{windows[window]}]"

    return _RANGE_SELECTOR.sub(replace, expr)


DEFAULT_SCORE_BOUND = "0.7"
_SHARE_RULE = "at_or_below_0_7"


def _bound_name(bound: str) -> str:
    return "at_or_below_" + bound.replace(".", "_")


def with_score_bound(source: str, metric: str, bound: float) -> str:
    """``source`` with the alerts on ``metric`` comparing the le="``bound``" bucket.

    The other metrics' alerts keep 0.7: a calibration is fitted to one metric. The share
    below the new bound is a recording rule of its own, beside the 0.7 one.
    """
    text = f"{bound:.1f}"
    document: dict[str, Any] = yaml.safe_load(source)
    selector = f'gen_ai_evaluation_name="{metric}"'
    moved = 0
    for group in document["groups"]:
        rules: list[dict[str, Any]] = []
        for rule in group["rules"]:
            rules.append(rule)
            if _SHARE_RULE in str(rule.get("record", "")) and text != DEFAULT_SCORE_BOUND:
                rules.append(
                    {
                        **rule,
                        "record": rule["record"].replace(_SHARE_RULE, _bound_name(text)),
                        "expr": rule["expr"].replace(f'le="{DEFAULT_SCORE_BOUND}"', f'le="{text}"'),
                    }
                )
            elif selector in str(rule.get("expr", "")) and _SHARE_RULE in str(rule["expr"]):
                moved += 1
                rule["expr"] = rule["expr"].replace(_SHARE_RULE, _bound_name(text))
                annotations = rule.get("annotations", {})
                for key, value in annotations.items():
                    annotations[key] = (
                        str(value)
                        .replace(f"<= {DEFAULT_SCORE_BOUND}", f"<= {text}")
                        .replace(f"at or below {DEFAULT_SCORE_BOUND}", f"at or below {text}")
                    )
        group["rules"] = rules
    if not moved:
        raise ValueError(f"no alert on {metric} compares the {DEFAULT_SCORE_BOUND} bound")
    header = f"# Rendered from rules.yaml by render_rules.py: {metric} alerts at or below {text}.\n"
    return header + yaml.safe_dump(document, sort_keys=False, width=100)


_METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TEMPLATE_ALERT = "RagRelevancyLow"


def alert_name(metric: str) -> str:
    """``RagShoutingLow`` for ``shouting``, ``RagAnswerLengthLow`` for ``answer_length``."""
    return "Rag" + "".join(part.capitalize() for part in metric.split("_")) + "Low"


def with_metric_alerts(source: str, metrics: list[str]) -> str:
    """``source`` with an alert per metric in ``metrics`` (your own, from ``@ragpulse.metric``),
    of the same form as the relevancy alert: its share at or below 0.7 over 15 minutes."""
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
                    f"of {metric} scores at or below 0.7",
                    "description": f"{{{{ $value | humanizePercentage }}}} of the {metric} scores "
                    "of {{ $labels.service_name }} in the last 15 minutes are at or below 0.7.",
                    "runbook_url": f"collector-config/README.md#{anchor}",
                    "runbook": f"Find the traces with TraceQL {{ span.ragpulse.eval.{metric}.score "
                    f"<= 0.7 }} and read ragpulse.eval.{metric}.explanation.",
                },
            }
        )
    return yaml.safe_dump(document, sort_keys=False, width=100)


def calibrated_bound(path: Path) -> tuple[str, float]:
    """The metric and alert bucket of a calibration file from ``ragpulse calibrate``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    bound = data.get("alert_bucket") if isinstance(data, dict) else None
    metric = data.get("metric") if isinstance(data, dict) else None
    if not isinstance(bound, int | float) or not 0.0 <= bound <= 1.0:
        raise ValueError(f"{path}: no alert_bucket in [0, 1]; is it a ragpulse calibration file?")
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"{path}: no metric; is it a ragpulse calibration file?")
    return metric, float(bound)


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
    return header + yaml.safe_dump(document, sort_keys=False, width=100)


def main(argv: list[str] | None = None) -> int:
    """Command line: render a rules file with the test windows to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rules", type=Path, help="the rules.yaml to render")
    parser.add_argument(
        "--calibration",
        type=Path,
        help="a file from `ragpulse calibrate`: the alert on its metric takes its bound",
    )
    parser.add_argument(
        "--production-windows", action="store_true", help="keep the production windows"
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        help="your own metric (from @ragpulse.metric or RubricMetric): add its alert, "
        "Rag<Name>Low, of the same form as RagRelevancyLow (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        source = with_metric_alerts(args.rules.read_text(encoding="utf-8"), args.metric)
        if args.calibration is not None:
            source = with_score_bound(source, *calibrated_bound(args.calibration))
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
