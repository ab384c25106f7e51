"""``ragpulse eval`` on trace files: OTLP-JSON lines written by ``configure()``'s file output
and by a Collector-style ``file`` exporter, judged again one result per evaluation unit, the
units ``ragpulse serve`` judges live; ``--write-spans`` writes the evaluated spans back."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from tests.integration.agents import (
    GENAI_MODES,
    GROUNDED,
    MADE_UP,
    QUESTION,
    WATER_QUESTION,
    instrumented,
    lookup,
    require,
    run_session,
    run_turn,
    search_both,
    search_down,
    search_warranty,
)
from tests.integration.test_configure import run_app
from tests.servers.chat_server import ChatServer, Reply

from ragpulse import errors, semconv
from ragpulse.evaluation.diagnosis import TOOL_FAILURE
from ragpulse.metrics import ALL_METRICS
from servers.otlp_files import spans_line, write_received
from servers.otlp_recorder import OtlpRecorder
from servers.rag_traces import rag_trace
from servers.rotel_sink import RotelSink
from servers.serve_process import ExportedSpan, ServeProcess, read_spans

pytestmark = pytest.mark.integration


def _eval(*args: str | Path) -> CompletedProcess[str]:
    command = [sys.executable, "-m", "ragpulse.cli", "eval", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def _results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _score(span: ExportedSpan, metric: str) -> float | None:
    value = span.attributes.get(f"ragpulse.eval.{metric}.score")
    return None if value is None else float(value)


# --- configure()'s own file ------------------------------------------------------------------


@pytest.fixture(scope="module")
def configure_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace file a ``configure()``-d app with ragpulse's decorators wrote (two @rag units,
    scored live by the in-process judge)."""
    workdir = tmp_path_factory.mktemp("app")
    run_app("fresh", {"RAGPULSE_OUTPUT_FILE": str(workdir / "traces.jsonl")}, cwd=workdir)
    return workdir / "traces.jsonl"


