"""Arize Phoenix for tests: started from its own virtual environment, read back over REST.

Phoenix is large, so it is installed apart from the project (``scripts/phoenix-venv.sh`` makes
``.phoenix-venv/`` at the repo root). ``PhoenixServer`` runs ``phoenix serve`` on free ports of
127.0.0.1 with a fresh SQLite working directory, waits until it is ready (``/readyz``: its
database answers; and its REST API lists projects), and reads spans back
through ``GET /v1/projects/{project}/spans``, which returns OTel ids in hex and attributes
flattened to dotted keys (``annotations.0.annotation.name``) with their JSON types.

Spans sent over OTLP without an ``openinference.project.name`` resource attribute land in the
``default`` project; ``wait_for_span`` searches every project unless told one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from ._process import log_tail, stop_process
from .rotel_sink import free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
PHOENIX_VENV = REPO_ROOT / ".phoenix-venv"
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "phoenix-venv.sh"
DEFAULT_PROJECT = "default"

# Only a guard against a Phoenix that never comes up (one that exits is seen at once): its
# start (imports, then the SQLite schema's migrations) took 186 s on a 2-core machine at a
# load average of 11, and 10 s idle.
STARTUP_TIMEOUT_S = 600.0
POLL_INTERVAL_S = 0.25
# A read-back on a busy machine may wait for Phoenix's own inserts; this only bounds a hang.
REQUEST_TIMEOUT_S = 60.0
# Ready means the REST API answers from the database, not only that the port is open.
READINESS_PATHS = ("/readyz", "/v1/projects")

PhoenixSpan = Mapping[str, Any]
"""One span as Phoenix's REST API returns it: ``context.span_id``, ``parent_id``, ``attributes``."""


def phoenix_executable() -> Path | None:
    """The ``phoenix`` command in ``.phoenix-venv/`` (or ``$PHOENIX_VENV``), if installed."""
    venv = Path(os.environ.get("PHOENIX_VENV", PHOENIX_VENV))
    executable = venv / "bin" / "phoenix"
    return executable if executable.is_file() and os.access(executable, os.X_OK) else None


