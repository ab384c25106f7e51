"""RagFaithfulnessLow, live: a ragpulse app, a real Prometheus, a real Alertmanager.

The app (this file run as a script, so its OpenTelemetry globals are its own) uses ragpulse's
public API with the lexical judge, evaluates every request and serves its metrics on a
Prometheus port. Prometheus scrapes it every second and evaluates the kit's rules.yaml rendered
with test-sized windows (15m -> 20s, 1h -> 40s, for 5m -> 2s): the rules for the lexical judge,
whose faithfulness label is the one it pages on. Its answers are first grounded (sentences
copied from the retrieved contexts), then drift (sentences no context supports), then are
grounded again: the alert must fire, reach Alertmanager's webhook, and resolve.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
import yaml
from tests.servers.prometheus import (
    REPO,
    RULES_FILE,
    AlertmanagerServer,
    PrometheusServer,
    WebhookReceiver,
    free_port,
    render_test_rules,
    start_alertmanager,
    start_prometheus,
    start_webhook_receiver,
    wait_until,
)

pytestmark = pytest.mark.integration

ALERT = "RagFaithfulnessLow"
SERVICE = "support-bot"
REQUESTS_PER_SECOND = 10.0
# Run as a module from the repository root so `tests.servers` imports in the child too.
_MODULE = "tests.integration.test_live_alert"

DOCUMENTS = [
    "The warranty covers manufacturing defects for two years from the date of purchase.",
    "Returns are accepted within thirty days when the item is unused and in its box.",
    "Support is available by phone from nine to five on weekdays.",
]
GROUNDED_ANSWER = (
    "The warranty covers manufacturing defects for two years from the date of purchase. "
    "Returns are accepted within thirty days when the item is unused and in its box."
)
DRIFTED_ANSWER = (
    "Our premium plan includes free international shipping on every order. "
    "Customers receive a complimentary gift card after their fifth purchase."
)


# --- the app, run in a child process ----------------------------------------------------------


def _serve_app(prometheus_port: int, output_file: str) -> None:
    """Serve requests until stdin closes; each stdin line (grounded|drift) switches answers."""
    import ragpulse
    from ragpulse.judges import LexicalJudge

    handle = ragpulse.configure(
        service_name=SERVICE,
        judge=LexicalJudge(),
        # The offline judge scores groundedness unlabelled; an operator's own threshold
        # labels it, and the alert counts those labels.
        thresholds={"groundedness": 0.7},
        sample_rate=1.0,
        prometheus_port=prometheus_port,
        output_file=output_file,
    )
    mode = {"answer": GROUNDED_ANSWER}

    @ragpulse.retrieval
    def search(query: str) -> list[str]:
        return list(DOCUMENTS)

    @ragpulse.generation(model="scripted")
    def answer(question: str, docs: list[str]) -> str:
        return mode["answer"]

    @ragpulse.rag
    def handle_request(question: str) -> str:
        return answer(question, search(question))

    stop = threading.Event()

    def read_commands() -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "drift":
                mode["answer"] = DRIFTED_ANSWER
            elif command == "grounded":
                mode["answer"] = GROUNDED_ANSWER
        stop.set()

    threading.Thread(target=read_commands, daemon=True).start()
    print("ready", flush=True)
    while not stop.wait(1.0 / REQUESTS_PER_SECOND):
        handle_request("What does the warranty cover, and can I return an item?")
    handle.shutdown()


@dataclass
class _App:
    """The app process; ``say`` switches its answers."""

    process: subprocess.Popen[str]
    metrics_port: int

    def say(self, mode: str) -> None:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write(f"{mode}\n")
        stdin.flush()

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def _start_app(workdir: Path) -> _App:
    port = free_port()
    # No OTLP endpoint: spans go to a file, metrics to the Prometheus port only.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    process = subprocess.Popen(
        [sys.executable, "-m", _MODULE, str(port), str(workdir / "traces.jsonl")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(workdir / "app.log").open("w"),
        text=True,
        cwd=REPO,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if line.strip() != "ready":
        process.kill()
        raise RuntimeError(f"app did not start: {(workdir / 'app.log').read_text()}")
    return _App(process=process, metrics_port=port)


# --- the stack -------------------------------------------------------------------------------


@dataclass
class _Stack:
    app: _App
    prometheus: PrometheusServer
    alertmanager: AlertmanagerServer
    webhook: WebhookReceiver

    def diagnostics(self) -> str:
        return (
            f"\nalerts: {self.prometheus.alerts()}"
            f"\nshare: {self.prometheus.query(_SHARE)}"
            f"\ncount: {self.prometheus.query(_COUNT)}"
            f"\nwebhook: {self.webhook.received()}"
            f"\nprometheus log:\n{self.prometheus.server.log_tail(10)}"
        )


def _alert_window() -> str:
    """The window the shipped ``RagFaithfulnessLow`` reads (``15m``, ``1h``...): the renderer
    chooses it from the traffic the rules are sized for, so the test reads it off the rule."""
    rules = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == ALERT:
                found = re.search(r"labels:fail_ratio(\w+)\{", str(rule["expr"]))
                assert found is not None, rule["expr"]
                return found.group(1)
    raise AssertionError(f"{ALERT} is not in {RULES_FILE}")


_WINDOW = _alert_window()
_SELECTOR = f'{{service_name="{SERVICE}",gen_ai_evaluation_name="faithfulness"}}'
_SHARE = f"service_name:ragpulse_evaluation_labels:fail_ratio{_WINDOW}{_SELECTOR}"
_COUNT = f"service_name:ragpulse_evaluation_labels:evaluations{_WINDOW}{_SELECTOR}"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[_Stack]:
    webhook = start_webhook_receiver()
    started: list[Any] = [webhook]
    try:
        alertmanager = start_alertmanager(tmp_path / "alertmanager", webhook.url)
        started.append(alertmanager)
        app = _start_app(tmp_path)
        started.append(app)
        rules = render_test_rules(tmp_path / "prometheus" / "rules.test-windows.yaml")
        prometheus = start_prometheus(
            tmp_path / "prometheus",
            scrape_targets=[f"127.0.0.1:{app.metrics_port}"],
            rule_files=[rules],
            alertmanager_url=alertmanager.url,
        )
        started.append(prometheus)
        yield _Stack(app=app, prometheus=prometheus, alertmanager=alertmanager, webhook=webhook)
    finally:
        for server in reversed(started):
            server.stop()


def _value(result: list[dict[str, Any]]) -> float | None:
    return float(result[0]["value"][1]) if result else None


def test_faithfulness_alert_fires_on_drift_reaches_alertmanager_and_resolves(
    stack: _Stack,
) -> None:
    prometheus, webhook = stack.prometheus, stack.webhook
    try:
        # Grounded answers: enough evaluations to pass the minimum count, none of them low.
        wait_until(
            lambda: (_value(prometheus.query(_COUNT)) or 0) >= 100,
            timeout=90,
            what=f"100 grounded evaluations in the rule's test-sized {_WINDOW} window",
        )
        assert _value(prometheus.query(_SHARE)) == 0.0
        assert prometheus.alert_states(ALERT) == []

        # Drift: answers no context supports.
        stack.app.say("drift")
        wait_until(
            lambda: "firing" in prometheus.alert_states(ALERT),
            timeout=90,
            what=f"{ALERT} firing in Prometheus",
        )
        firing = wait_until(
            lambda: webhook.alerts(ALERT, "firing"), timeout=15, what="the firing webhook"
        )
        assert firing[0]["labels"]["service_name"] == SERVICE
        assert firing[0]["labels"]["severity"] == "page"

        # Grounded again: the low scores leave the window and the alert resolves.
        stack.app.say("grounded")
        wait_until(
            lambda: prometheus.alert_states(ALERT) == [],
            timeout=120,
            what=f"{ALERT} gone from Prometheus",
        )
        resolved = wait_until(
            lambda: webhook.alerts(ALERT, "resolved"), timeout=15, what="the resolved webhook"
        )
        assert resolved[0]["labels"]["service_name"] == SERVICE
    except TimeoutError as exc:
        raise AssertionError(f"{exc}{stack.diagnostics()}") from exc


if __name__ == "__main__":
    _serve_app(int(sys.argv[1]), sys.argv[2])