def test_a_configure_file_is_judged_again_one_result_per_rag_unit(
    configure_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(configure_file, "--output", out)

    assert done.returncode == 0, done.stderr
    live = {s.span_id: s for s in read_spans(configure_file) if s.name == "support-bot"}
    rows = _results(out)
    assert sorted(r["span_id"] for r in rows) == sorted(live)
    for row in rows:
        span = live[row["span_id"]]
        assert row["trace_id"] == span.trace_id
        assert row["id"] == f"{span.trace_id}/{span.span_id}"
        # The same judge gives the scores the app's own process wrote on the span.
        for metric in ("faithfulness", "groundedness"):
            assert row["scores"][metric] == _score(span, metric)
    assert "2 evaluation units" in done.stderr


def test_written_spans_carry_their_scores_to_a_real_otlp_receiver(
    configure_file: Path, tmp_path: Path, rotel_sink: RotelSink
) -> None:
    out, judged = tmp_path / "out.jsonl", tmp_path / "judged.jsonl"
    done = _eval(configure_file, "--output", out, "--write-spans", judged)
    assert done.returncode == 0, done.stderr

    for line in judged.read_text(encoding="utf-8").splitlines():
        # Each line one export request in OTLP/JSON, sent as it is.
        response = httpx.post(
            rotel_sink.http_traces_endpoint,
            content=line,
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
    rows = {r["span_id"]: r for r in _results(out)}
    received = rotel_sink.wait_for_spans(
        lambda spans: sum(s.name == "support-bot" for s in spans) == len(rows)
    )
    units = [s for s in received if s.name == "support-bot"]
    for span in units:
        row = rows[span.span_id]
        assert span.attributes[semconv.EVAL_STATUS] == row["status"]
        assert span.attributes["ragpulse.eval.groundedness.score"] == row["scores"]["groundedness"]
    retrievals = [s for s in received if s.name != "support-bot"]
    assert retrievals, "the retrieval spans leave with their documents' scores"
    assert all(
        any(key.startswith(semconv.EVAL_DOCUMENTS_PREFIX) for key in s.attributes)
        for s in retrievals
    )


# --- a Collector's file of third-party instrumentations --------------------------------------

openai = require("openai")
require("openinference.instrumentation.openai")
require("opentelemetry.instrumentation.openai")
require("opentelemetry.instrumentation.openai_v2")


def _app(*endpoints: str) -> tuple[TracerProvider, LoggerProvider]:
    """The app's providers: spans and log records over OTLP/HTTP to each endpoint, as they
    end (a Collector, serve)."""
    provider = TracerProvider()
    logs = LoggerProvider()
    for endpoint in endpoints:
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
        )
        logs.add_log_record_processor(
            SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs"))
        )
    return provider, logs


def _shutdown(providers: tuple[TracerProvider, LoggerProvider]) -> None:
    provider, logs = providers
    logs.shutdown()
    provider.shutdown()


TURNS = [
    (search_warranty, (lookup(), Reply.text(GROUNDED))),
    (search_warranty, (lookup(), Reply.text(MADE_UP))),
    (search_down, (lookup(), Reply.text(MADE_UP))),
    (search_warranty, (Reply.text(MADE_UP),)),
]


def _run_turns(which: str, providers: tuple[TracerProvider, LoggerProvider]) -> None:
    provider, logs = providers
    with ChatServer() as server, instrumented(which, provider, logs) as instrumentation:
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        for search, replies in TURNS:
            server.script(*replies)
            run_turn(
                client, provider, instrumentation, [], QUESTION, search,
                conversation=f"file-{which}",
            )  # fmt: skip


def _run_session(which: str, providers: tuple[TracerProvider, LoggerProvider]) -> None:
    provider, logs = providers
    with ChatServer() as server, instrumented(which, provider, logs) as instrumentation:
        server.script(
            lookup(),
            Reply.text(GROUNDED),
            lookup("call_water", "X200 water damage"),
            Reply.text("Yes, water damage is covered by a 5-year warranty."),
        )
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        run_session(
            client, provider, instrumentation,
            [(QUESTION, search_both), (WATER_QUESTION, search_both)],
            conversation=f"file-session-{which}",
        )  # fmt: skip


@pytest.mark.parametrize(
    "which", ["openinference", "openllmetry", "openllmetry-events", *GENAI_MODES]
)
def test_a_collector_file_of_agent_turns_is_judged_on_their_tool_results(
    which: str, tmp_path: Path
) -> None:
    # The GenAI instrumentation's event modes put the messages in log records only: the file
    # holds them as the lines of logs a Collector's file exporter writes beside the spans.
    with OtlpRecorder() as recorder:
        app = _app(recorder.url)
        _run_turns(which, app)
        _shutdown(app)
        traces = write_received(tmp_path / "collector.jsonl", recorder.received())
    out = tmp_path / "out.jsonl"

    done = _eval(traces, "--output", out)

    assert done.returncode == 0, done.stderr
    rows = _results(out)
    # OpenLLMetry's events record no tools offered: an answer without a tool call is no agent's.
    assert len(rows) == (3 if which == "openllmetry-events" else 4)
    grounded, made_up, failed, *rest = rows
    assert grounded["status"] == "ok"
    assert grounded["scores"]["faithfulness"] == 1.0
    assert grounded["conversation_id"] == f"file-{which}"
    assert made_up["scores"]["faithfulness"] < 0.5
    assert failed["diagnosis"] == TOOL_FAILURE
    for no_evidence in rest:
        assert no_evidence["status"] == "skipped"
        assert no_evidence["error_type"] == errors.NO_EVIDENCE


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with ServeProcess(tmp_path_factory.mktemp("serve"), "--sample-rate", "1") as serve:
        yield serve


@pytest.mark.parametrize(
    "which", ["openinference", "openllmetry", "openllmetry-events", "genai-event_only"]
)
def test_a_file_gives_the_units_and_scores_serve_gives_live(
    which: str, serve: ServeProcess, tmp_path: Path
) -> None:
    with OtlpRecorder() as recorder:
        # The same spans and log records, as the app exports them, to serve and to the file.
        app = _app(serve.http_endpoint, recorder.url)
        _run_turns(which, app)
        _run_session(which, app)
        _shutdown(app)
        traces = write_received(tmp_path / "collector.jsonl", recorder.received())
    out = tmp_path / "out.jsonl"
    done = _eval(traces, "--output", out)
    assert done.returncode == 0, done.stderr
    rows = {(r["trace_id"], r["span_id"]): r for r in _results(out)}
    # The session's two answers are two units; OpenLLMetry's events make the answer without a
    # tool call no agent's (no tools offered), in serve as in the file.
    assert len(rows) == len(TURNS) + 2 - (which == "openllmetry-events")
    trace_ids = {trace_id for trace_id, _ in rows}

    def judged(spans: list[ExportedSpan]) -> dict[tuple[str, str], ExportedSpan]:
        return {
            (s.trace_id, s.span_id): s
            for s in spans
            if s.trace_id in trace_ids and s.attributes.get(semconv.EVAL_STATUS)
        }

    live = judged(serve.wait_for_spans(lambda spans: len(judged(spans)) >= len(rows)))
    assert set(live) == set(rows)
    for key, row in rows.items():
        span = live[key]
        assert row["status"] == span.attributes[semconv.EVAL_STATUS]
        for metric in ALL_METRICS:
            assert row["scores"][metric] == _score(span, metric), (key, metric)


# --- what eval says about bad and empty files --------------------------------------------------


TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736


def test_malformed_lines_are_reported_by_number_and_the_units_still_judged(
    tmp_path: Path,
) -> None:
    lines = [spans_line(rag_trace(TRACE)), "{not json", spans_line(rag_trace(TRACE + 1))]
    traces = tmp_path / "traces.jsonl"
    traces.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"

    done = _eval(traces, "--output", out, "--max-errors", "1")

    assert done.returncode == 0, done.stderr
    assert "line 2: not JSON" in done.stderr
    rows = _results(out)
    assert [r["status"] for r in rows] == ["ok", "error", "ok"]
    assert rows[1]["error_type"] == "invalid_input"
    assert _eval(traces, "--output", out).returncode == 3  # --max-errors 0 by default


def test_an_empty_file_says_so_and_exits_as_for_records(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")

    done = _eval(empty)

    assert done.returncode == 0
    assert "holds no records: nothing was evaluated" in done.stderr


def test_a_trace_file_without_units_says_so(tmp_path: Path) -> None:
    _root, retriever = rag_trace(TRACE)
    traces = tmp_path / "traces.jsonl"
    traces.write_text(spans_line([retriever]) + "\n", encoding="utf-8")

    done = _eval(traces, "--input", "traces")

    assert done.returncode == 0
    assert "holds no evaluation unit: nothing was evaluated" in done.stderr


def test_write_spans_refuses_a_records_file(tmp_path: Path) -> None:
    records = tmp_path / "in.jsonl"
    records.write_text(json.dumps({"contexts": ["a"], "answer": "a"}) + "\n", encoding="utf-8")

    done = _eval(records, "--write-spans", tmp_path / "spans.jsonl")

    assert done.returncode == 2
    assert "--write-spans" in done.stderr and "holds records" in done.stderr


def test_a_file_written_with_content_capture_off_says_its_units_carry_no_text(
    tmp_path: Path,
) -> None:
    traces = tmp_path / "traces.jsonl"
    run_app(
        "fresh",
        {"RAGPULSE_OUTPUT_FILE": str(traces), "RAGPULSE_CAPTURE_CONTENT": "false"},
        cwd=tmp_path,
    )

    done = _eval(traces, "--output", tmp_path / "out.jsonl")

    assert done.returncode == 0, done.stderr
    assert "2 @rag units carry no text to judge" in done.stderr
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == ""


def test_a_trace_file_on_stdin_is_told_from_records_by_its_first_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "eval", "-"],
        input=spans_line(rag_trace(TRACE)) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in done.stdout.splitlines()]
    assert row["trace_id"] == format(TRACE, "032x")


