"""examples/node: a real Node.js app (OpenTelemetry JS SDK, OpenInference attributes) exports to
a real ``ragpulse serve``, and its answer spans come back scored."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragpulse import semconv
from servers.serve_process import ServeProcess, by_span_id, free_port

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node"


@pytest.fixture(scope="module")
def node_app_installed() -> Path:
    """``npm ci`` of the example (pinned by its package-lock.json)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are needed (.ci/run installs them)")
        pytest.skip("node and npm are not installed")
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"],
        cwd=EXAMPLE,
        check=True,
        timeout=300,
        capture_output=True,
    )
    return EXAMPLE


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeProcess]:
    with ServeProcess(tmp_path, "--sample-rate", "1") as process:
        yield process


def _ask(port: int, question: str, drift: bool = False) -> dict[str, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/ask",
        data=json.dumps({"question": question, "drift": drift}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, str] = json.loads(response.read())
    return answer


def test_node_app_spans_come_back_from_serve_with_scores(
    node_app_installed: Path, serve: ServeProcess, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "OTEL_EXPORTER_OTLP_ENDPOINT": serve.http_endpoint,
        "OTEL_SERVICE_NAME": "node-rag",
    }
    log = (tmp_path / "node.log").open("wb")
    app = subprocess.Popen(
        ["node", "app.js"], cwd=node_app_installed, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 20
        while b"listening on" not in (tmp_path / "node.log").read_bytes():
            assert app.poll() is None and time.monotonic() < deadline, (
                tmp_path / "node.log"
            ).read_text()
            time.sleep(0.05)
        faithful = _ask(port, "How tall is the Eiffel Tower?")
        drifted = _ask(port, "How long is the Seine?", drift=True)
        app.terminate()  # the app flushes its batched spans on SIGTERM
        assert app.wait(timeout=60) == 0
    finally:
        if app.poll() is None:
            app.kill()
        log.close()

    assert faithful["answer"] == "The Eiffel Tower is 330 metres tall."
    spans = serve.wait_for_spans(
        lambda spans: sum(semconv.EVAL_STATUS in s.attributes for s in spans) == 2
    )
    assert len(spans) == 6 and all(len(c) == 1 for c in by_span_id(spans).values())
    units = {s.trace_id: s for s in spans if s.name == "rag.answer"}
    good, bad = units[faithful["traceId"]], units[drifted["traceId"]]
    assert good.attributes[semconv.EVAL_STATUS] == "ok"
    assert good.attributes["ragpulse.eval.groundedness.score"] == 1.0
    assert good.attributes["ragpulse.eval.faithfulness.score"] == 1.0
    assert bad.attributes[semconv.EVAL_STATUS] == "ok"
    # The doubled number is contradicted by the passage's own value (as the README says).
    assert bad.attributes[semconv.EVAL_CLAIMS_CONTRADICTED] == 1
    assert bad.attributes["ragpulse.eval.groundedness.score"] == 0.0
    assert good.resource["service.name"] == "node-rag"
    assert good.resource["telemetry.sdk.language"] == "nodejs"
    assert good.scope == "ragpulse-node-example"
