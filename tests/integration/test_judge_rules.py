"""The answer-quality rules follow the judge they are rendered for: a page only on a label
whose measured rates keep its promise, never a rule on a label the judge does not write, and
every window's bound derived from the judge's rates (``alert_bounds``)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from tests.integration.test_slo_rules import binomial_tail_above
from tests.servers.prometheus import KIT, PROMTOOL_NAMES, RULES_FILE, require_binary

from ragpulse.judges._kinds import JUDGE_KINDS
from ragpulse.judges._labels import label_policy
from ragpulse.settings import Settings

SCRIPT = KIT / "prometheus" / "render_rules.py"
sys.path.insert(0, str(KIT / "prometheus"))

import alert_bounds  # noqa: E402


@pytest.fixture(scope="module")
def renderer() -> ModuleType:
    from tests.servers.prometheus import _load_renderer

    return _load_renderer()


def _render(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), str(RULES_FILE), *args, "--production-windows"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _alerts(text: str) -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "alert" in r]


def _promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    promtool = require_binary(*PROMTOOL_NAMES)
    return subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.parametrize("judge", JUDGE_KINDS)
def test_rules_rendered_for_each_judge_pass_promtool_check(judge: str, tmp_path: Path) -> None:
    done = _render("--judge", judge)
    assert done.returncode == 0, done.stderr
    (tmp_path / "rules.yaml").write_text(done.stdout, encoding="utf-8")
    check = _promtool("check", "rules", str(tmp_path / "rules.yaml"))
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.timeout(900)
def test_rules_rendered_for_an_llm_judge_pass_their_own_promtool_tests(tmp_path: Path) -> None:
    rules = _render("--judge", "openai")
    tests = _render("--judge", "openai", "--promtool-tests", "rules.yaml")
    assert rules.returncode == 0 and tests.returncode == 0, rules.stderr + tests.stderr
    (tmp_path / "rules.yaml").write_text(rules.stdout, encoding="utf-8")
    (tmp_path / "rules_test.yaml").write_text(tests.stdout, encoding="utf-8")
    result = _promtool("test", "rules", "rules_test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("judge", JUDGE_KINDS)
def test_pages_only_on_labels_whose_measured_rates_keep_their_promise(judge: str) -> None:
    done = _render("--judge", judge)
    assert done.returncode == 0, done.stderr
    policy = label_policy(judge)
    for alert in _alerts(done.stdout):
        if alert["labels"]["severity"] != "page":
            continue
        for metric, label in policy.items():
            if f'gen_ai_evaluation_name="{metric}"' in alert["expr"]:
                assert label.keeps_promise, (judge, alert["alert"])


@pytest.mark.parametrize("judge", JUDGE_KINDS)
def test_no_rule_reads_a_label_the_judge_does_not_write(judge: str) -> None:
    done = _render("--judge", judge)
    unlabelled = [m for m, label in label_policy(judge).items() if label.threshold is None]
    for alert in _alerts(done.stdout):
        for metric in unlabelled:
            assert f"Rag{metric.capitalize()}" not in alert["alert"], (judge, alert["alert"])
            if alert["labels"]["severity"] == "page":
                assert f'"{metric}"' not in alert["expr"], (judge, alert["alert"])


def test_the_offline_judge_pages_on_faithfulness_and_never_on_groundedness() -> None:
    done = _render("--judge", "lexical")
    pages = {a["alert"] for a in _alerts(done.stdout) if a["labels"]["severity"] == "page"}
    assert "RagFaithfulnessLow" in pages
    assert not {a for a in pages if "Groundedness" in a or "GenerationDrift" in a}


def test_the_shipped_rules_are_rendered_for_the_default_judge_and_say_so(
    renderer: ModuleType,
) -> None:
    text = RULES_FILE.read_text(encoding="utf-8")
    assert Settings().judge == renderer.DEFAULT_JUDGE == "lexical"
    assert renderer.rendered_judge(yaml.safe_load(text)) == "lexical"
    assert "RENDERED FOR THE LEXICAL JUDGE" in text
    done = _render("--judge", "lexical", "--slo", "faithfulness=0.95")
    shipped = {g["name"]: g for g in yaml.safe_load(text)["groups"]}
    for group in yaml.safe_load(done.stdout)["groups"]:
        assert yaml.safe_dump(shipped[group["name"]]) == yaml.safe_dump(group), group["name"]


@pytest.mark.parametrize("n", [100, 400, 900, 3600])
def test_a_healthy_window_stays_under_the_bound_but_with_the_allowed_chance(n: int) -> None:
    log_inv = alert_bounds.log_inverse_alpha(alert_bounds.FALSE_PAGES_PER_MONTH)
    healthy = alert_bounds.JudgeRates(0.031, 0.25).fail_share(0.1)
    bound = n * healthy + alert_bounds.excess(n, healthy, log_inv)
    # The exact binomial chance of crossing it, against Bernstein's promise.
    assert binomial_tail_above(n, healthy, bound) <= math.exp(-log_inv)


def test_the_minimum_window_is_the_first_a_broken_service_fires_in() -> None:
    log_inv = alert_bounds.log_inverse_alpha(alert_bounds.FALSE_PAGES_PER_MONTH)
    healthy, broken = 0.0529, 0.25
    n = alert_bounds.min_window(healthy, broken, log_inv)
    assert alert_bounds.fires(broken * n, n, healthy, log_inv)
    assert not alert_bounds.fires(broken * (n - 1), n - 1, healthy, log_inv)


def test_a_judge_that_cannot_tell_broken_from_healthy_has_no_window() -> None:
    with pytest.raises(ValueError, match="cannot tell them apart"):
        alert_bounds.min_window(0.3, 0.25, 10.0)


def test_less_traffic_gets_longer_windows(renderer: ModuleType) -> None:
    def window(rate: str) -> str:
        done = _render("--rate", rate, "--no-slo")
        low = next(a for a in _alerts(done.stdout) if a["alert"] == "RagFaithfulnessLow")
        return str(low["expr"]).split("fail_ratio", 1)[1].split("{", 1)[0]

    assert [window("1"), window("0.3"), window("0.1")] == ["15m", "1h", "6h"]


def test_rendering_for_traffic_the_shipped_slo_cannot_reach_is_a_usage_error() -> None:
    # 0.1 evaluations a second hold 30 in 5 minutes; the 95 % fast burn needs 112.
    done = _render("--rate", "0.1")
    assert done.returncode == 2
    assert "no window can reach the objective" in done.stderr and "--no-slo" in done.stderr


def _diagnosis_alerts(text: str) -> dict[str, dict[str, Any]]:
    return {a["alert"]: a for a in _alerts(text) if a["alert"].endswith("Rising")}


def test_the_diagnosis_alerts_compare_with_the_services_own_day_not_a_fixed_share() -> None:
    done = _render("--judge", "openai")
    assert done.returncode == 0, done.stderr
    alerts = _diagnosis_alerts(done.stdout)
    assert set(alerts) == {
        "RagRetrievalMissRising",
        "RagGenerationDriftRising",
        "RagToolFailureRising",
    }
    for name, alert in alerts.items():
        expr = " ".join(str(alert["expr"]).split())
        assert "baseline_diagnosis_share15m" in expr, name
        assert "> 0.2 " not in expr and ">= 20" not in expr, name
    assert alerts["RagToolFailureRising"]["labels"]["severity"] == "page"


def test_a_judge_without_a_groundedness_label_keeps_only_the_tool_failure_alert() -> None:
    done = _render("--judge", "lexical", "--no-slo")
    assert done.returncode == 0, done.stderr
    assert set(_diagnosis_alerts(done.stdout)) == {"RagToolFailureRising"}


@pytest.mark.parametrize("severity", ["page", "ticket"])
@pytest.mark.parametrize("baseline", [0.02, 0.1, 0.3])
@pytest.mark.parametrize("n", [20, 100, 900])
def test_a_window_at_its_baseline_share_crosses_a_diagnosis_alert_with_the_allowed_chance(
    severity: str, baseline: float, n: int
) -> None:
    import judge_rules

    rules = judge_rules.diagnosis_rules("RagToolFailureRising", severity, judge_rules.Traffic())
    log_inv = alert_bounds.log_inverse_alpha(
        alert_bounds.FALSE_PAGES_PER_MONTH
        if severity == "page"
        else alert_bounds.FALSE_TICKETS_PER_MONTH
    )
    # The rule's threshold with a day-long baseline at 1 evaluation a second, whose own noise
    # only raises it; the exact binomial chance that a window at the baseline crosses it.
    excess = alert_bounds.excess(n, baseline, log_inv)
    threshold = n * baseline + max(excess, rules.min_rise * n)
    chance = binomial_tail_above(n, baseline, threshold) if n >= rules.min_evaluations else 0.0
    assert chance <= math.exp(-log_inv)


@pytest.mark.timeout(900)
def test_a_diagnosis_alert_fires_on_a_rise_and_not_on_its_usual_share_or_a_few_answers(
    tmp_path: Path,
) -> None:
    # At a tenth of the traffic the alerts count an hour; their generated promtool tests hold
    # a service at 10 % that rises to all answers (fires), one whose usual 30 % stays (the old
    # fixed 20 % fired), and one that rises with fewer than the minimum (quiet).
    args = ("--judge", "openai", "--rate", "0.1", "--no-slo")
    rules, tests = _render(*args), _render(*args, "--promtool-tests", "rules.yaml")
    assert rules.returncode == 0 and tests.returncode == 0, rules.stderr + tests.stderr
    assert "diagnosis_share1h" in rules.stdout
    document = yaml.safe_load(tests.stdout)
    document["tests"] = [t for t in document["tests"] if "Rising" in t["name"]]
    assert len(document["tests"]) == 1 and "steady" in document["tests"][0]["name"]
    (tmp_path / "rules.yaml").write_text(rules.stdout, encoding="utf-8")
    (tmp_path / "rules_test.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    result = _promtool("test", "rules", "rules_test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
