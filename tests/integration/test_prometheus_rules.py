"""The kit's Prometheus rules, and every PromQL expression the kit ships, checked by promtool.

promtool parses PromQL for real: each dashboard or cookbook expression is written into a
throwaway rules file as a recording rule and ``promtool check rules`` must accept it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.servers.prometheus import (
    KIT,
    PROMTOOL_NAMES,
    RULES_FILE,
    render_test_rules,
    require_binary,
)

RULES_TEST_FILE = KIT / "prometheus" / "rules_test.yaml"
GENERATED_TEST_FILE = KIT / "prometheus" / "rules.generated_test.yaml"
DASHBOARD_DIR = KIT / "grafana" / "dashboards"
QUERIES_MD = KIT / "QUERIES.md"

# Grafana's variables, replaced by values of the right kind so promtool sees plain PromQL.
GRAFANA_VARIABLES = {
    "service": ".*",
    "metric": ".*",
    "job": ".*",
    "__rate_interval": "1m",
    "__interval": "1m",
    "__range": "1h",
}
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")
_LABEL_VALUES = re.compile(r"^label_values\((.+),\s*\w+\)$", re.DOTALL)
_PROMQL_BLOCK = re.compile(r"```promql\n(.*?)```", re.DOTALL)


def _substitute_variables(expr: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GRAFANA_VARIABLES:
            raise KeyError(f"unknown Grafana variable ${name} in {expr!r}")
        return GRAFANA_VARIABLES[name]

    return _VARIABLE.sub(replace, expr)


def _dashboard_expressions() -> list[tuple[str, str]]:
    """(id, PromQL) for every Prometheus query in the dashboards: panels, variables, annotations."""
    found: list[tuple[str, str]] = []
    for path in sorted(DASHBOARD_DIR.glob("*.json")):
        dashboard: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        for panel in dashboard.get("panels", []):
            for target in panel.get("targets", []):
                if target.get("datasource", {}).get("type") == "prometheus":
                    label = f"{path.stem}:{panel['title']}:{target['refId']}"
                    found.append((label, target["expr"]))
        for variable in dashboard.get("templating", {}).get("list", []):
            if variable.get("datasource", {}).get("type") == "prometheus":
                query = variable["query"]["query"]
                inner = _LABEL_VALUES.match(query)
                expr = inner.group(1) if inner else query
                found.append((f"{path.stem}:${variable['name']}", expr))
        for annotation in dashboard.get("annotations", {}).get("list", []):
            if annotation.get("datasource", {}).get("type") == "prometheus":
                found.append((f"{path.stem}:annotation:{annotation['name']}", annotation["expr"]))
    return found


def _cookbook_expressions() -> list[tuple[str, str]]:
    """(id, PromQL) for every ```promql block of QUERIES.md."""
    blocks = _PROMQL_BLOCK.findall(QUERIES_MD.read_text(encoding="utf-8"))
    return [(f"QUERIES.md:promql#{index}", block.strip()) for index, block in enumerate(blocks)]


def _promtool_check_expression(expr: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    promtool = require_binary(*PROMTOOL_NAMES)
    rules = {"groups": [{"name": "check", "rules": [{"record": "check:expr", "expr": expr}]}]}
    path = workdir / "expression.rules.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=30
    )


def test_rules_file_passes_promtool_check() -> None:
    promtool = require_binary(*PROMTOOL_NAMES)
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES_FILE)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_unit_tests_pass_under_promtool() -> None:
    promtool = require_binary(*PROMTOOL_NAMES)
    result = subprocess.run(
        [promtool, "test", "rules", RULES_TEST_FILE.name],
        cwd=RULES_TEST_FILE.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(900)
def test_generated_rules_unit_tests_pass_under_promtool() -> None:
    promtool = require_binary(*PROMTOOL_NAMES)
    result = subprocess.run(
        [promtool, "test", "rules", GENERATED_TEST_FILE.name],
        cwd=GENERATED_TEST_FILE.parent, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_rules_unit_tests_are_what_the_renderer_writes() -> None:
    script = KIT / "prometheus" / "render_rules.py"
    done = subprocess.run(
        [sys.executable, str(script), str(RULES_FILE), "--production-windows",
         "--promtool-tests", "rules.yaml"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == GENERATED_TEST_FILE.read_text(encoding="utf-8")


def test_rules_unit_tests_cover_every_alert_of_the_rules_file() -> None:
    rules = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tested = {
        case["alertname"]
        for path in (RULES_TEST_FILE, GENERATED_TEST_FILE)
        for test in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts == tested


def test_rules_unit_tests_cover_every_cause_of_the_evaluator_alert() -> None:
    rules = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    causes = {
        r["labels"]["cause"]
        for g in rules["groups"]
        for r in g["rules"]
        if r.get("alert") == "RagEvaluatorUnhealthy"
    }
    tests = yaml.safe_load(RULES_TEST_FILE.read_text(encoding="utf-8"))
    tested = {
        alert["exp_labels"]["cause"]
        for test in tests["tests"]
        for case in test.get("alert_rule_test", [])
        for alert in case.get("exp_alerts", [])
        if case["alertname"] == "RagEvaluatorUnhealthy"
    }
    assert causes == tested


def test_test_window_rules_pass_promtool_check(tmp_path: Path) -> None:
    promtool = require_binary(*PROMTOOL_NAMES)
    rendered = render_test_rules(tmp_path / "rules.test-windows.yaml")
    result = subprocess.run(
        [promtool, "check", "rules", str(rendered)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_test_window_rules_differ_from_the_rules_file_only_in_durations(tmp_path: Path) -> None:
    rendered = render_test_rules(tmp_path / "rules.test-windows.yaml")
    original = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    short = yaml.safe_load(rendered.read_text(encoding="utf-8"))

    def without_durations(document: dict[str, Any]) -> list[dict[str, Any]]:
        rules = []
        for group in document["groups"]:
            for rule in group["rules"]:
                rule = dict(rule)
                # Folded YAML and re-dumped YAML lay expressions out differently.
                expr = " ".join(str(rule["expr"]).split())
                expr = re.sub(r"offset [0-9]+[smhdwy]", "offset window", expr)
                rule["expr"] = re.sub(r"\[[0-9]+[smhdwy]\]", "[window]", expr)
                rule.pop("for", None)
                rules.append(rule)
        return rules

    assert without_durations(short) == without_durations(original)
    assert "[15m]" not in rendered.read_text(encoding="utf-8")


def test_renderer_refuses_a_window_it_has_no_mapping_for(tmp_path: Path) -> None:
    source = tmp_path / "rules.yaml"
    source.write_text(
        yaml.safe_dump(
            {"groups": [{"name": "g", "rules": [{"record": "r:x:rate7m", "expr": "rate(x[7m])"}]}]}
        ),
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"\[7m\]"):
        render_test_rules(tmp_path / "out.yaml", source=source)


def test_promtool_expression_check_rejects_malformed_promql(tmp_path: Path) -> None:
    result = _promtool_check_expression("sum by (service_name (rate(x[5m]))", tmp_path)
    assert result.returncode != 0


def test_dashboard_and_cookbook_have_promql_to_check() -> None:
    assert len(_dashboard_expressions()) >= 15
    assert len(_cookbook_expressions()) >= 10


@pytest.mark.parametrize(
    ("where", "expr"), _dashboard_expressions(), ids=[i for i, _ in _dashboard_expressions()]
)
def test_dashboard_promql_parses(where: str, expr: str, tmp_path: Path) -> None:
    result = _promtool_check_expression(_substitute_variables(expr), tmp_path)
    assert result.returncode == 0, f"{where}: {expr}\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize(
    ("where", "expr"), _cookbook_expressions(), ids=[i for i, _ in _cookbook_expressions()]
)
def test_cookbook_promql_parses(where: str, expr: str, tmp_path: Path) -> None:
    result = _promtool_check_expression(expr, tmp_path)
    assert result.returncode == 0, f"{where}: {expr}\n{result.stdout}{result.stderr}"


def _render(*args: str) -> subprocess.CompletedProcess[str]:
    script = KIT / "prometheus" / "render_rules.py"
    command = [sys.executable, str(script), str(RULES_FILE), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.timeout(900)
def test_the_renderer_adds_a_ticket_for_a_users_metric_that_fires_under_promtool(
    tmp_path: Path,
) -> None:
    promtool = require_binary(*PROMTOOL_NAMES)
    rendered = _render("--metric", "shouting", "--production-windows")
    assert rendered.returncode == 0, rendered.stderr
    tests = _render("--metric", "shouting", "--production-windows", "--promtool-tests", "r.yaml")
    assert tests.returncode == 0, tests.stderr
    (tmp_path / "r.yaml").write_text(rendered.stdout, encoding="utf-8")
    document = yaml.safe_load(tests.stdout)
    # Only the user's metric's test: the others are the shipped rules' own.
    document["tests"] = [t for t in document["tests"] if "RagShoutingDrop" in t["name"]]
    for test in document["tests"]:
        test["input_series"] = [s for s in test["input_series"] if "shouting" in s["series"]]
        test["alert_rule_test"] = [
            c for c in test["alert_rule_test"] if c["alertname"] == "RagShoutingDrop"
        ]
    assert document["tests"], tests.stdout
    (tmp_path / "r_test.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", "r_test.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_renderer_refuses_a_users_metric_that_would_shadow_an_alert() -> None:
    done = _render("--metric", "faithfulness")
    assert done.returncode == 2
    assert "RagFaithfulnessDrop" in done.stderr


def test_a_users_metric_alert_reads_its_label_and_never_pages() -> None:
    # @ragpulse.metric("shouting", threshold=0.9) labels its scores; nobody measured what its
    # label is worth, so it gets the baseline ticket and no page.
    done = _render("--metric", "shouting", "--production-windows")
    assert done.returncode == 0, done.stderr
    rules = [r for g in yaml.safe_load(done.stdout)["groups"] for r in g["rules"]]
    shouting = [r for r in rules if "shouting" in str(r.get("expr", "")) and "alert" in r]
    assert [r["alert"] for r in shouting] == ["RagShoutingDrop"]
    assert shouting[0]["labels"]["severity"] == "ticket"
    assert 'span.ragpulse.eval.shouting.label = "fail"' in shouting[0]["annotations"]["runbook"]
    refused = _render("--metric", "shouting=0.9")
    assert refused.returncode == 2
    assert "name the metric only" in refused.stderr


_ALERT_LIST = re.compile(r"<!-- alerts: .*? -->\n(.*?)\n<!-- /alerts -->", re.DOTALL)


@pytest.mark.parametrize("doc", ["docs/operations.md", "collector-config/README.md"])
def test_the_alert_lists_in_the_docs_are_the_rules_own(doc: str) -> None:
    done = _render("--list-alerts")
    assert done.returncode == 0, done.stderr
    (listed,) = _ALERT_LIST.findall((KIT.parent / doc).read_text(encoding="utf-8"))
    assert listed == done.stdout.strip()
