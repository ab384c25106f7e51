"""examples/openinference_app.py: a trace written only by OpenInference is scored at its root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servers.chat_server import ChatServer, Reply

pytestmark = pytest.mark.integration

# The example imports the openinference instrumentor (a development extra): without it a
# developer's run skips these tests; in CI (CI set) they must run, so there they fail.
if not os.environ.get("CI"):
    pytest.importorskip("openinference.instrumentation.openai")

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT_ONE = "The Eiffel Tower opened to the public on 31 March 1889."


def run_example(server: ChatServer | None, cwd: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("OPENAI_BASE_URL", None)
    if server is not None:
        env["OPENAI_BASE_URL"] = server.url
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openinference_app.py")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def root_attributes(cwd: Path) -> dict[str, object]:
    spans = [
        span
        for line in (cwd / "ragpulse-traces.jsonl").read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    (root,) = [s for s in spans if s["name"] == "rag-request"]
    assert any(s["name"] == "ChatCompletion" for s in spans)  # the instrumentor's own span
    return {a["key"]: next(iter(a["value"].values())) for a in root["attributes"]}


def test_grounded_answer_from_the_instrumented_client_scores_one(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.script(Reply.text("The Eiffel Tower opened to the public on 31 March 1889."))
        assert run_example(server, tmp_path)["answer"].startswith("The Eiffel Tower opened")
        assert server.request_count == 1  # the lexical judge makes no calls
    attrs = root_attributes(tmp_path)
    assert attrs["ragpulse.eval.status"] == "ok"
    assert attrs["ragpulse.eval.groundedness.score"] == 1.0


def test_drifted_answer_from_the_instrumented_client_fails(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.script(Reply.text("The Eiffel Tower opened on 14 July 1902 and is made of glass."))
        run_example(server, tmp_path)
    attrs = root_attributes(tmp_path)
    assert attrs["ragpulse.eval.faithfulness.label"] == "fail"
    assert float(str(attrs["ragpulse.eval.groundedness.score"])) < 0.5


def test_example_runs_offline_without_a_server_and_scores_its_root(tmp_path: Path) -> None:
    # No OPENAI_BASE_URL: the real client and instrumentation talk to an in-process transport.
    assert run_example(None, tmp_path)["answer"] == DOCUMENT_ONE
    attrs = root_attributes(tmp_path)
    assert attrs["ragpulse.eval.status"] == "ok"
    assert attrs["ragpulse.eval.groundedness.score"] == 1.0
