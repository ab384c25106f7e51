"""One threshold per metric, everywhere: the declaration in ``ragpulse.metrics`` is what the
``eval`` summary, the report, the Prometheus alert rules and the docs use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, MetricResult, RagRecord
from ragpulse.judges._labels import label_policy, label_thresholds
from ragpulse.metrics import METRICS
from ragpulse.metrics import _registry as registry
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


def test_the_docs_threshold_table_gives_the_offline_judges_declaration() -> None:
    rows = _table(METRICS_MD.read_text(encoding="utf-8"), "## The ten metrics and their thresholds")
    documented = {row[0]: None if row[3] == "unlabelled" else float(row[3]) for row in rows}
    assert documented == {m: label.threshold for m, label in label_policy("lexical").items()}


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


def _alert_name(metric: str, suffix: str) -> str:
    return "Rag" + "".join(part.capitalize() for part in metric.split("_")) + suffix


def test_each_metric_alert_reads_the_share_its_pass_fail_label_fails() -> None:
    # The alert compares the label the span carries, so it applies the threshold the label was
    # made with (whatever moved it) and passes a score exactly at it; no number in it can
    # disagree. The shipped rules are the offline judge's: each label it writes has a ticket.
    alerts = _alerts()
    checked = 0
    # The built-in metrics: a metric another test registered in this process has no rule.
    labelled = [metric for metric in label_thresholds("lexical") if metric in METRICS]
    for metric in labelled:
        rule = alerts.get(_alert_name(metric, "Drop"))
        if rule is None:
            continue
        expr = " ".join(str(rule["expr"]).split())
        selector = f'{{gen_ai_evaluation_name="{metric}"}}'
        window = r"(?:15m|1h|6h)"
        prefix = "service_name:ragpulse_evaluation_labels:"
        assert re.search(f"{prefix}fail_ratio{window}{re.escape(selector)} > ", expr)
        assert re.search(f"{prefix}evaluations{window}{re.escape(selector)} >= ", expr)
        assert "ragpulse_evaluation_score_bucket" not in expr and "le=" not in expr
        words = " ".join(str(v) for v in rule["annotations"].values())
        assert not re.search(r"(?:at or below|<=) [0-9.]+", words), metric
        assert f'span.ragpulse.eval.{metric}.label = "fail"' in words
        checked += 1
    assert checked == len(labelled)


def test_no_metric_without_a_label_has_an_alert() -> None:
    alerts = _alerts()
    labelled = label_thresholds("lexical")
    for metric in _declared():
        if metric not in labelled:
            assert _alert_name(metric, "Low") not in alerts
            assert _alert_name(metric, "Drop") not in alerts


def test_no_rule_counts_low_scores_by_a_histogram_bucket() -> None:
    # A bucket holds its upper bound: le="0.7" counts a score of exactly 0.7, which passes.
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in document["groups"]:
        for rule in group["rules"]:
            assert "ragpulse_evaluation_score_bucket" not in str(rule["expr"]), rule


def test_the_fail_share_counts_the_fail_label_over_every_label() -> None:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    prefix = "service_name:ragpulse_evaluation_labels:fail_ratio"
    shares = [
        r for g in document["groups"] for r in g["rules"] if r.get("record", "").startswith(prefix)
    ]
    assert shares
    for rule in shares:
        window = rule["record"].removeprefix(prefix)
        numerator, denominator = " ".join(rule["expr"].split()).split(" / ")
        fail = f'ragpulse_evaluation_labels_total{{gen_ai_evaluation_score_label="fail"}}[{window}]'
        assert fail in numerator
        assert f"ragpulse_evaluation_labels_total[{window}]" in denominator


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
