"""The report of an agent's answers: tool results shown as evidence with their tool's name,
conversations' turns together, the ``tool_failure`` diagnosis like the other diagnoses.

Trace files are written by the real pipeline (decorators, ``EvaluatingSpanProcessor``,
``LexicalJudge``, the OTLP-JSON file exporter); eval output by ``ragpulse eval`` itself.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import ragpulse
from ragpulse.cli import main
from ragpulse.evaluation import diagnosis
from ragpulse.evaluation.types import EvalStatus, Evaluation, MetricResult, RagRecord
from ragpulse.judges.lexical import LexicalJudge
from ragpulse.outputs.files import FileSpanExporter
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.report import build_report, load_runs, run_from_evaluations
from ragpulse.sampling.sampler import EvalSampler

WARRANTY = "The X200 comes with a 2-year limited warranty covering parts and labour."
CHARGER = "The X200 fast charger fills the battery to 80 percent in 30 minutes."


def _embedded(page: str, element: str) -> Any:
    match = re.search(rf'<script type="application/json" id="{element}">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


@ragpulse.tool
def search_docs(query: str, tool_call_id: str) -> str:
    return CHARGER if "charger" in query else WARRANTY


@ragpulse.tool(evidence=False)
def open_ticket(subject: str) -> str:
    return "Ticket 77 opened."


@ragpulse.rag(name="support-agent")
def turn(question: str, conversation_id: str, answer: str) -> str:
    search_docs(question, tool_call_id=f"call-{len(question)}")
    open_ticket(question)
    return answer


@pytest.fixture
def traces(route_spans: Any, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "traces.jsonl"
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(FileSpanExporter(path)),
        judge=LexicalJudge(),
        sampler=EvalSampler(rate=1.0),
    )
    route_spans(processor)
    yield path
    processor.shutdown()


def _evaluated(path: Path, count: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if text.count('"ragpulse.eval.status"') >= count:
            return
        assert time.monotonic() < deadline, "the evaluations were not written"
        time.sleep(0.05)


def test_trace_file_shows_tool_results_as_evidence_and_a_conversations_turns_together(
    traces: Path,
) -> None:
    turn("What warranty does the X200 have?", "conv-1", "It has a 2-year limited warranty.")
    turn("Where is my order?", "conv-2", "It ships tomorrow.")
    turn("And the fast charger?", "conv-1", "It fills to 80 percent in 30 minutes.")
    _evaluated(traces, 3)
    (run,) = load_runs([traces])
    first = run.requests[0]
    assert first.conversation_id == "conv-1"
    assert first.contexts is not None
    # The evidence tool's result, with its tool and call id; the acting tool's is not evidence.
    assert [(c.text, c.tool) for c in first.contexts] == [(WARRANTY, "search_docs")]
    assert first.contexts[0].id == "call-33"
    assert first.scores["groundedness"] == 1.0

    page = build_report([run])
    rows = _embedded(page, "rp-data")["runs"][0]
    # Only conversations of more than one turn are grouped.
    assert rows["convs"] == ["conv-1"]
    assert rows["cv"] == [0, -1, 0]
    detail = _embedded(page, "rp-detail-0")
    assert detail["requests"][0][3][0][1:] == ["call-33", "search_docs"]


def test_eval_output_shows_tool_evidence_failed_tools_and_conversations(tmp_path: Path) -> None:
    def messages(question: str, result: str, answer: str) -> list[dict[str, Any]]:
        call = {"id": "c1", "type": "function", "function": {"name": "search_docs"}}
        return [
            {"role": "user", "content": question},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": result},
            {"role": "assistant", "content": answer},
        ]

    source = tmp_path / "in.jsonl"
    rows = [
        {
            "id": "t1",
            "conversation_id": "conv-7",
            "messages": messages("Warranty?", WARRANTY, "A 2-year limited warranty."),
        },
        {
            "id": "t2",
            "conversation_id": "conv-7",
            "messages": messages("Charger?", "", "It charges fully in 5 minutes."),
        },
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    output = tmp_path / "out.jsonl"
    assert main(["eval", str(source), "--output", str(output)]) == 0
    (run,) = load_runs([output], [source])
    first, second = run.requests
    assert first.contexts is not None and first.contexts[0].tool == "search_docs"
    assert (first.conversation_id, second.conversation_id) == ("conv-7", "conv-7")
    assert second.failed_tools == ("search_docs",)
    page = build_report([run])
    data = _embedded(page, "rp-data")["runs"][0]
    assert data["cv"] == [0, 0]
    detail = _embedded(page, "rp-detail-0")["requests"]
    assert detail[1][11] == ["search_docs"]


def test_tool_failure_is_a_diagnosis_cut_like_the_others(tmp_path: Path) -> None:
    record = RagRecord(
        question="What warranty?",
        contexts=(),
        answer="It has a lifetime warranty.",
        failed_tools=("search_docs",),
        conversation_id="c",
    )
    ok = RagRecord(question="q", contexts=(), answer="a")
    evaluation = dataclasses.replace(
        _ok(),
        diagnosis=diagnosis.TOOL_FAILURE,
        diagnosis_reason="search_docs failed before the answer",
    )
    run = run_from_evaluations("live", [("1", record, evaluation), ("2", ok, _ok())])
    assert run.requests[0].slices["diagnosis"] == "tool_failure"
    assert run.requests[0].failed_tools == ("search_docs",)
    data = _embedded(build_report([run]), "rp-data")["runs"][0]
    assert "tool_failure" in data["slices"]["diagnosis"]


def _ok() -> Evaluation:
    return Evaluation(
        status=EvalStatus.OK,
        metrics={"groundedness": MetricResult("groundedness", 0.0)},
        diagnosis=diagnosis.OK,
        diagnosis_reason="nothing to fault",
    )
