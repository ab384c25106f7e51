"""Real Prometheus and Alertmanager servers on 127.0.0.1 for tests, and a webhook receiver.

``start_prometheus`` runs the ``prometheus`` binary with a temporary configuration (1 s scrape
and evaluation intervals) over the given scrape targets and rule files; ``start_alertmanager``
runs Debian's ``prometheus-alertmanager`` (or ``alertmanager``) routing every alert to a
``WebhookReceiver``, a standard-library HTTP server that records the notifications it gets.
``render_test_rules`` writes ``collector-config/prometheus/rules.yaml`` with test-sized windows
through the kit's own ``render_rules.py``, so live tests run the shipped rules.

A missing binary skips the test on a developer machine and fails it under CI (``CI`` set), where
``.ci/run`` installs the Debian packages.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from ._process import log_tail, stop_process

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "collector-config"
RULES_FILE = KIT / "prometheus" / "rules.yaml"
RENDER_RULES_SCRIPT = KIT / "prometheus" / "render_rules.py"

PROMETHEUS_NAMES = ("prometheus",)
PROMTOOL_NAMES = ("promtool",)
ALERTMANAGER_NAMES = ("prometheus-alertmanager", "alertmanager")
AMTOOL_NAMES = ("amtool",)

_START_TIMEOUT = 20.0


def find_binary(*names: str) -> str | None:
    """The path of the first of ``names`` on PATH, or ``None``."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def require_binary(*names: str) -> str:
    """The path of the first of ``names`` on PATH; skip the test without it (fail under CI)."""
    path = find_binary(*names)
    if path is not None:
        return path
    message = f"none of {', '.join(names)} is installed (Debian: apt-get install prometheus)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(
    condition: Callable[[], Any], timeout: float, interval: float = 0.25, what: str = ""
) -> Any:
    """Poll ``condition`` until it returns something truthy; raise ``TimeoutError`` after
    ``timeout`` seconds. Returns the truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what or condition}")
        time.sleep(interval)


def _get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


def _is_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class _Process:
    """A server process with its log file; ``stop`` terminates it and waits."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the server wrote, for failure messages."""
        return "\n".join(log_tail(self.log_path, chars=1 << 20).splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``timeout``)."""
        stop_process(self.process, timeout)

    def wait_ready(self, url: str) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n{self.log_tail()}")
            return _is_ready(url)

        try:
            wait_until(ready, _START_TIMEOUT, interval=0.1, what=f"{self.name} at {url}")
        except TimeoutError as exc:
            self.stop()
            raise RuntimeError(f"{exc}\n{self.log_tail()}") from exc


def _spawn(name: str, argv: Sequence[str], workdir: Path) -> _Process:
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            list(argv), stdout=log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True
        )
    return _Process(name=name, process=process, log_path=log_path)


@dataclass
class PrometheusServer:
    """A running Prometheus; ``url`` is its base URL."""

    url: str
    config_path: Path
    server: _Process

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query through ``/api/v1/query``; the result vector."""
        params = urllib.parse.urlencode({"query": expr})
        body = _get_json(f"{self.url}/api/v1/query?{params}")
        if body.get("status") != "success":
            raise RuntimeError(f"query {expr!r} failed: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """Pending and firing alerts from ``/api/v1/alerts``."""
        body = _get_json(f"{self.url}/api/v1/alerts")
        result: list[dict[str, Any]] = body["data"]["alerts"]
        return result

    def alert_states(self, alertname: str) -> list[str]:
        """The states (``pending``/``firing``) of the alerts named ``alertname``."""
        return [a["state"] for a in self.alerts() if a["labels"].get("alertname") == alertname]

    def targets_up(self) -> bool:
        """Whether every scrape target has been scraped successfully."""
        active = _get_json(f"{self.url}/api/v1/targets")["data"]["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


def start_prometheus(
    workdir: Path,
    scrape_targets: Sequence[str],
    rule_files: Sequence[Path] = (),
    alertmanager_url: str | None = None,
    job: str = "ragpulse",
) -> PrometheusServer:
    """Start ``prometheus`` on a free 127.0.0.1 port scraping ``scrape_targets`` (host:port)
    every second and evaluating ``rule_files`` every second; alerts go to
    ``alertmanager_url`` when given."""
    binary = require_binary(*PROMETHEUS_NAMES)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": list(scrape_targets)}]}
        ],
    }
    if alertmanager_url is not None:
        host = urllib.parse.urlsplit(alertmanager_url).netloc
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [host]}]}]}
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    server = _spawn(
        "prometheus",
        [
            binary,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            # Resend firing alerts every second so Alertmanager hears about them promptly.
            "--rules.alert.resend-delay=1s",
        ],
        workdir,
    )
    url = f"http://127.0.0.1:{port}"
    server.wait_ready(f"{url}/-/ready")
    return PrometheusServer(url=url, config_path=config_path, server=server)


@dataclass
class WebhookReceiver:
    """A stdlib HTTP server recording the JSON bodies POSTed to it (Alertmanager webhooks)."""

    url: str
    notifications: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def received(self) -> list[dict[str, Any]]:
        """A copy of the notifications so far."""
        with self._lock:
            return list(self.notifications)

    def alerts(self, alertname: str, status: str) -> list[dict[str, Any]]:
        """Alerts named ``alertname`` with ``status`` (firing/resolved) across notifications."""
        return [
            alert
            for notification in self.received()
            for alert in notification.get("alerts", [])
            if alert.get("labels", {}).get("alertname") == alertname
            and alert.get("status") == status
        ]

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.notifications.append(body)

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def start_webhook_receiver() -> WebhookReceiver:
    """Start a ``WebhookReceiver`` on a free 127.0.0.1 port, serving from a daemon thread."""
    receiver: WebhookReceiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            receiver._record(json.loads(self.rfile.read(length) or b"{}"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output to the test's own messages

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    receiver = WebhookReceiver(url=f"http://127.0.0.1:{port}/alerts", _server=server)
    threading.Thread(target=server.serve_forever, name="webhook", daemon=True).start()
    return receiver


@dataclass
class AlertmanagerServer:
    """A running Alertmanager; ``url`` is its base URL."""

    url: str
    server: _Process

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts from ``/api/v2/alerts``."""
        result: list[dict[str, Any]] = _get_json(f"{self.url}/api/v2/alerts")
        return result

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


def start_alertmanager(
    workdir: Path,
    webhook_url: str,
    group_wait: str = "1s",
    group_interval: str = "1s",
) -> AlertmanagerServer:
    """Start Alertmanager on a free 127.0.0.1 port (clustering off) sending every alert, and
    its resolution, to ``webhook_url``."""
    binary = require_binary(*ALERTMANAGER_NAMES)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = {
        "route": {
            "receiver": "webhook",
            "group_by": ["alertname", "service_name"],
            "group_wait": group_wait,
            "group_interval": group_interval,
            "repeat_interval": "1h",
        },
        "receivers": [
            {"name": "webhook", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}
        ],
    }
    config_path = workdir / "alertmanager.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    server = _spawn(
        "alertmanager",
        [
            binary,
            f"--config.file={config_path}",
            f"--storage.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            # An empty address turns the gossip cluster off (it would bind 0.0.0.0:9094).
            "--cluster.listen-address=",
        ],
        workdir,
    )
    url = f"http://127.0.0.1:{port}"
    server.wait_ready(f"{url}/-/ready")
    return AlertmanagerServer(url=url, server=server)


def _load_renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_rules", RENDER_RULES_SCRIPT)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {RENDER_RULES_SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render_test_rules(dest: Path, source: Path = RULES_FILE) -> Path:
    """Write ``source`` (the kit's rules.yaml) with test-sized windows to ``dest``."""
    renderer = _load_renderer()
    rendered: str = renderer.render_rules(source.read_text(encoding="utf-8"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(rendered, encoding="utf-8")
    return dest
