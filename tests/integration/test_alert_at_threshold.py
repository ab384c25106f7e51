"""A score exactly at its metric's threshold passes in the alerts as it does on the span.

A child process (this file run as a module, so its OpenTelemetry and prometheus_client
globals are its own) writes evaluations through ragpulse's real signal path (``Emitter`` on an
SDK ``MeterProvider`` with the Prometheus exporter's reader) and prints what a scrape of
``/metrics`` would return, once a minute of simulated time. Those samples become promtool's
input series for the shipped ``rules.yaml``: scores exactly at the threshold must not fire the
metric's alert or the SLO's burn-rate alert; scores just below it (the next float down) must.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.servers.prometheus import PROMTOOL_NAMES, REPO, RULES_FILE, require_binary

from ragpulse.metrics._registry import default_thresholds

pytestmark = pytest.mark.integration

SERVICE = "support-bot"
PER_MINUTE = 30  # the fast burn wants its minimum evaluations in 5 minutes
MINUTES = 75
_MODULE = "tests.integration.test_alert_at_threshold"
_FAMILIES = ("ragpulse_evaluation_labels", "ragpulse_evaluation_score")


# --- the app's side, run in a child process -----------------------------------------------------


def _write_and_scrape(metric: str, score: float) -> None:
    """Each simulated minute: print the scrape (JSON), then write PER_MINUTE evaluations."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import REGISTRY, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, MetricResult, RagRecord
    from ragpulse.signals.emit import EmitOptions, Emitter, PipelineMetrics

    provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    emitter = Emitter(EmitOptions(service_name=SERVICE), PipelineMetrics(provider))
    record = RagRecord(question="q?", contexts=(Context("c."),), answer="a.", name="handle")
    evaluation = Evaluation(
        status=EvalStatus.OK, metrics={metric: MetricResult(metric, score, "")}, judge="lexical"
    )
    for _ in range(MINUTES + 1):
        samples = {}
        for family in text_string_to_metric_families(generate_latest(REGISTRY).decode()):
            if family.name in _FAMILIES:
                for sample in family.samples:
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                    samples[f"{sample.name}{{{labels}}}"] = sample.value
        print(json.dumps(samples), flush=True)
        for _ in range(PER_MINUTE):
            emitter.emit(record, evaluation, None)
    provider.shutdown()


# --- the test's side ----------------------------------------------------------------------------


def _scrapes(metric: str, score: float) -> list[dict[str, float]]:
    done = subprocess.run(
        [sys.executable, "-m", _MODULE, metric, repr(score)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _input_series(scrapes: list[dict[str, float]]) -> list[dict[str, str]]:
    """promtool's input series: one sample a minute, ``_`` before a series first appears."""
    names = sorted({name for scrape in scrapes for name in scrape})
    series = []
    for name in names:
        values = [f"{s[name]:g}" if name in s else "_" for s in scrapes]
        labelled = name.replace("{", '{job="app",instance="a:9464",', 1)
        series.append({"series": labelled, "values": " ".join(values)})
    return series


def _firing(tmp_path: Path, scrapes: list[dict[str, float]], alerts: dict[str, str]) -> None:
    """promtool proves each alert of ``alerts`` (name -> eval time) fires, on these scrapes."""
    _promtool(tmp_path, scrapes, alerts, firing=True)


def _quiet(tmp_path: Path, scrapes: list[dict[str, float]], alerts: dict[str, str]) -> None:
    _promtool(tmp_path, scrapes, alerts, firing=False)


def _promtool(
    tmp_path: Path, scrapes: list[dict[str, float]], alerts: dict[str, str], *, firing: bool
) -> None:
    promtool = require_binary(*PROMTOOL_NAMES)
    cases: list[dict[str, Any]] = []
    for alert, at in alerts.items():
        expected = [{"labels": f'ALERTS{{alertname="{alert}",alertstate="firing",'
                     f'gen_ai_evaluation_name="{_alert_metric(alert)}",service_name="{SERVICE}",'
                     f'severity="page"{_slo_label(alert)}}}', "value": 1}]  # fmt: skip
        cases.append(
            {
                "expr": f'ALERTS{{alertname="{alert}",alertstate="firing"}}',
                "eval_time": at,
                "exp_samples": expected if firing else [],
            }
        )
    document = {
        "rule_files": [str(RULES_FILE)],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": _input_series(scrapes), "promql_expr_test": cases}
        ],
    }
    path = tmp_path / "at_threshold_test.yaml"
    path.write_text(yaml.safe_dump(document, width=1000), encoding="utf-8")
    done = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _alert_metric(alert: str) -> str:
    return "faithfulness"


def _slo_label(alert: str) -> str:
    return ',slo="faithfulness"' if "BudgetBurn" in alert else ""


# The shipped rules page on the offline judge's faithfulness label (the one that keeps its
# promise): its alert and the SLO's fast burn, both with their windows full by 75 minutes.
ALERTS = {"faithfulness": {"RagFaithfulnessLow": "75m", "RagFaithfulnessBudgetBurnFast": "75m"}}


@pytest.mark.parametrize("metric", ["faithfulness"])
def test_scores_exactly_at_the_threshold_fire_no_alert(tmp_path: Path, metric: str) -> None:
    threshold = default_thresholds()[metric]
    scrapes = _scrapes(metric, threshold)
    last = scrapes[-1]
    passed = [v for k, v in last.items() if 'gen_ai_evaluation_score_label="pass"' in k]
    assert passed == [MINUTES * PER_MINUTE]  # every score is labelled pass, as on its span
    # The histogram's bucket at the threshold holds them all: an alert on it would count them low.
    bound = f'le="{threshold:g}"'
    assert [v for k, v in last.items() if bound in k] == [MINUTES * PER_MINUTE]
    _quiet(tmp_path, scrapes, ALERTS[metric])


@pytest.mark.parametrize("metric", ["faithfulness"])
def test_scores_just_below_the_threshold_fire_the_alerts(tmp_path: Path, metric: str) -> None:
    below = math.nextafter(default_thresholds()[metric], 0.0)
    scrapes = _scrapes(metric, below)
    failed = [v for k, v in scrapes[-1].items() if 'gen_ai_evaluation_score_label="fail"' in k]
    assert failed == [MINUTES * PER_MINUTE]
    _firing(tmp_path, scrapes, ALERTS[metric])


if __name__ == "__main__":
    _write_and_scrape(sys.argv[1], float(sys.argv[2]))
