"""``python -m ragpulse.demo`` run for real in a subprocess: exit code, report, telemetry.

The printed detection counts are checked against ground truth rebuilt from the
exported spans alone: an answer that differs from what the clean extractive
generator writes for its question carries an injected fault.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragpulse import semconv
from ragpulse.demo.app import APP_NAME
from ragpulse.demo.generator import (
    CHAT_SYSTEM_PROMPT,
    ExtractiveGenerator,
    FaultKind,
    Source,
    Style,
    cite,
    plan_faults,
    restate,
)
from ragpulse.demo.retriever import Bm25Retriever
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import (
    CITATION,
    COMPLETENESS,
    CORRECTNESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    RELEVANCY,
)
from ragpulse.judges._labels import label_thresholds
from ragpulse.metrics import METRICS
from servers.chat_server import ChatServer, Reply, assistant_reply

pytestmark = pytest.mark.integration

REQUESTS = 30
SEED = 3
DECLARED = label_thresholds("lexical")
"""Each metric's own threshold, as its module declares it: what the demo reads by default."""


@dataclass(frozen=True)
class DemoRun:
    proc: subprocess.CompletedProcess[str]
    traces: Path
    logs: Path
    prometheus_port: int

    @property
    def result(self) -> dict[str, int]:
        lines = [line for line in self.proc.stdout.splitlines() if line.startswith("RESULT ")]
        assert len(lines) == 1, self.proc.stdout
        return {k: int(v) for k, v in (pair.split("=") for pair in lines[0].split()[1:])}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(
    cwd: Path, *args: str, command: tuple[str, ...] = ("-m", "ragpulse.demo")
) -> subprocess.CompletedProcess[str]:
    # Offline and file-based whatever the developer's shell exports.
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "OPENAI_", "RAGPULSE_"))
    }
    return subprocess.run(
        [sys.executable, *command, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    workdir = tmp_path_factory.mktemp("demo")
    port = _free_port()
    proc = _run(
        workdir,
        "--requests",
        str(REQUESTS),
        "--seed",
        str(SEED),
        "--no-table",
        "--output-file",
        "telemetry/demo-traces.jsonl",
        "--prometheus-port",
        str(port),
    )
    telemetry = workdir / "telemetry"
    return DemoRun(proc, telemetry / "demo-traces.jsonl", telemetry / "demo-logs.jsonl", port)


def _payloads(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def _value(attribute: dict[str, Any]) -> Any:
    value = attribute["value"]
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    return None


def _rag_spans(path: Path) -> list[dict[str, Any]]:
    spans = []
    for payload in _payloads(path):
        for resource in payload.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    attributes = {a["key"]: _value(a) for a in span.get("attributes", [])}
                    if attributes.get(semconv.RAG_NAME) == APP_NAME:
                        spans.append(attributes)
    return spans


def test_some_answers_come_from_a_tool_calling_agent_in_conversations(demo: DemoRun) -> None:
    units = _rag_spans(demo.traces)
    agent = [u for u in units if semconv.RAG_TOOL_CALLS in u]
    assert 0 < len(agent) < len(units)
    # Its turns belong to conversations, and each judged one was scored against its tool.
    assert all(u.get(semconv.GEN_AI_CONVERSATION_ID, "").startswith("session-") for u in agent)
    judged = [u for u in agent if semconv.RAG_TOOLS_FAILED not in u]
    assert judged and all(u[semconv.EVAL_STATUS] == "ok" for u in judged)


def test_demo_exits_zero(demo: DemoRun) -> None:
    assert demo.proc.returncode == 0, demo.proc.stderr


def test_demo_evaluates_every_request(demo: DemoRun) -> None:
    assert demo.result["requests"] == REQUESTS
    assert demo.result["evaluated"] == REQUESTS
    assert demo.result["unjudged"] == 0


def test_demo_injects_the_planned_share_of_faults(demo: DemoRun) -> None:
    assert demo.result["faults"] == len(plan_faults(REQUESTS, 0.3, SEED))


def test_detection_counts_add_up(demo: DemoRun) -> None:
    result = demo.result
    assert result["caught"] + result["missed"] == result["faults"]
    assert result["faults"] + result["clean"] + result["unjudged"] == result["requests"]


def test_detection_counts_are_printed_in_the_summary(demo: DemoRun) -> None:
    result = demo.result
    assert (
        f"Injected faults: {result['faults']} evaluated, caught {result['caught']}"
        in demo.proc.stdout
    )
    assert f"missed {result['missed']}" in demo.proc.stdout
    assert f"false alarms {result['false_alarms']}" in demo.proc.stdout


def test_telemetry_file_holds_an_evaluated_span_per_request(demo: DemoRun) -> None:
    spans = _rag_spans(demo.traces)
    assert len(spans) == REQUESTS
    for attributes in spans:
        if attributes[semconv.EVAL_STATUS] == EvalStatus.NO_CLAIMS:
            # An abstention where nothing could answer: no claim to score, a diagnosis still.
            assert attributes[semconv.EVAL_ABSTAINED] and semconv.EVAL_DIAGNOSIS in attributes
            continue
        assert attributes[semconv.EVAL_STATUS] == EvalStatus.OK
        assert isinstance(attributes[semconv.eval_score(GROUNDEDNESS)], float)
        # An injected abstention has no claim; every other answer has some.
        assert attributes[semconv.EVAL_CLAIMS_TOTAL] >= 1 or attributes[semconv.EVAL_ABSTAINED]


def _clean(answer: str) -> set[str]:
    """The answer as the demo's assistant may word it on a clean request."""
    return {restate(answer, style) for style in Style}


def test_printed_detection_matches_ground_truth_rebuilt_from_the_spans(demo: DemoRun) -> None:
    retriever, generator = Bm25Retriever(), ExtractiveGenerator()
    faults = caught = clean_answers = false_alarms = 0
    for attributes in _rag_spans(demo.traces):
        question = attributes[semconv.RAG_QUESTION]
        sources = [Source(p.text, p.document.id) for p in retriever.search(question)]
        generated = generator.generate(question, sources)
        if semconv.RAG_TOOL_CALLS in attributes:
            # The agent's answer: uncited; after a failed tool it stands on nothing.
            failed = bool(attributes.get(semconv.RAG_TOOLS_FAILED))
            drifted = failed or attributes[semconv.RAG_ANSWER] not in _clean(generated)
        else:
            drifted = attributes[semconv.RAG_ANSWER] not in _clean(cite(generated, sources))
        abstained = bool(attributes.get(semconv.EVAL_ABSTAINED))
        # What pages: a fail label the span carries (none where the judge declines one).
        fails = {m for m in METRICS if attributes.get(semconv.eval_label(m)) == "fail"}
        flagged = (
            (
                not abstained
                and (
                    bool(fails & {FAITHFULNESS, GROUNDEDNESS})
                    or attributes[semconv.EVAL_CLAIMS_NOT_FOUND] > 0
                    or attributes[semconv.EVAL_CLAIMS_CONTRADICTED] > 0
                )
            )
            or bool(fails & {RELEVANCY, COMPLETENESS, CITATION})
            or (abstained and bool(attributes.get(semconv.EVAL_ANSWERABLE)))
            or attributes.get(semconv.EVAL_DIAGNOSIS) == "retrieval_miss"
        )
        faults += drifted
        caught += drifted and flagged
        clean_answers += not drifted
        false_alarms += flagged and not drifted
    result = demo.result
    assert (faults, caught, clean_answers, false_alarms) == (
        result["faults"],
        result["caught"],
        result["clean"],
        result["false_alarms"],
    )


def test_correct_answers_with_detail_beyond_the_reference_keep_correctness_high(
    demo: DemoRun,
) -> None:
    # Clean answers are grounded and often say more than their one-sentence reference;
    # the default agreement mode does not count that detail against them.
    retriever, generator = Bm25Retriever(), ExtractiveGenerator()
    clean_scores = []
    for attributes in _rag_spans(demo.traces):
        question = attributes[semconv.RAG_QUESTION]
        sources = [Source(p.text, p.document.id) for p in retriever.search(question)]
        if attributes[semconv.RAG_ANSWER] in _clean(
            cite(generator.generate(question, sources), sources)
        ):
            clean_scores.append(attributes.get(semconv.eval_score(CORRECTNESS)))
    scored = [score for score in clean_scores if score is not None]
    assert len(scored) >= 10
    assert all(score >= 0.7 for score in scored), scored
    assert "Correctness (agreement)" in demo.proc.stdout


def test_evaluation_events_are_written_for_each_request(demo: DemoRun) -> None:
    targets = set()
    for payload in _payloads(demo.logs):
        for resource in payload.get("resourceLogs", []):
            for scope in resource.get("scopeLogs", []):
                for record in scope.get("logRecords", []):
                    if record.get("eventName") == semconv.GEN_AI_EVALUATION_RESULT_EVENT:
                        targets.add(record["spanId"])
    assert len(targets) == REQUESTS


def test_summary_names_the_telemetry_files(demo: DemoRun) -> None:
    assert str(demo.traces.resolve()) in demo.proc.stdout
    scored = sum(1 for a in _rag_spans(demo.traces) if a[semconv.EVAL_STATUS] == EvalStatus.OK)
    assert f"this run wrote {REQUESTS * 3} spans, {scored} of them" in demo.proc.stdout


def test_prometheus_endpoint_is_printed_and_served_scores(demo: DemoRun) -> None:
    url = f"http://127.0.0.1:{demo.prometheus_port}/metrics"
    match = re.search(
        re.escape(url) + r" \(scraped at the end: (\d+) ragpulse_evaluation_score", demo.proc.stdout
    )
    assert match is not None, demo.proc.stdout
    assert int(match.group(1)) > 0


def test_default_run_meets_the_lexical_detection_targets(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--no-table")
    assert proc.returncode == 0, proc.stderr
    result = DemoRun(proc, tmp_path, tmp_path, 0).result
    assert result["caught"] >= 0.8 * result["faults"]
    assert result["false_alarms"] <= 0.1 * result["clean"]


def test_default_run_diagnoses_retrieval_faults_apart_from_generation_faults(
    tmp_path: Path,
) -> None:
    proc = _run(tmp_path, "--no-table")
    assert proc.returncode == 0, proc.stderr
    result = DemoRun(proc, tmp_path, tmp_path, 0).result
    # Wrong or missing passages are the retriever's fault; changed facts the model's.
    assert result["retrieval_faults"] >= 2
    assert result["diagnosed_retrieval_faults"] == result["retrieval_faults"]
    assert result["diagnosed_generation_faults"] >= 0.8 * result["generation_faults"]
    assert result["diagnosed_clean_answers"] >= 0.9 * result["clean_answers"]
    # An agent whose search tool failed: the tool's fault, neither retrieval nor drift.
    assert result["tool_faults"] >= 1
    assert result["diagnosed_tool_faults"] == result["tool_faults"]
    assert re.search(r"^  retrieval faults +retrieval_miss \d+/\d+$", proc.stdout, re.M)


def test_table_has_a_row_per_request(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--requests", "6", "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    rows = re.findall(r"^ *(\d+)(a?) \S", proc.stdout, re.MULTILINE)
    assert [n for n, _ in rows] == [str(i) for i in range(1, 7)]
    # Which way each request was answered: "a" marks the tool-calling agent's answers (one
    # in five), the others are the RAG pipeline's.
    assert 0 < sum(agent == "a" for _, agent in rows) < 6


def test_demo_uses_a_chat_model_and_llm_judge_at_base_url(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> Reply | None:
        # The generator's requests get an extractive answer; the judge's fall
        # through to the server's echo-judge mode.
        messages = body.get("messages", [])
        if messages and messages[0].get("content") == CHAT_SYSTEM_PROMPT:
            return assistant_reply(body)
        return None

    with ChatServer(mode="echo-judge", responder=respond) as server:
        proc = _run(
            tmp_path,
            "--requests",
            "4",
            "--judge",
            "openai",
            "--model",
            "test-model",
            "--base-url",
            server.url,
        )
        bodies = [r.body for r in server.chat_requests]
    assert proc.returncode == 0, proc.stderr
    generator_calls = [b for b in bodies if b["messages"][0]["content"] == CHAT_SYSTEM_PROMPT]
    assert len(generator_calls) == 4
    assert len(bodies) > 4
    result = DemoRun(proc, tmp_path, tmp_path, 0).result
    assert result["evaluated"] == 4


def test_ragpulse_demo_command_runs_the_demo(tmp_path: Path) -> None:
    proc = _run(tmp_path, "demo", "--requests", "3", "--no-table", command=("-m", "ragpulse.cli"))
    assert proc.returncode == 0, proc.stderr
    assert DemoRun(proc, tmp_path, tmp_path, 0).result["evaluated"] == 3


def test_demo_exits_two_when_the_prometheus_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _run(tmp_path, "--requests", "2", "--prometheus-port", str(port))
    assert proc.returncode == 2
    assert "could not set up telemetry" in proc.stdout


def test_the_default_run_injects_every_kind_and_reports_each_with_its_false_alarms(
    tmp_path: Path,
) -> None:
    proc = _run(tmp_path, "--no-table", "--output-file", "t.jsonl")
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    result = {k: int(v) for k, v in (item.split("=") for item in line.split()[1:])}
    clean = result["clean"]
    for kind in FaultKind:
        reported = re.search(
            rf"^  {kind.value} +caught (\d+)/(\d+), signal \w+, false alarms (\d+)/(\d+)$",
            proc.stdout,
            re.M,
        )
        assert reported is not None, kind
        caught, injected, alarms, of = map(int, reported.groups())
        assert of == clean
        assert (caught, injected) == (
            result.get(f"caught_{kind.value}", 0),
            result.get(f"injected_{kind.value}", 0),
        )
        assert alarms == result.get(f"false_alarms_{kind.value}", alarms)
    for kind in (
        "off_question",
        "omitted_part",
        "wrong_citation",
        "unwarranted_abstention",
        "failed_tool",
    ):
        assert result[f"injected_{kind}"] >= 1, kind
        assert result[f"caught_{kind}"] >= 1, kind


_ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")
_FLAGS = {"caught", "missed", "false alarm", "no", "–"}
_TABLE_ROW = re.compile(
    r"^ *(?P<n>\d+)a? (?P<question>.+?) +(?P<scores>(?:(?:\d\.\d\d|–) +){6})"
    r"(?P<claims>\d+/\d+/\d+/\d+|–) +(?P<diagnosis>\S+(?: \S+)?) +(?P<rest>.*?) *$"
)


def _flag(row: re.Match[str]) -> str:
    """The row's last cell: how its fault (or its clean answer) was flagged."""
    found = re.search(r"(?:^| )(caught|missed|false alarm|no|–)$", row["rest"])
    return found.group(1) if found else row["rest"]


def _table_rows(stdout: str) -> list[re.Match[str]]:
    lines = _ANSI.sub("", stdout).splitlines()
    return [m for line in lines if (m := _TABLE_ROW.match(line))]


def test_the_table_reads_whole_at_100_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A terminal 100 columns wide: every column keeps its header and every row its six
    # scores, its claim counts, its diagnosis and its flag; only question and fault shorten.
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    proc = _run(tmp_path, "--requests", "12", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    lines = _ANSI.sub("", proc.stdout).splitlines()
    header = next(line for line in lines if "question" in line and "flagged" in line)
    for name in ("faith", "grnd", "corr", "relev", "compl", "cite", "claims", "diagnosis"):
        assert f" {name} " in header, (name, header)
    rows = _table_rows(proc.stdout)
    assert [int(row["n"]) for row in rows] == list(range(1, 13))
    for row in rows:
        assert len(row["question"].strip()) >= 12, row.group(0)
        assert _flag(row) in _FLAGS, row.group(0)
    table = lines[lines.index(header) : lines.index(header) + 14]
    assert max(len(line.rstrip()) for line in table) <= 100
    # The legend says what the columns hold, the claim counts and what the diagnosis reads.
    legend = " ".join(" ".join(lines).split())
    assert "supported / inferred / not found / contradicted" in legend
    assert "it reads the claims only" in legend


def test_piped_table_rows_are_whole_nothing_cut(tmp_path: Path) -> None:
    # stdout is a pipe here, as in CI or `make demo > out.txt`: no window to fit.
    proc = _run(tmp_path, "--requests", "12", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    rows = _table_rows(proc.stdout)
    assert len(rows) == 12
    assert not any("…" in row.group(0) for row in rows)
    flags = {_flag(row) for row in rows}
    assert flags <= _FLAGS, flags


def test_a_second_run_starts_its_traces_file_afresh(tmp_path: Path) -> None:
    for _ in range(2):
        proc = _run(tmp_path, "--requests", "5", "--seed", "2", "--no-table")
        assert proc.returncode == 0, proc.stderr
    traces = tmp_path / "ragpulse-traces.jsonl"
    assert len(_rag_spans(traces)) == 5
    assert "this run wrote 15 spans, 5 of them" in proc.stdout


def test_the_judges_page_quotes_the_default_runs_output(tmp_path: Path) -> None:
    """docs/judges.md's excerpt and per-kind table are what `ragpulse demo` prints today
    (`python scripts/judges_demo_excerpt.py` rewrites them from a fresh run)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "judges.md").read_text("utf-8")
    section = page.split("## The demo: injected faults and what caught them", 1)[1]
    section = section.split("\n## ", 1)[0]
    excerpt = section.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    proc = _run(tmp_path)  # the defaults: 60 requests, seed 7, the lexical judge
    assert proc.returncode == 0, proc.stderr
    printed = {line.rstrip() for line in proc.stdout.splitlines()}
    # Paths are the reader's own; every other line is quoted as printed.
    quoted = [line for line in excerpt if line and not line.startswith(("  traces ", "  logs ",
              "  metrics ", "Report ("))]  # fmt: skip
    missing = [line for line in quoted if line not in printed]
    assert not missing, missing
    by_kind = dict(
        re.findall(
            r"^  (\w+) +(caught \d+/\d+, signal \w+, false alarms \d+/\d+)$", proc.stdout, re.M
        )
    )
    rows = re.findall(r"^\| [^|]+ \| (\w+)[^|]* \| (\d+/\d+) \| (\d+/\d+) \|$", section, re.M)
    shown = sorted(f"caught {c}, signal {s}, false alarms {f}" for s, c, f in rows)
    assert shown == sorted(v for v in by_kind.values() if not v.startswith("caught 0/0"))


def test_each_metric_is_read_against_its_own_declared_threshold(demo: DemoRun) -> None:
    (line,) = [line for line in demo.proc.stdout.splitlines() if line.startswith("Below their")]
    printed = dict(re.findall(r"(\w+) \d+/\d+ \(\d+%\) below (\d(?:\.\d+)?)", line))
    assert printed and {m: float(t) for m, t in printed.items()} == {
        metric: threshold for metric, threshold in DECLARED.items() if metric in printed
    }
    assert printed["correctness"] == "0.5" and "groundedness" not in printed
    # The spans carry the same thresholds: a label is pass exactly when the score reaches it.
    for attributes in _rag_spans(demo.traces):
        for metric, threshold in DECLARED.items():
            score = attributes.get(semconv.eval_score(metric))
            if score is not None:
                expected = "pass" if score >= threshold else "fail"
                assert attributes[semconv.eval_label(metric)] == expected, metric
        # The offline judge scores groundedness without a label.
        assert semconv.eval_label(GROUNDEDNESS) not in attributes


def test_the_summary_says_groundedness_is_unlabelled_and_why(demo: DemoRun) -> None:
    assert "Unlabelled: groundedness is scored without a pass/fail label by the lexical judge" in (
        demo.proc.stdout
    )


def test_reworded_and_summed_up_clean_answers_page_nobody(demo: DemoRun) -> None:
    # A third of the clean answers are reworded and a third summed up, as a chat model writes;
    # none of them carries a fail label of a hallucination metric.
    retriever, generator = Bm25Retriever(), ExtractiveGenerator()
    restated = 0
    for attributes in _rag_spans(demo.traces):
        question = attributes[semconv.RAG_QUESTION]
        sources = [Source(p.text, p.document.id) for p in retriever.search(question)]
        generated = generator.generate(question, sources)
        verbatim = {generated, cite(generated, sources)}
        answer = attributes[semconv.RAG_ANSWER]
        worded = _clean(cite(generated, sources)) | _clean(generated)
        if answer in worded - verbatim:
            restated += 1
            for metric in (FAITHFULNESS, GROUNDEDNESS):
                assert attributes.get(semconv.eval_label(metric)) != "fail", (metric, answer)
    assert restated >= 10


def test_a_threshold_option_moves_that_metric_only(tmp_path: Path) -> None:
    # The default run's relevancy false alarms are clean answers scoring 0.5 on two-part
    # questions; at a relevancy threshold of 0.4 they pass, and no other count moves.
    default = _run(tmp_path, "--no-table")
    moved = _run(tmp_path, "--no-table", "--threshold", "relevancy=0.4")
    assert default.returncode == moved.returncode == 0, default.stderr + moved.stderr
    before = DemoRun(default, tmp_path, tmp_path, 0).result
    after = DemoRun(moved, tmp_path, tmp_path, 0).result
    assert before["false_alarms_off_question"] > 0
    assert after["false_alarms_off_question"] == 0
    changed = {k for k in before if before[k] != after[k]}
    assert changed <= {"false_alarms", "false_alarms_off_question"}
    assert "relevancy " in moved.stdout and "below 0.4" in moved.stdout
    assert "groundedness " in moved.stdout and "below 0.7" in moved.stdout


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("relevancy=1.5", "--threshold expects METRIC=VALUE with VALUE in [0, 1]"),
        ("0.5", "--threshold expects METRIC=VALUE with VALUE in [0, 1]"),
        ("nonesuch=0.5", "--threshold nonesuch=0.5: unknown metric"),
    ],
)
@pytest.mark.parametrize("command", [("-m", "ragpulse.demo"), ("-m", "ragpulse.cli", "demo")])
def test_a_bad_threshold_is_one_line_and_exit_two(
    tmp_path: Path, value: str, says: str, command: tuple[str, ...]
) -> None:
    proc = _run(tmp_path, "--threshold", value, command=command)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith(f"ragpulse demo: {says}"), proc.stderr
    assert not (tmp_path / "ragpulse-traces.jsonl").exists()  # refused before it ran
