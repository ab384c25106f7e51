"""The SLO: ``render_rules.py --slo`` generates multiwindow, multi-burn-rate alerts that read
the judge's fail share through its measured rates, and whose windows must hold a minimum
number of evaluations; an objective no window can reach is a usage error.

``rules.generated_test.yaml`` proves under promtool that the shipped alerts fire and stay
quiet; these tests prove the generator and the arithmetic behind the minimum.
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
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


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


def binomial_tail_above(n: int, p: float, count: float) -> float:
    """P(X > count) for X ~ Binomial(n, p)."""
    first = math.floor(count) + 1

    def log_pmf(k: int) -> float:
        ways = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        return ways + k * math.log(p) + (n - k) * math.log1p(-p)

    return sum(math.exp(log_pmf(k)) for k in range(max(first, 0), n + 1))


def test_the_shipped_slo_group_is_what_the_generator_writes() -> None:
    done = _render("--judge", "lexical", "--slo", "faithfulness=0.95")
    assert done.returncode == 0, done.stderr
    generated = _group(yaml.safe_load(done.stdout), "ragpulse-slo-faithfulness")
    shipped = _group(yaml.safe_load(RULES_FILE.read_text("utf-8")), "ragpulse-slo-faithfulness")
    assert _normalised(shipped) == _normalised(generated)


def test_rendering_an_slo_again_replaces_its_group(tmp_path: Path) -> None:
    done = _render("--slo", "faithfulness=0.97")
    assert done.returncode == 0, done.stderr
    document = yaml.safe_load(done.stdout)
    names = [g["name"] for g in document["groups"]]
    assert names.count("ragpulse-slo-faithfulness") == 1
    objective = next(
        r for r in _group(document, "ragpulse-slo-faithfulness")["rules"]
        if r.get("record") == "ragpulse_evaluation_labels:slo_objective"
    )  # fmt: skip
    assert objective["expr"] == "vector(0.97)"
    (tmp_path / "rules.yaml").write_text(done.stdout, encoding="utf-8")
    promtool = require_binary(*PROMTOOL_NAMES)
    check = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "rules.yaml")],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.timeout(900)
def test_a_rendered_objective_passes_its_own_generated_promtool_tests(tmp_path: Path) -> None:
    # The shipped tests pin 95 %; a 97 % render comes with tests of its own numbers.
    rules = _render("--slo", "faithfulness=0.97")
    tests = _render("--slo", "faithfulness=0.97", "--promtool-tests", "rules.yaml")
    assert rules.returncode == 0 and tests.returncode == 0, rules.stderr + tests.stderr
    (tmp_path / "rules.yaml").write_text(rules.stdout, encoding="utf-8")
    document = yaml.safe_load(tests.stdout)
    document["tests"] = [t for t in document["tests"] if "BudgetBurn" in t["name"]]
    assert len(document["tests"]) == 2
    (tmp_path / "rules_test.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    promtool = require_binary(*PROMTOOL_NAMES)
    result = subprocess.run(
        [promtool, "test", "rules", "rules_test.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_burn_thresholds_are_the_fail_share_of_the_burning_hallucinated_share(
    renderer: ModuleType,
) -> None:
    done = _render("--slo", "faithfulness=0.99", "--rate", "10")
    rules = _group(yaml.safe_load(done.stdout), "ragpulse-slo-faithfulness")["rules"]
    alerts = {r["alert"]: " ".join(r["expr"].split()) for r in rules if "alert" in r}
    rates = renderer.slo_rates("lexical", "faithfulness")
    # A 1 % budget: 14.4x is 14.4 % of the answers hallucinated, which the judge labels
    # fail at p0 + 0.144 (p1 - p0).
    fast = alerts["RagFaithfulnessBudgetBurnFast"]
    assert "slo_error_ratio_1h{" in fast and "slo_error_ratio_5m{" in fast
    assert fast.count(f"> {round(rates.fail_share(0.144), 6):g}") == 2
    slow = alerts["RagFaithfulnessBudgetBurnSlow"]
    assert slow.count(f"> {round(rates.fail_share(0.06), 6):g}") == 2


def test_the_slo_counts_as_errors_the_scores_labelled_fail() -> None:
    done = _render("--slo", "faithfulness=0.95")
    assert done.returncode == 0, done.stderr
    group = _group(yaml.safe_load(done.stdout), "ragpulse-slo-faithfulness")
    rules = {r.get("record"): " ".join(r["expr"].split()) for r in group["rules"]}
    ratio = rules["service_name:ragpulse_evaluation_labels:slo_error_ratio_5m"]
    numerator, denominator = ratio.split(" / ")
    fail = 'gen_ai_evaluation_name="faithfulness",gen_ai_evaluation_score_label="fail"'
    assert f"ragpulse_evaluation_labels_total{{{fail}}}[5m]" in numerator
    every = 'ragpulse_evaluation_labels_total{gen_ai_evaluation_name="faithfulness"}[5m]'
    assert every in denominator
    evaluations = rules["service_name:ragpulse_evaluation_labels:slo_evaluations_5m"]
    assert evaluations.endswith(denominator)  # the minimum counts what the ratio divides by


def test_an_slo_on_a_metric_the_judge_writes_no_label_for_is_refused() -> None:
    for spec in ("context_relevance=0.95", "groundedness=0.95"):  # lexical declines the latter
        done = _render("--slo", spec)
        assert done.returncode == 2, spec
        assert "pass/fail label" in done.stderr


def test_an_slo_on_a_label_with_no_measured_rates_is_refused() -> None:
    done = _render("--judge", "openai", "--slo", "groundedness=0.95")
    assert done.returncode == 2
    assert "no measured rates" in done.stderr


def test_an_objective_no_fast_burn_can_reach_is_refused() -> None:
    # A 10 % budget: a 14.4x burn would need 144 % of the answers hallucinated.
    done = _render("--slo", "faithfulness=0.9")
    assert done.returncode == 2
    assert "choose an objective above 0.9306" in done.stderr
    done = _render("--slo", "faithfulness")
    assert done.returncode == 2
    assert "METRIC=OBJECTIVE" in done.stderr


def test_an_objective_no_window_can_hold_enough_evaluations_for_is_a_usage_error() -> None:
    done = _render("--slo", "faithfulness=0.9999999999999999")
    assert done.returncode == 2
    assert "no window can reach the objective" in done.stderr
    # 99 % needs 1,555 evaluations in 5 minutes: refused at 1 a second, rendered at 10.
    assert _render("--slo", "faithfulness=0.99").returncode == 2
    assert _render("--slo", "faithfulness=0.99", "--rate", "10").returncode == 0


@pytest.mark.parametrize("objective", [0.95, 0.97])
def test_the_minimum_evaluations_keep_a_window_at_the_budget_rate_from_firing(
    renderer: ModuleType, objective: float
) -> None:
    rates = renderer.slo_rates("lexical", "faithfulness")
    alpha = math.exp(-renderer.log_inverse_alpha(renderer.FALSE_PAGES_PER_MONTH))
    budget = 1 - objective
    for alert in renderer.BURN_RATE_ALERTS:
        minimum = renderer.min_evaluations(objective, alert.factor, rates)
        healthy, burning = rates.fail_share(budget), rates.fail_share(alert.factor * budget)
        # From the minimum on, a window whose errors arrive exactly at the budget's rate shows
        # the burn with a chance of at most α (the exact binomial tail, not the bound).
        for n in range(minimum, minimum + 300, 7):
            assert binomial_tail_above(n, healthy, burning * n) <= alpha, (alert.name, n)


def test_the_shipped_minimums_are_those_the_docs_derive(renderer: ModuleType) -> None:
    text = (KIT.parent / "docs" / "operations.md").read_text(encoding="utf-8")
    rules = " ".join(RULES_FILE.read_text(encoding="utf-8").split())
    rates = renderer.slo_rates("lexical", "faithfulness")
    for alert in renderer.BURN_RATE_ALERTS:
        minimum = renderer.min_evaluations(0.95, alert.factor, rates)
        assert f"= {minimum} evaluations" in text, alert.name
        assert (
            f'slo_evaluations_{alert.short}{{gen_ai_evaluation_name="faithfulness"}} >= {minimum}'
            in rules
        )
