"""PhoenixAnnotations: ragpulse scores become Phoenix annotation records on the original spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from servers.phoenix import PhoenixServer

pytestmark = [pytest.mark.integration, pytest.mark.phoenix]

ROOT = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    import ragpulse
    from ragpulse.outputs.phoenix import PhoenixAnnotations

    endpoint = sys.argv[1]
    hook = PhoenixAnnotations(endpoint)
    handle = ragpulse.configure(service_name="phoenix-annotations", on_evaluation=hook)

    @ragpulse.retrieval
    def search(query):
        return ["The Larkspur 3 router ships with firmware 2.4 and has four Ethernet ports."]

    ids = {}

    @ragpulse.rag(name="annotated")
    def handle_request(question, answer):
        search(question)
        ids[answer] = format(trace.get_current_span().get_span_context().span_id, "016x")
        return answer

    handle_request("Which firmware?", "The Larkspur 3 router ships with firmware 2.4.")
    handle_request("Which firmware?", "The Larkspur 3 ships with firmware 9.1.")
    # Generous: on a busy machine the judge's first evaluations take seconds, more than
    # half the default shutdown_timeout; shutdown returns as soon as they are delivered.
    handle.shutdown(timeout=60)
    print(json.dumps({"ids": ids, "stats": vars(hook.stats)}))
    """
)


def annotations(phoenix: PhoenixServer, span_id: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{phoenix.base_url}/v1/projects/default/span_annotations",
        params={"span_ids": span_id},
        timeout=10,
    )
    if response.status_code == 404:  # the span itself has not been ingested yet
        return []
    response.raise_for_status()
    return list(response.json()["data"])


def test_scores_arrive_as_phoenix_annotations_on_the_request_spans(
    phoenix_server: PhoenixServer, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix_server.otlp_http_endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    done = subprocess.run(
        [sys.executable, "-c", APP, phoenix_server.base_url],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["stats"]["sent"] == 4 and result["stats"]["dropped"] == 0
    grounded, fabricated = result["ids"].values()

    deadline = time.monotonic() + 60
    found: dict[str, list[dict[str, Any]]] = {}
    while time.monotonic() < deadline:
        found = {
            span_id: annotations(phoenix_server, span_id) for span_id in (grounded, fabricated)
        }
        if all(len(items) == 2 for items in found.values()):
            break
        time.sleep(0.5)
    assert all(len(items) == 2 for items in found.values()), found
    by_name = {span_id: {a["name"]: a for a in items} for span_id, items in found.items()}
    good = by_name[grounded]["groundedness"]
    bad = by_name[fabricated]["groundedness"]
    assert good["result"]["score"] == 1.0 and bad["result"]["score"] == 0.0
    # Labels follow the judge that made them: the offline judge labels faithfulness and
    # scores groundedness unlabelled.
    assert good["result"].get("label") is None and bad["result"].get("label") is None
    assert by_name[grounded]["faithfulness"]["result"]["label"] == "pass"
    assert by_name[fabricated]["faithfulness"]["result"]["label"] == "fail"
    assert good["annotator_kind"] == "CODE"
    assert good["identifier"] == "ragpulse"
    assert bad["result"]["explanation"]


def test_an_unreachable_phoenix_is_counted_not_raised() -> None:
    from opentelemetry.trace import SpanContext

    from ragpulse.evaluation.types import EvalStatus, Evaluation, MetricResult, RagRecord
    from ragpulse.outputs.phoenix import PhoenixAnnotations

    hook = PhoenixAnnotations("http://127.0.0.1:9", timeout=1.0, retry_seconds=0)
    record = RagRecord("q", (), "a", span_context=SpanContext(1, 2, is_remote=False))
    evaluation = Evaluation(
        status=EvalStatus.OK, metrics={"groundedness": MetricResult("groundedness", 0.5)}
    )
    hook(record, evaluation)
    assert hook.flush(timeout=10)
    hook.shutdown()
    stats = hook.stats
    assert (stats.sent, stats.failed_batches, stats.queued) == (0, 1, 0)