@pytest.mark.parametrize("which", ["genai-events", "genai-event_only"])
def test_log_records_written_apart_are_read_with_their_spans_given_as_logs(
    which: str, tmp_path: Path
) -> None:
    # configure() writes the log records in a file of their own (-logs.jsonl): the same run,
    # its spans and its logs split into two files, is judged as the file holding both is.
    with OtlpRecorder() as recorder:
        app = _app(recorder.url)
        _run_turns(which, app)
        _shutdown(app)
        both = write_received(tmp_path / "both.jsonl", recorder.received())
    lines = both.read_text(encoding="utf-8").splitlines(keepends=True)
    spans, logs = tmp_path / "traces.jsonl", tmp_path / "traces-logs.jsonl"
    spans.write_text("".join(line for line in lines if '"resourceSpans"' in line), "utf-8")
    logs.write_text("".join(line for line in lines if '"resourceLogs"' in line), "utf-8")

    together, apart, alone = (tmp_path / name for name in ("1.jsonl", "2.jsonl", "3.jsonl"))
    assert _eval(both, "--output", together).returncode == 0
    done = _eval(spans, "--logs", logs, "--output", apart)
    assert done.returncode == 0, done.stderr
    assert _eval(spans, "--output", alone).returncode == 0

    def judged(path: Path) -> list[tuple[object, ...]]:
        return [
            (r["status"], r["scores"].get("faithfulness"), r.get("diagnosis"))
            for r in _results(path)
        ]

    assert judged(apart) == judged(together)
    assert judged(apart)[0] == ("ok", 1.0, "ok")
    # Without them the messages are not there to read.
    assert judged(alone) != judged(together)


def test_logs_given_with_a_records_file_are_a_usage_error(tmp_path: Path) -> None:
    records = tmp_path / "answers.jsonl"
    records.write_text('{"question": "q", "contexts": ["c"], "answer": "a"}\n', "utf-8")
    done = _eval(records, "--logs", records, "--output", tmp_path / "out.jsonl")
    assert done.returncode == 2
    assert "--logs" in done.stderr and "trace file" in done.stderr
