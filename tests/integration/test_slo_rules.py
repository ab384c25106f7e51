"""The groundedness SLO: ``render_rules.py --slo`` generates multiwindow, multi-burn-rate alerts
whose windows must hold a minimum number of evaluations, and the shipped rules hold its output.

``rules_test.yaml`` proves under promtool that the shipped alerts fire, stay quiet below their
minimum and reset; these tests prove the generator and the arithmetic behind the minimum.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from tests.servers.prometheus import KIT, PROMTOOL_NAMES, RULES_FILE, require_binary

SCRIPT = KIT / "prometheus" / "render_rules.py"


@pytest.fixture(scope="module")
def renderer() -> ModuleType:
    from tests.servers.prometheus import _load_renderer

    return _load_renderer()


def _render(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), str(RULES_FILE), *args, "--production-windows"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _group(document: dict[str, Any], name: str) -> dict[str, Any]:
    (group,) = [g for g in document["groups"] if g["name"] == name]
    return group


def _normalised(group: dict[str, Any]) -> list[dict[str, Any]]:
    rules = []
    for rule in group["rules"]:
        rule = dict(rule)
        rule["expr"] = " ".join(str(rule["expr"]).split())
        rules.append(rule)
    return rules


def _binomial_tail_above(n: int, p: float, ratio: float) -> float:
    """P(X / n > ratio) for X ~ Binomial(n, p)."""
    first = math.floor(ratio * n) + 1

    def log_pmf(k: int) -> float:
        ways = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        return ways + k * math.log(p) + (n - k) * math.log1p(-p)

    return sum(math.exp(log_pmf(k)) for k in range(first, n + 1))


def test_the_shipped_slo_group_is_what_the_generator_writes() -> None:
    done = _render("--slo", "groundedness=0.95")
    assert done.returncode == 0, done.stderr
    generated = _group(yaml.safe_load(done.stdout), "ragpulse-slo-groundedness")
    shipped = _group(yaml.safe_load(RULES_FILE.read_text("utf-8")), "ragpulse-slo-groundedness")
    assert _normalised(shipped) == _normalised(generated)


def test_rendering_an_slo_again_replaces_its_group(tmp_path: Path) -> None:
    done = _render("--slo", "groundedness=0.99")
    assert done.returncode == 0, done.stderr
    document = yaml.safe_load(done.stdout)
    names = [g["name"] for g in document["groups"]]
    assert names.count("ragpulse-slo-groundedness") == 1
    objective = next(
        r for r in _group(document, "ragpulse-slo-groundedness")["rules"]
        if r.get("record") == "ragpulse_evaluation_labels:slo_objective"
    )  # fmt: skip
    assert objective["expr"] == "vector(0.99)"
    (tmp_path / "rules.yaml").write_text(done.stdout, encoding="utf-8")
    promtool = require_binary(*PROMTOOL_NAMES)
    check = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "rules.yaml")],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_burn_thresholds_are_the_workbook_factors_times_the_budget() -> None:
    done = _render("--slo", "groundedness=0.99")
    rules = _group(yaml.safe_load(done.stdout), "ragpulse-slo-groundedness")["rules"]
    alerts = {r["alert"]: " ".join(r["expr"].split()) for r in rules if "alert" in r}
    # A 1 % budget: 14.4x is an error ratio of 14.4 %, 6x of 6 %.
    fast = alerts["RagGroundednessBudgetBurnFast"]
    assert "slo_error_ratio_1h{" in fast and "slo_error_ratio_5m{" in fast
    assert fast.count("> 0.144") == 2
    slow = alerts["RagGroundednessBudgetBurnSlow"]
    assert "slo_error_ratio_6h{" in slow and "slo_error_ratio_30m{" in slow
    assert slow.count("> 0.06") == 2


def test_the_slo_counts_as_errors_the_scores_labelled_fail() -> None:
    # The label the span carries: a score exactly at the metric's threshold is no error.
    done = _render("--slo", "correctness=0.95")
    assert done.returncode == 0, done.stderr
    group = _group(yaml.safe_load(done.stdout), "ragpulse-slo-correctness")
    rules = {r.get("record"): " ".join(r["expr"].split()) for r in group["rules"]}
    ratio = rules["service_name:ragpulse_evaluation_labels:slo_error_ratio_5m"]
    numerator, denominator = ratio.split(" / ")
    fail = 'gen_ai_evaluation_name="correctness",gen_ai_evaluation_score_label="fail"'
    assert f"ragpulse_evaluation_labels_total{{{fail}}}[5m]" in numerator
    every = 'ragpulse_evaluation_labels_total{gen_ai_evaluation_name="correctness"}[5m]'
    assert every in denominator
    assert "bucket" not in " ".join(rules.values())
    evaluations = rules["service_name:ragpulse_evaluation_labels:slo_evaluations_5m"]
    assert evaluations.endswith(denominator)  # the minimum counts what the ratio divides by


def test_an_slo_on_a_metric_without_a_threshold_is_refused() -> None:
    done = _render("--slo", "context_relevance=0.95")
    assert done.returncode == 2
    assert "pass/fail threshold" in done.stderr


def test_an_objective_no_fast_burn_can_reach_is_refused() -> None:
    # A 10 % budget: a 14.4x burn would need 144 % of the answers to fail.
    done = _render("--slo", "groundedness=0.9")
    assert done.returncode == 2
    assert "choose an objective above 0.9306" in done.stderr
    done = _render("--slo", "groundedness")
    assert done.returncode == 2
    assert "METRIC=OBJECTIVE" in done.stderr


@pytest.mark.parametrize("objective", [0.95, 0.99, 0.999])
def test_the_minimum_evaluations_keep_a_window_at_the_budget_rate_from_firing(
    renderer: ModuleType, objective: float
) -> None:
    budget = 1 - objective
    for alert in renderer.BURN_RATE_ALERTS:
        minimum = renderer.min_evaluations(objective, alert.factor)
        ratio = alert.factor * budget
        # From the minimum on, a window whose errors arrive exactly at the budget's rate shows
        # the burn with a chance of at most MISFIRE (the exact binomial tail, not the bound).
        for n in range(minimum, minimum + 200):
            assert _binomial_tail_above(n, budget, ratio) <= renderer.MISFIRE, (alert.name, n)


def test_the_shipped_minimums_are_those_the_docs_derive(renderer: ModuleType) -> None:
    text = (KIT.parent / "docs" / "operations.md").read_text(encoding="utf-8")
    for alert in renderer.BURN_RATE_ALERTS:
        minimum = renderer.min_evaluations(0.95, alert.factor)
        assert f"= {minimum} evaluations" in text, alert.name
        rules = " ".join(RULES_FILE.read_text(encoding="utf-8").split())
        assert (
            f'slo_evaluations_{alert.short}{{gen_ai_evaluation_name="groundedness"}} >= {minimum}'
            in rules
        )
