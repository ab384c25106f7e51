"""``ragpulse report`` on files that are odd, damaged or hostile, and the lines ragpulse writes.

Every case ends in a page and exit 0, with what was skipped said aloud (file and line), or
in one usage error; never a hang, a traceback or a cut page. Trace files are written by the
real pipeline where the case allows; hostile shapes are written by hand.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import ragpulse
from ragpulse import semconv
from ragpulse.capture._content import ContentPolicy
from ragpulse.cli.main import main
from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, MetricResult, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.offline.evaluate import evaluation_to_json
from ragpulse.outputs.files import FileSpanExporter
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.report import build_report, load_runs, run_from_evaluations
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.signals.privacy import export_evaluation

ROOT = Path(__file__).resolve().parents[2]
PASSAGE = "Encryption keys are rotated every 90 days. Larkspur keeps 30 versions of each file."
LINE_BREAKS = ("\u2028", "\u2029", "\x85", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")
"""Every character str.splitlines() breaks on but \\n; json.dumps leaves the first three raw."""


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": "keys", "content": PASSAGE}]


@ragpulse.rag(name="support")
def ask(question: str, answer: str) -> str:
    search(question)
    return answer


@pytest.fixture
def traces(route_spans: Any, tmp_path: Path) -> Iterator[tuple[Path, EvaluatingSpanProcessor]]:
    path = tmp_path / "traces.jsonl"
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(FileSpanExporter(path)),
        judge=LexicalJudge(),
        sampler=EvalSampler(rate=1.0),
    )
    route_spans(processor)
    yield path, processor


def _report(*args: str | Path) -> tuple[int, str]:
    """``ragpulse report`` in its own process (a hang fails the test, not the suite)."""
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "report", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONPATH": f"{ROOT / 'src'}", "PATH": "/usr/bin:/bin"},
    )
    return done.returncode, done.stderr


def _attribute(key: str, value: Any) -> dict[str, Any]:
    kind = "boolValue" if isinstance(value, bool) else "stringValue"
    return {"key": key, "value": {kind: value}}


def _unit(span_id: str, parent: str = "", answer: str = "a") -> dict[str, Any]:
    return {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": "rag",
        "attributes": [
            _attribute(semconv.OI_INPUT_VALUE, "q"),
            _attribute(semconv.OI_OUTPUT_VALUE, answer),
            _attribute(semconv.EVAL_STATUS, "no_claims"),
        ],
    }


def _export(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def _write(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --- the lines ragpulse writes ---------------------------------------------------------------


def test_an_answer_holding_line_separators_stays_on_its_own_otlp_json_line(
    traces: tuple[Path, EvaluatingSpanProcessor],
) -> None:
    path, processor = traces
    answers = [f"Keys are rotated every 90 days.{c}Versions are kept." for c in LINE_BREAKS]
    for answer in answers:
        ask("How often are keys rotated?", answer)
    assert processor.force_flush(30_000)
    text = path.read_text(encoding="utf-8")
    assert text.splitlines() == text.split("\n")[:-1]  # no reader sees another break
    (run,) = load_runs([path])
    assert [r.answer for r in run.requests] == answers
    assert run.notes == []


def test_an_eval_result_holding_a_line_separator_stays_on_one_line(tmp_path: Path) -> None:
    record = {"id": "r\u20281", "question": "q", "contexts": [PASSAGE], "answer": "90 days."}
    source = _write(tmp_path / "in.jsonl", json.dumps(record))
    output = tmp_path / "out.jsonl"
    assert main(["eval", str(source), "--output", str(output)]) == 0
    text = output.read_text(encoding="utf-8")
    assert len(text.splitlines()) == 1
    assert json.loads(text)["id"] == "r\u20281"


# --- reading: one bad line costs one line, said aloud ----------------------------------------


def test_a_damaged_line_costs_only_that_line_and_is_named_with_its_file(tmp_path: Path) -> None:
    good = [_export(_unit(f"{i:016x}")) for i in range(1, 4)]
    path = _write(tmp_path / "traces.jsonl", good[0], good[1][:40], good[2], good[1])
    (run,) = load_runs([path])
    assert len(run.requests) == 3
    code, stderr = _report(path, "-o", tmp_path / "page.html")
    assert code == 0
    assert "traces.jsonl: skipped line 2: not JSON" in stderr
    assert "wrote" in stderr and "3 requests" in stderr


def test_raw_line_separators_in_a_file_written_elsewhere_split_nothing(tmp_path: Path) -> None:
    answer = "90 days.\u2028Really.\u2029Truly.\x85Yes."
    raw = json.dumps(json.loads(_export(_unit("01" * 8, answer=answer))), ensure_ascii=False)
    path = _write(tmp_path / "traces.jsonl", raw, _export(_unit("02" * 8)))
    (run,) = load_runs([path])
    assert [r.answer for r in run.requests] == [answer, "a"]
    assert run.notes == []


def test_a_span_that_is_its_own_parent_ends_the_report(tmp_path: Path) -> None:
    path = _write(tmp_path / "traces.jsonl", _export(_unit("01" * 8, parent="01" * 8)))
    code, stderr = _report(path, "-o", tmp_path / "page.html")
    assert code == 0, stderr
    assert "1 request)" in stderr


def test_a_cycle_of_parents_below_a_unit_ends_the_report(tmp_path: Path) -> None:
    def child(span_id: str, parent: str) -> dict[str, Any]:
        kind = _attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OI_KIND_RETRIEVER)
        return {
            "traceId": "ab" * 16,
            "spanId": span_id,
            "parentSpanId": parent,
            "attributes": [kind],
        }

    # 01 -> 02 -> 03 -> 01 again: a span reusing the unit's id closes the loop.
    spans = (_unit("01" * 8), child("02" * 8, "01" * 8), child("03" * 8, "02" * 8))
    path = _write(tmp_path / "traces.jsonl", _export(*spans, child("01" * 8, "03" * 8)))
    code, stderr = _report(path, "-o", tmp_path / "page.html")
    assert code == 0, stderr
    assert "1 request)" in stderr


def test_a_lone_surrogate_in_a_trace_file_still_gives_a_whole_page(tmp_path: Path) -> None:
    line = _export(_unit("01" * 8)).replace('"stringValue": "a"', '"stringValue": "a\\ud800b"')
    path = _write(tmp_path / "traces.jsonl", line)
    page = tmp_path / "page.html"
    code, stderr = _report(path, "-o", page)
    assert code == 0, stderr
    assert "</html>" in page.read_text(encoding="utf-8")
    assert "a\\ud800b" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ('{"resourceSpans": {"scopeSpans": []}}', "resourceSpans is not a list"),
        ('{"resourceSpans": "spans"}', "resourceSpans is not a list"),
        ("[1, 2]", "not a JSON object"),
        ("[" * 100_000, "not JSON"),
    ],
)
def test_a_line_of_the_wrong_shape_is_skipped_with_its_reason(
    shape: str, reason: str, tmp_path: Path
) -> None:
    path = _write(tmp_path / "traces.jsonl", _export(_unit("01" * 8)), shape)
    code, stderr = _report(path, "-o", tmp_path / "page.html")
    assert code == 0, stderr
    assert "skipped line 2: " in stderr and reason in stderr
    assert "Traceback" not in stderr


def test_parts_of_the_wrong_shape_inside_an_export_are_passed_over(tmp_path: Path) -> None:
    odd_value = {"key": semconv.OI_INPUT_VALUE, "value": {"doubleValue": "many"}}
    endless = {"key": "n", "value": {"intValue": float("inf")}}
    claims = _attribute(semconv.EVAL_CLAIMS, "5")
    odd = {
        **_unit("02" * 8),
        "endTimeUnixNano": float("inf"),
        "attributes": [*_unit("02" * 8)["attributes"], odd_value, endless, claims, 7],
    }
    retrieval = {
        "traceId": "ab" * 16,
        "spanId": "03" * 8,
        "parentSpanId": "02" * 8,
        "attributes": [
            _attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_RETRIEVAL),
            _attribute(semconv.GEN_AI_RETRIEVAL_DOCUMENTS, "[" * 100_000),
        ],
    }
    payload = {
        "resourceSpans": [
            "a resource",
            {"scopeSpans": "none"},
            {"scopeSpans": [{"spans": [3, odd, retrieval, {"attributes": {"a": 1}}]}]},
            {"scopeSpans": [{"spans": [_unit("01" * 8)]}]},
        ]
    }
    path = _write(tmp_path / "traces.jsonl", json.dumps(payload))
    code, stderr = _report(path, "-o", tmp_path / "page.html")
    assert code == 0, stderr
    assert "2 requests" in stderr


def test_an_empty_run_gets_a_page_that_says_nothing_is_evaluated_yet(tmp_path: Path) -> None:
    path = _write(tmp_path / "traces.jsonl")
    page = tmp_path / "page.html"
    code, stderr = _report(path, "-o", page)
    assert code == 0, stderr
    assert "0 requests" in stderr
    assert "nothing has been evaluated" in page.read_text(encoding="utf-8")


def test_a_run_of_one_request_is_counted_in_the_singular(tmp_path: Path) -> None:
    path = _write(tmp_path / "traces.jsonl", _export(_unit("01" * 8)))
    code, stderr = _report(path, "-o", tmp_path / "page.html")
    assert code == 0
    assert "(traces.jsonl: 1 request)" in stderr


# --- what the page carries ---------------------------------------------------------------------


def _embedded(page: Path, element: str) -> Any:
    text = page.read_text(encoding="utf-8")
    start = text.index(f'id="{element}">') + len(f'id="{element}">')
    return json.loads(text[start : text.index("</script>", start)])


def _evaluate_to_page(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    source = _write(tmp_path / "in.jsonl", *map(json.dumps, records))
    output = tmp_path / "out.jsonl"
    assert main(["eval", str(source), "--output", str(output)]) == 0
    page = tmp_path / "page.html"
    assert main(["report", str(output), "--input", str(source), "-o", str(page)]) == 0
    return page


def test_an_abstention_is_shown_as_one_with_its_reason(tmp_path: Path) -> None:
    record = {"id": "idk", "question": "How often are keys rotated?", "contexts": [PASSAGE]}
    page = _evaluate_to_page(tmp_path, [{**record, "answer": "I don't know."}])
    data = _embedded(page, "rp-data")["runs"][0]
    detail = _embedded(page, "rp-detail-0")["requests"][0]
    assert data["ab"] == [1]  # abstained though the passage answers
    assert "abstains though the passages could answer" in detail[9]


def test_eval_output_carries_each_metrics_explanation_to_the_page(tmp_path: Path) -> None:
    record = {"id": "r1", "question": "How often are keys rotated?", "contexts": [PASSAGE]}
    answer = "Keys are rotated every 90 days. Larkspur was founded in 2011."
    page = _evaluate_to_page(tmp_path, [{**record, "answer": answer}])
    explanations = _embedded(page, "rp-detail-0")["requests"][0][7]
    assert {"faithfulness", "groundedness", "relevancy"} <= set(explanations)
    assert "NOT_FOUND" in explanations["groundedness"]


def test_the_demo_run_offers_every_slice_its_evaluations_carry() -> None:
    judge = LexicalJudge()
    questions = ["How often are keys rotated?", "How often are keys rotated and who keeps them?"]
    answers = ["Keys are rotated every 90 days [1].", "I don't know."]
    items = []
    for i, (question, answer) in enumerate(zip(questions, answers, strict=True)):
        record = RagRecord(question, (Context(PASSAGE),), answer, name="support")
        evaluation = asyncio.run(judge.evaluate(record, ("groundedness", "relevancy", "citation")))
        items.append((str(i), record, evaluation))
    page = build_report([run_from_evaluations("demo", items)])
    found = page.index('id="rp-data">') + len('id="rp-data">')
    slices = json.loads(page[found : page.index("</script>", found)])["runs"][0]["slices"]
    assert {"abstained", "cited", "question"} <= set(slices)


def test_eval_output_rows_name_their_explanations_and_slices() -> None:
    evaluation = Evaluation(
        status=EvalStatus.OK,
        metrics={"groundedness": MetricResult("groundedness", 0.0, "the answer abstains")},
        slices={"abstained": "true"},
    )
    row = evaluation_to_json("r1", evaluation)
    assert row["explanations"] == {"groundedness": "the answer abstains"}
    assert row["slices"] == {"abstained": "true"}


def test_a_damaged_first_line_costs_only_that_line(tmp_path: Path) -> None:
    line = _export(_unit("01" * 8))
    path = _write(tmp_path / "traces.jsonl", line[:30], line)
    code, stderr = _report(path, "-o", tmp_path / "page.html")
    assert code == 0, stderr
    assert "traces.jsonl: skipped line 1: not JSON" in stderr
    assert "(traces.jsonl: 1 request)" in stderr


def test_a_file_with_no_json_line_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "notes.txt", "hello", "world")
    code, stderr = _report(path, "-o", tmp_path / "page.html")
    assert code == 2
    assert stderr.strip() == f"ragpulse report: {path}: no line of it is JSON"


def test_explanations_in_eval_output_obey_no_content(tmp_path: Path) -> None:
    answer = "Ann's SSN is 123-45-6789. Her card is 4111111111111111."
    record = {"id": "s", "question": "What is Ann's SSN?", "answer": answer}
    source = _write(tmp_path / "in.jsonl", json.dumps({**record, "contexts": ["SSN 123-45-6789"]}))
    output = tmp_path / "out.jsonl"
    assert main(["eval", str(source), "--output", str(output), "--no-content"]) == 0
    row = json.loads(output.read_text(encoding="utf-8"))
    assert row["explanations"]
    assert "6789" not in json.dumps(row) and "1111" not in json.dumps(row)


@pytest.mark.parametrize("capture_content", [True, False])
def test_an_evaluation_of_one_claim_counts_it_in_the_singular(capture_content: bool) -> None:
    record = RagRecord("How often?", (Context(PASSAGE),), "Keys are rotated every 90 days.")
    evaluation = asyncio.run(LexicalJudge().evaluate(record, ("groundedness",)))
    exported = export_evaluation(evaluation, ContentPolicy(capture_content=capture_content))
    assert exported.explanation is not None
    assert exported.explanation.startswith("1 claim: 1 supported")
