"""A secret planted in the answer and reference appears in no byte ragpulse exports.

A real app process runs ``ragpulse.configure`` with ``capture_content=False`` or a
``redact=`` hook; what it exports is read back whole: the OTLP-JSON trace, log and
metric files (exemplars included), what the rotel collector received over OTLP, the
Phoenix annotation records from Phoenix's own REST API, and the process's stdout and
stderr. A judge whose upstream answers 401 with the API key in its message shows that
credentials are scrubbed the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from servers.chat_server import ChatServer, Reply
from servers.phoenix import PhoenixServer
from servers.rotel_sink import RotelSink

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SSN = "078-05-1120"
CARD = "4929123456789012"
SECRET_PATTERN = r"\d{3}-\d{2}-\d{4}|\d{16}"
# Where a quote cut to a few dozen characters would end inside the card number.
CARD_SENTENCE = f"The customer who called support on Tuesday about a refund paid with card {CARD}"
API_KEY = "azure0f3c9b7e2d4a6c8e0f1a3b5c7d9e1f2a"  # a configured key with no tell-tale shape
OTHER_KEY = "sk-proj-Zx81LmQ4tR7vB2nK9pW3"

APP = textwrap.dedent(
    """
    import json, re, sys
    from opentelemetry import trace
    import ragpulse

    cfg = json.loads(sys.argv[1])
    secret = cfg["secret"]
    options = {}
    if cfg["policy"] == "off":
        options["capture_content"] = False
    else:
        options["content"] = ragpulse.ContentOptions(
            redact=lambda text: re.sub(cfg["pattern"], "[SSN]", text)
        )
    hook = None
    if cfg.get("phoenix"):
        from ragpulse.outputs.phoenix import PhoenixAnnotations
        hook = PhoenixAnnotations(cfg["phoenix"])
    judge = None
    if cfg.get("judge_url"):
        from ragpulse.judges.llm.openai import OpenAIJudge
        judge = OpenAIJudge(model="judge", base_url=cfg["judge_url"], api_key=cfg["api_key"])
    handle = ragpulse.configure(
        service_name="privacy",
        endpoint=cfg.get("endpoint"),
        output_file=cfg.get("output_file"),
        judge=judge,
        on_evaluation=hook,
        evaluation=ragpulse.EvaluationOptions(inline_annotations=True),
        # a bound for a hang: the judge's process may start slowly
        bounds=ragpulse.BoundsOptions(shutdown_timeout=120),
        **options,
    )

    @ragpulse.retrieval
    def search(question):
        return [f"Customer file: Ann Lee, social security number {secret}, account opened 2019."]

    ids = []

    @ragpulse.rag(name="privacy")
    def handle_request(question):
        search(question)
        ragpulse.record_reference(f"Ann Lee's social security number is {secret}.")
        ids.append(format(trace.get_current_span().get_span_context().span_id, "016x"))
        return (
            f"Ann Lee's social security number is {secret}. "
            "Her account was opened in 2023 in Paris."
        )

    handle_request("What is Ann Lee's social security number?")

    @ragpulse.rag(name="card")
    def card_request(question):
        search(question)
        ragpulse.record_reference(cfg["card_sentence"] + " and opened the account in 2019.")
        return cfg["card_sentence"] + ". Her account was opened in 2023 in Paris."

    card_request("Which card did the customer pay with?")

    @ragpulse.retrieval
    def lookup(question):
        raise LookupError(f"no customer with number {secret}; key {cfg['other_key']} refused")

    try:
        lookup("Who is 078?")
    except LookupError:
        pass
    # Generous: on a busy machine the judge's first evaluations take seconds, more than
    # half the default shutdown_timeout; shutdown returns as soon as they are delivered.
    handle.shutdown(timeout=60)
    print(json.dumps({"ids": ids, "stats": vars(hook.stats) if hook else None}))
    """
)


def _run_app(tmp_path: Path, **cfg: Any) -> tuple[dict[str, Any], str]:
    """Run the app; returns its last stdout line as JSON and everything it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OPENAI_API_KEY", "PHOENIX_API_KEY"):
        env.pop(name, None)
    config = {
        "secret": SSN,
        "pattern": SECRET_PATTERN,
        "card_sentence": CARD_SENTENCE,
        "other_key": OTHER_KEY,
        **cfg,
    }
    done = subprocess.run(
        [sys.executable, "-c", APP, json.dumps(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


def _exported_files(tmp_path: Path, **cfg: Any) -> tuple[dict[str, bytes], str]:
    _, printed = _run_app(tmp_path, output_file=str(tmp_path / "out-traces.jsonl"), **cfg)
    files = {
        signal: (tmp_path / f"out-{signal}.jsonl").read_bytes()
        for signal in ("traces", "logs", "metrics")
    }
    return files, printed


def _spans(traces: bytes) -> list[dict[str, Any]]:
    found = []
    for line in traces.decode().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                found.extend(scope["spans"])
    return found


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def _rag_attributes(traces: bytes) -> dict[str, Any]:
    (span,) = [s for s in _spans(traces) if s["name"] == "privacy"]
    return _attributes(span)


@pytest.mark.parametrize("policy", ["off", "redact"])
def test_planted_secret_is_in_no_exported_trace_log_or_metric_byte(
    tmp_path: Path, policy: str
) -> None:
    files, printed = _exported_files(tmp_path, policy=policy)
    for signal, data in files.items():
        assert SSN.encode() not in data, f"{signal} file carries the planted secret"
    assert SSN not in printed
    # The evaluation did happen and went out: scores, claims, events and exemplars.
    attributes = _rag_attributes(files["traces"])
    assert attributes["ragpulse.eval.status"] == "ok"
    assert attributes["ragpulse.eval.groundedness.score"] == 0.5
    assert json.loads(attributes["ragpulse.eval.claims"])
    assert b"gen_ai.evaluation.result" in files["logs"]
    assert b"ragpulse.evaluation.score" in files["metrics"]
    assert b'"exemplars"' in files["metrics"] and b'"spanId"' in files["metrics"]


@pytest.mark.parametrize("policy", ["off", "redact"])
def test_an_exception_message_leaves_under_the_content_policy(tmp_path: Path, policy: str) -> None:
    files, _ = _exported_files(tmp_path, policy=policy)
    (span,) = [s for s in _spans(files["traces"]) if s["name"] == "retrieval lookup"]
    (event,) = span["events"]
    exported = json.dumps(span)
    assert SSN not in exported
    assert OTHER_KEY not in exported
    assert _attributes(event)["exception.type"] == "LookupError"
    assert span["status"]["code"] == 2  # STATUS_CODE_ERROR: OTLP/JSON writes enums as integers
    if policy == "redact":
        assert "no customer with number [SSN]" in _attributes(event)["exception.message"]


@pytest.mark.parametrize("policy", ["off", "redact"])
def test_a_secret_that_a_quote_would_cut_in_half_is_redacted_whole(
    tmp_path: Path, policy: str
) -> None:
    files, printed = _exported_files(tmp_path, policy=policy)
    for signal, data in files.items():
        assert CARD[:6].encode() not in data, f"{signal} file carries the card's first digits"
    assert CARD[:6] not in printed


def test_without_content_claims_keep_offsets_and_lengths_only(tmp_path: Path) -> None:
    files, _ = _exported_files(tmp_path, policy="off")
    attributes = _rag_attributes(files["traces"])
    claims = json.loads(attributes["ragpulse.eval.claims"])
    assert [c["text"] for c in claims] == ["[withheld: 48 chars]", "[withheld: 40 chars]"]
    assert claims[0]["start"] is not None
    explanation = attributes["ragpulse.eval.groundedness.explanation"]
    assert "#2 CONTRADICTED (answer chars 49-89)" in explanation


def test_with_a_redact_hook_explanations_name_failing_claims_in_redacted_form(
    tmp_path: Path,
) -> None:
    files, _ = _exported_files(tmp_path, policy="redact")
    attributes = _rag_attributes(files["traces"])
    claims = json.loads(attributes["ragpulse.eval.claims"])
    assert claims[0]["text"] == "Ann Lee's social security number is [SSN]."
    for key in ("ragpulse.eval.groundedness.explanation", "annotations.1.annotation.explanation"):
        assert '#2 CONTRADICTED "Her account was opened in 2023 in Paris."' in attributes[key]


def test_planted_secret_is_in_nothing_the_collector_received_over_otlp(
    tmp_path: Path, rotel_sink: RotelSink
) -> None:
    _, printed = _run_app(tmp_path, policy="off", endpoint=rotel_sink.http_endpoint)
    rotel_sink.wait_for_span(lambda s: s.name == "privacy")
    rotel_sink.wait_for_logs(lambda logs: len(logs) >= 1)
    spans, logs = rotel_sink.spans_file.read_bytes(), rotel_sink.logs_file.read_bytes()
    assert b"ragpulse.eval.groundedness.score" in spans
    assert b"gen_ai.evaluation.result" in logs
    assert SSN.encode() not in spans
    assert SSN.encode() not in logs
    assert SSN not in printed


@pytest.fixture
def unauthorised_judge() -> Iterator[ChatServer]:
    """A judge endpoint that refuses the key and quotes it back, as some proxies do."""
    message = (
        f"Incorrect API key provided: {API_KEY}. Header was 'Authorization: Bearer "
        f"{API_KEY}'; the fallback key {OTHER_KEY} is revoked too."
    )
    server = ChatServer(responder=lambda _body: Reply.failure(401, message, code="invalid_api_key"))
    with server:
        yield server


def test_a_judge_error_message_leaves_without_the_api_key(
    tmp_path: Path, unauthorised_judge: ChatServer
) -> None:
    files, printed = _exported_files(
        tmp_path, policy="redact", judge_url=unauthorised_judge.url, api_key=API_KEY
    )
    assert unauthorised_judge.request_count >= 1
    exported = b"".join(files.values()).decode() + printed
    assert API_KEY not in exported
    assert OTHER_KEY not in exported
    assert "Incorrect API key provided: [redacted secret]" in files["logs"].decode()
    assert _rag_attributes(files["traces"])["ragpulse.eval.error.type"] == "auth_error"


def _phoenix_annotations(phoenix: PhoenixServer, span_id: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{phoenix.base_url}/v1/projects/default/span_annotations",
        params={"span_ids": span_id},
        timeout=10,
    )
    if response.status_code == 404:  # the span itself has not been ingested yet
        return []
    response.raise_for_status()
    return list(response.json()["data"])


@pytest.mark.phoenix
@pytest.mark.parametrize("policy", ["off", "redact"])
def test_phoenix_annotations_carry_no_planted_secret_and_name_the_failing_claim(
    tmp_path: Path, phoenix_server: PhoenixServer, policy: str
) -> None:
    result, printed = _run_app(
        tmp_path,
        policy=policy,
        endpoint=phoenix_server.otlp_http_endpoint,
        phoenix=phoenix_server.base_url,
    )
    # Two evaluated requests (the SSN one and the card one), three metrics each.
    assert result["stats"]["sent"] == 6 and result["stats"]["dropped"] == 0
    (span_id,) = result["ids"]
    deadline = time.monotonic() + 60
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline and len(found) < 3:
        found = _phoenix_annotations(phoenix_server, span_id)
        time.sleep(0.5)
    assert len(found) == 3, found
    assert SSN not in json.dumps(found)
    stored = phoenix_server.wait_for_span(
        span_id, lambda s: "ragpulse.eval.status" in s["attributes"]
    )
    assert SSN not in json.dumps(stored)
    assert SSN not in printed
    by_name = {a["name"]: a for a in found}
    explanation = by_name["faithfulness"]["result"]["explanation"]
    expected = (
        "#2 CONTRADICTED (answer chars 49-89)"
        if policy == "off"
        else '#2 CONTRADICTED "Her account was opened in 2023 in Paris."'
    )
    assert expected in explanation
