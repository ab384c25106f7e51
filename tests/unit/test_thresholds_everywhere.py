"""One threshold per metric, everywhere: the declaration in ``ragpulse.metrics`` is what the
``eval`` summary, the report, the Prometheus alert rules and the docs use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, MetricResult, RagRecord
from ragpulse.metrics import _registry as registry
from ragpulse.offline.calibrate import alert_bucket
from ragpulse.offline.evaluate import summarize
from ragpulse.report import Run, run_from_evaluations
from ragpulse.report._data import run_data

ROOT = Path(__file__).resolve().parents[2]
METRICS_MD = ROOT / "docs" / "metrics.md"
RULES = ROOT / "collector-config" / "prometheus" / "rules.yaml"


def _declared() -> dict[str, float | None]:
    declared = {}
    for name in registry.builtin_names():
        metric = registry.get(name)
        assert metric is not None
        declared[name] = metric.threshold
    return declared


def _table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first table under ``heading`` (cells stripped of backticks)."""
    section = text.split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            rows.append(cells)
        elif rows:
            break
    return rows[2:]  # past the header and its rule


def _evaluation(**scores: float | None) -> Evaluation:
    return Evaluation(
        status=EvalStatus.OK,
        metrics={m: MetricResult(m, s, f"{m} explained") for m, s in scores.items()},
        judge="lexical",
    )


# --- the docs -----------------------------------------------------------------------------


def test_the_docs_threshold_table_is_each_metrics_declaration() -> None:
    rows = _table(METRICS_MD.read_text(encoding="utf-8"), "## The ten metrics and their thresholds")
    documented = {row[0]: None if row[1] == "none" else float(row[1]) for row in rows}
    assert documented == _declared()
    defaults = {row[0] for row in rows if row[2].startswith("by default")}
    assert defaults == set(registry.default_names())


def test_the_docs_count_the_metrics_there_are() -> None:
    text = METRICS_MD.read_text(encoding="utf-8")
    words = {6: "six", 10: "ten"}
    assert f"up to {words[len(registry.builtin_names())]} metrics" in text
    assert "up to six metrics" not in text
    assert "0.7 for the other three" not in text


def test_the_context_metric_table_says_no_threshold_exactly_where_none_is_declared() -> None:
    rows = _table(
        METRICS_MD.read_text(encoding="utf-8"),
        "## The context metrics: was retrieval any good?",
    )
    declared = _declared()
    assert {row[0] for row in rows} <= set(declared)
    for row in rows:
        says_none = "no threshold and no label" in row[1]
        assert says_none == (declared[row[0]] is None), row[0]


# --- the alert rules ----------------------------------------------------------------------


def _alerts() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return {r["alert"]: r for g in document["groups"] for r in g["rules"] if "alert" in r}


def _alert_name(metric: str) -> str:
    return "Rag" + "".join(part.capitalize() for part in metric.split("_")) + "Low"


def test_each_metric_alert_compares_the_bucket_at_its_declared_threshold() -> None:
    alerts = _alerts()
    checked = 0
    for metric, threshold in _declared().items():
        rule = alerts.get(_alert_name(metric))
        if rule is None:
            continue
        assert threshold is not None, f"{metric} has no threshold, so no pass/fail to alert on"
        bound = f"{alert_bucket(threshold):.1f}"
        expr = " ".join(str(rule["expr"]).split())
        assert f"share_at_or_below_{bound.replace('.', '_')}_15m" in expr, metric
        # The words a person reads say the same number as the expression.
        words = " ".join(str(v) for v in rule["annotations"].values())
        assert re.findall(r"(?:at or below|<=) ([0-9.]+)", words) == [bound] * len(
            re.findall(r"(?:at or below|<=) ([0-9.]+)", words)
        )
        assert bound in words
        checked += 1
    assert checked == 6  # the answer's six metrics each have an alert


def test_no_metric_without_a_threshold_has_an_alert() -> None:
    alerts = _alerts()
    for metric, threshold in _declared().items():
        if threshold is None:
            assert _alert_name(metric) not in alerts


def test_the_recorded_share_compares_the_bucket_its_name_says() -> None:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in document["groups"]:
        for rule in group["rules"]:
            found = re.search(r"share_at_or_below_([0-9])_([0-9])_15m", rule.get("record", ""))
            if found:
                assert f'le="{found.group(1)}.{found.group(2)}"' in rule["expr"]


# --- the eval summary ---------------------------------------------------------------------


def test_the_eval_summary_compares_each_metric_with_its_own_declared_threshold() -> None:
    evaluations = [
        _evaluation(groundedness=0.8, correctness=0.6, context_relevance=0.2),
        _evaluation(groundedness=0.6, correctness=0.4, context_relevance=0.9),
    ]
    summary = summarize(evaluations, ["groundedness", "correctness", "context_relevance"])
    by_metric = {m.metric: m for m in summary.metrics}
    assert by_metric["groundedness"].threshold == 0.7
    assert by_metric["groundedness"].below == 0.5
    # 0.6 passes correctness, whose threshold is 0.5: one of two is below it, not both.
    assert by_metric["correctness"].threshold == 0.5
    assert by_metric["correctness"].below == 0.5
    # No threshold, so no share below one.
    assert by_metric["context_relevance"].threshold is None
    assert by_metric["context_relevance"].below is None
    assert by_metric["context_relevance"].mean == 0.55


# --- the report ---------------------------------------------------------------------------


def _report_run(*evaluations: Evaluation) -> dict[str, Any]:
    record = RagRecord(question="q?", contexts=(Context("c."),), answer="a.")
    run: Run = run_from_evaluations("run", [(str(i), record, e) for i, e in enumerate(evaluations)])
    rows, _ = run_data(run, {})
    return rows


def test_the_report_gives_context_relevance_no_pass_or_fail() -> None:
    rows = _report_run(_evaluation(groundedness=0.9, context_relevance=0.1))
    assert rows["thresholds"]["context_relevance"] is None
    assert rows["lab"]["context_relevance"] == [-1]
    assert rows["lab"]["groundedness"] == [1]
    # The worst metric is one with a pass/fail: context relevance 0.1 is not a failure.
    assert rows["metrics"][rows["wm"][0]] == "groundedness"


def test_the_report_passes_correctness_at_its_declared_threshold() -> None:
    rows = _report_run(_evaluation(correctness=0.6))
    assert rows["thresholds"]["correctness"] == 0.5
    assert rows["lab"]["correctness"] == [1]
