"""What ``ragpulse serve`` writes obeys the content policy: no text when capture is off,
redaction patterns applied to every text it adds."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse import semconv
from servers.rag_traces import post_spans, rag_trace
from servers.serve_process import ExportedSpan, ServeProcess

pytestmark = pytest.mark.integration

SSN = "123-45-6789"
DOCUMENT = f"The customer's SSN is {SSN} and the Eiffel Tower is 330 metres tall."
ANSWER = f"The SSN on file is {SSN}; the Eiffel Tower is 42 metres tall."


def _evaluate_planted_trace(serve: ServeProcess) -> list[ExportedSpan]:
    spans = rag_trace(0x55, document=DOCUMENT, answer=ANSWER)
    assert post_spans(serve.http_endpoint, spans).status_code == 200
    serve.wait_for_spans(lambda spans: any(semconv.EVAL_STATUS in s.attributes for s in spans))
    # Draining flushes the log events and metrics too.
    assert serve.terminate() == 0
    return serve.spans()


def _written_by_serve(span: ExportedSpan) -> str:
    return repr({k: v for k, v in span.attributes.items() if k.startswith(semconv.EVAL_PREFIX)})


def test_with_content_capture_off_nothing_serve_writes_carries_a_text(tmp_path: Path) -> None:
    env = {"RAGPULSE_CAPTURE_CONTENT": "false"}
    serve = ServeProcess(tmp_path, "--sample-rate", "1", env=env).start()
    try:
        spans = _evaluate_planted_trace(serve)
    finally:
        serve.stop()
    (unit,) = [s for s in spans if semconv.EVAL_STATUS in s.attributes]
    logs = (tmp_path / "serve-logs.jsonl").read_text()

    assert unit.attributes[semconv.EVAL_STATUS] == "ok"
    assert "gen_ai.evaluation.result" in logs
    for text in (SSN, "42 metres", "330 metres"):
        assert text not in _written_by_serve(unit)
        assert text not in logs


def test_redact_patterns_apply_to_every_text_serve_writes(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path, "--sample-rate", "1", "--redact-pattern", r"\d{3}-\d{2}-\d{4}"
    ).start()
    try:
        spans = _evaluate_planted_trace(serve)
    finally:
        serve.stop()
    (unit,) = [s for s in spans if semconv.EVAL_STATUS in s.attributes]
    logs = (tmp_path / "serve-logs.jsonl").read_text()

    assert SSN not in _written_by_serve(unit)
    assert SSN not in logs
    assert "[REDACTED]" in unit.attributes[semconv.EVAL_CLAIMS]
    # Texts the pattern does not match are still written.
    assert "42 metres" in unit.attributes[semconv.EVAL_CLAIMS]
