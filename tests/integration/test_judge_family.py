"""Out-of-family judging, end to end: the real OpenAI judge (against the local chat
server) judges an app whose ``@generation`` names its model; the unit span and the log
events carry the judge's model and whether it is of the generator's family, a warning
says so once, and ``ragpulse calibrate`` prints it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.servers.chat_server import ChatServer

import ragpulse
from ragpulse import semconv
from ragpulse.judges.llm.openai import OpenAIJudge
from ragpulse.outputs.files import FileSpanExporter
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.report import load_runs
from ragpulse.sampling import EvalSampler

ROOT = Path(__file__).resolve().parents[2]
PASSAGE = "Support is open from 9am to 5pm on weekdays."


@pytest.fixture(scope="module")
def server() -> Iterator[ChatServer]:
    with ChatServer(mode="echo-judge") as chat_server:
        yield chat_server


def app(generator: str) -> Any:
    @ragpulse.generation(model=generator)
    def generate(question: str, passages: list[str]) -> str:
        return "Support is open from 9am to 5pm on weekdays."

    @ragpulse.rag(name="family-bot")
    def answer(question: str) -> str:
        ragpulse.record_contexts([PASSAGE])
        return generate(question, [PASSAGE])

    return answer


def judged(route_spans: Any, server: ChatServer, judge: str, generator: str) -> tuple[Any, Any]:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(spans),
        judge=OpenAIJudge(judge, base_url=server.url, api_key="k"),
        sampler=EvalSampler(rate=1.0),
        logger_provider=logger_provider,
    )
    route_spans(processor)
    app(generator)("When is support open?")
    assert processor.force_flush(60_000)
    [unit] = [s for s in spans.get_finished_spans() if s.name == "family-bot"]
    events = [
        r.log_record
        for r in logs.get_finished_logs()
        if r.log_record.event_name == semconv.GEN_AI_EVALUATION_RESULT_EVENT
    ]
    return unit.attributes or {}, events


def test_a_judge_of_the_generators_family_is_marked_on_the_span_and_events_and_warned_once(
    route_spans: Any, server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragpulse.processor.settle"):
        attributes, events = judged(route_spans, server, "gpt-4o", "gpt-4o-mini")
        judged(route_spans, server, "gpt-4o", "gpt-4o-mini")
    assert attributes[semconv.EVAL_STATUS] == "ok"
    assert attributes[semconv.EVAL_JUDGE_MODEL] == "gpt-4o"
    assert attributes[semconv.EVAL_JUDGE_SAME_FAMILY] is True
    assert events
    for event in events:
        assert (event.attributes or {})[semconv.EVAL_JUDGE_SAME_FAMILY] is True
        assert (event.attributes or {})[semconv.EVAL_JUDGE_MODEL] == "gpt-4o"
    warned = [r for r in caplog.records if "same family as the generator" in r.getMessage()]
    assert len(warned) == 1 and "gpt-4o-mini" in warned[0].getMessage()


def test_a_judge_of_another_family_is_marked_false(route_spans: Any, server: ChatServer) -> None:
    attributes, events = judged(route_spans, server, "gpt-4o", "claude-3-5-sonnet-20240620")
    assert attributes[semconv.EVAL_JUDGE_SAME_FAMILY] is False
    assert all((e.attributes or {})[semconv.EVAL_JUDGE_SAME_FAMILY] is False for e in events)


def test_the_report_shows_the_judges_model_and_the_same_family_warning(
    route_spans: Any, server: ChatServer, tmp_path: Path
) -> None:
    path = tmp_path / "traces.jsonl"
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(FileSpanExporter(path)),
        judge=OpenAIJudge("gpt-4o", base_url=server.url, api_key="k"),
        sampler=EvalSampler(rate=1.0),
    )
    route_spans(processor)
    app("gpt-4o-mini")("When is support open?")
    assert processor.force_flush(60_000)
    (run,) = load_runs([path])
    (request,) = run.requests
    assert request.judge is not None and "(model gpt-4o)" in request.judge
    assert "same family as the generator" in request.judge
    assert request.slices["judge_family"] == "same as generator"


def test_calibrate_prints_how_many_records_a_same_family_judge_scored(
    server: ChatServer, tmp_path: Path
) -> None:
    labelled = tmp_path / "labelled.jsonl"
    rows = [
        {"contexts": [PASSAGE], "answer": "Support is open from 9am to 5pm on weekdays.",
         "hallucinated": False, "generator_model": "gpt-4o-mini"},
        {"contexts": [PASSAGE], "answer": "Support is open on Sundays.", "hallucinated": True,
         "generator_model": "gpt-4o-mini"},
        {"contexts": [PASSAGE], "answer": "Support is open at noon.", "hallucinated": True,
         "generator_model": "claude-3-haiku"},
    ]  # fmt: skip
    labelled.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "calibrate", str(labelled), "--judge", "openai",
         "--model", "gpt-4o", "--base-url", server.url, "--api-key", "k",
         "--output", str(tmp_path / "calibration.json")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("judge model:")]
    assert line.startswith("judge model: gpt-4o; SAME FAMILY as the generator on 2 of 3 records")