class PhoenixServer:
    """A running ``phoenix serve`` with its own SQLite database in a temporary directory."""

    def __init__(self, executable: Path | None = None) -> None:
        found = executable or phoenix_executable()
        if found is None:
            raise FileNotFoundError(f"phoenix not installed: run {INSTALL_SCRIPT}")
        self._executable = found
        self._workdir = Path(tempfile.mkdtemp(prefix="phoenix-"))
        self.port = 0
        self.grpc_port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._client: httpx.Client | None = None

    @property
    def base_url(self) -> str:
        """Phoenix's HTTP address; also its OTLP/HTTP receiver (``/v1/traces``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def otlp_http_endpoint(self) -> str:
        """Base URL to give an OTLP/HTTP exporter that appends ``/v1/traces`` itself."""
        return self.base_url

    @property
    def otlp_grpc_endpoint(self) -> str:
        """Phoenix's OTLP/gRPC receiver."""
        return f"http://127.0.0.1:{self.grpc_port}"

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "PHOENIX_WORKING_DIR": str(self._workdir),
                "PHOENIX_HOST": "127.0.0.1",
                "PHOENIX_PORT": str(self.port),
                "PHOENIX_GRPC_PORT": str(self.grpc_port),
                # No usage reports to the outside from a test run.
                "PHOENIX_TELEMETRY_ENABLED": "false",
            }
        )
        # A project-wide database URL would send the test's spans to someone's real Phoenix.
        env.pop("PHOENIX_SQL_DATABASE_URL", None)
        env.pop("PHOENIX_PROJECT_NAME", None)
        return env

    def start(self) -> PhoenixServer:
        """Start Phoenix and return once ``READINESS_PATHS`` all answer 200."""
        self.port, self.grpc_port = free_ports(2)
        output = (self._workdir / "phoenix.out").open("wb")
        self._process = subprocess.Popen(
            [str(self._executable), "serve"],
            env=self._environment(),
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        output.close()
        self._client = httpx.Client(base_url=self.base_url, timeout=REQUEST_TIMEOUT_S)
        try:
            self._wait_until_ready(self._process)
        except BaseException:
            # Whatever ends the wait (its deadline, a test timeout, Ctrl-C) ends Phoenix too.
            self.stop()
            raise
        return self

    def _wait_until_ready(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"phoenix exited with {process.returncode}: {self.output()}")
            if self._ready():
                return
            time.sleep(POLL_INTERVAL_S)
        raise RuntimeError(f"phoenix not ready within {STARTUP_TIMEOUT_S}s: {self.output()}")

    def _ready(self) -> bool:
        try:
            return all(self._http().get(path).status_code == 200 for path in READINESS_PATHS)
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        """Stop Phoenix (SIGTERM, then SIGKILL after 10 s) and delete its database."""
        if self._client is not None:
            self._client.close()
            self._client = None
        process, self._process = self._process, None
        stop_process(process, timeout=10)
        shutil.rmtree(self._workdir, ignore_errors=True)

    def output(self) -> str:
        """Phoenix's console output (for failure messages)."""
        return log_tail(self._workdir / "phoenix.out")

    def __enter__(self) -> PhoenixServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def version(self) -> str:
        """The running Phoenix's version (``GET /arize_phoenix_version``)."""
        return self._http().get("/arize_phoenix_version").text.strip()

    def spans(
        self,
        project: str = DEFAULT_PROJECT,
        *,
        trace_ids: list[str] | None = None,
        span_ids: list[str] | None = None,
    ) -> list[PhoenixSpan]:
        """Every stored span of ``project`` (following pagination), optionally filtered by ids.

        An unknown project (no span has arrived yet) reads as no spans.
        """
        params: dict[str, Any] = {"limit": 1000}
        if trace_ids:
            params["trace_id"] = trace_ids
        if span_ids:
            params["span_id"] = span_ids
        found: list[PhoenixSpan] = []
        while True:
            response = self._http().get(f"/v1/projects/{project}/spans", params=params)
            if response.status_code == 404:
                return found
            response.raise_for_status()
            body = response.json()
            found.extend(body["data"])
            cursor = body.get("next_cursor")
            if not cursor:
                return found
            params["cursor"] = cursor

    def projects(self) -> list[str]:
        """Names of the projects that exist (``GET /v1/projects``)."""
        names: list[str] = []
        params: dict[str, Any] = {"limit": 100}
        while True:
            response = self._http().get("/v1/projects", params=params)
            response.raise_for_status()
            body = response.json()
            names.extend(project["name"] for project in body["data"])
            if not body.get("next_cursor"):
                return names
            params["cursor"] = body["next_cursor"]

    def spans_in_trace(self, trace_id: str) -> list[PhoenixSpan]:
        """Every stored span of trace ``trace_id`` (hex), whichever project holds it."""
        return [span for name in self.projects() for span in self.spans(name, trace_ids=[trace_id])]

    def wait_for_span(
        self,
        span_id: str,
        match: Callable[[PhoenixSpan], bool] = lambda _: True,
        *,
        project: str | None = None,
        timeout: float = 30.0,
    ) -> PhoenixSpan:
        """Poll until Phoenix stores span ``span_id`` (hex) and ``match`` accepts it.

        ``project=None`` looks in every project, so the test does not depend on how the
        exporting application named its project. Raises ``AssertionError`` with the versions
        seen when ``timeout`` seconds pass first.
        """
        deadline = time.monotonic() + timeout
        while True:
            names = [project] if project is not None else self.projects()
            stored = [span for name in names for span in self.spans(name, span_ids=[span_id])]
            for span in stored:
                if match(span):
                    return span
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"span {span_id} not stored as expected in Phoenix projects {names} after "
                    f"{timeout}s; stored: {stored}"
                )
            time.sleep(POLL_INTERVAL_S)

    def _http(self) -> httpx.Client:
        if self._client is None:
            raise RuntimeError("PhoenixServer is not started")
        return self._client
