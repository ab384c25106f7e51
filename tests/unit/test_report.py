"""``ragpulse.report``: reading runs, the compact data the page embeds, and the page itself.

Trace files are written by the real pipeline (decorators, ``EvaluatingSpanProcessor``,
``LexicalJudge``, the OTLP-JSON file exporter); eval output by ``evaluation_to_json``.
The page's behaviour in a browser is tested in ``tests/integration/test_report_browser.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Collection, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import ragpulse
from ragpulse import semconv
from ragpulse.cli.main import main
from ragpulse.evaluation.types import (
    Claim,
    ClaimVerdict,
    Context,
    EvalStatus,
    Evaluation,
    Evidence,
    MetricResult,
    RagRecord,
    Verdict,
)
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.offline.evaluate import evaluation_to_json
from ragpulse.outputs.files import FileSpanExporter
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.report import RunFileError, build_report, load_runs, run_from_evaluations
from ragpulse.report._data import run_data
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import BoundsOptions

PASSAGES = {
    "rotation": "Encryption keys are rotated every 90 days. Keys are kept in a hardware module.",
    "versions": "Larkspur keeps 30 versions of each file for 90 days.",
}


class SlowJudge:
    """The lexical judge, after a gate opens: its results arrive after the hold timeout."""

    name = "slow-lexical"
    annotator_kind = "CODE"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self._judge = LexicalJudge()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        await asyncio.get_running_loop().run_in_executor(None, self.gate.wait, 10)
        return await self._judge.evaluate(record, metrics)


@ragpulse.retrieval
def search_rotation(query: str) -> list[dict[str, str]]:
    return [{"id": "rotation", "content": PASSAGES["rotation"]}]


@ragpulse.retrieval
def search_versions(query: str) -> list[dict[str, str]]:
    return [{"id": "versions", "content": PASSAGES["versions"]}]


@ragpulse.rag(name="support")
def ask(question: str, answer: str) -> str:
    search_rotation(question)
    search_versions(question)
    return answer


def _wait(path: Path, predicate: Any) -> None:
    deadline = time.monotonic() + 10
    while not (path.exists() and predicate(path.read_text(encoding="utf-8"))):
        assert time.monotonic() < deadline, "the spans were not written"
        time.sleep(0.02)


@pytest.fixture
def traces(route_spans: Any, tmp_path: Path) -> Iterator[tuple[Path, SlowJudge]]:
    path = tmp_path / "traces.jsonl"
    judge = SlowJudge()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(FileSpanExporter(path)),
        judge=judge,
        sampler=EvalSampler(rate=1.0),
        bounds=BoundsOptions(hold_timeout=1.0),
    )
    route_spans(processor)
    yield path, judge
    judge.gate.set()


def test_trace_file_gives_each_evaluated_request_its_texts_and_the_late_result_of_a_pending_span(
    traces: tuple[Path, SlowJudge],
) -> None:
    path, judge = traces
    answer = "Larkspur keeps 30 versions of each file. Encryption keys are rotated every 90 days."
    ask("How many versions are kept?", answer)
    _wait(path, lambda text: EvalStatus.PENDING in text)
    judge.gate.set()
    _wait(path, lambda text: semconv.EVAL_TARGET_SPAN_ID in text)

    (run,) = load_runs([path])
    (request,) = run.requests
    assert run.source == "traces"
    assert request.status == "ok"  # the carrier's result replaced "pending"
    assert request.question == "How many versions are kept?"
    assert request.answer == answer
    assert request.contexts is not None
    # Contexts in the order the retrieval spans reported them: the indexes claims refer to.
    assert [(c.id, c.text) for c in request.contexts] == [
        ("rotation", PASSAGES["rotation"]),
        ("versions", PASSAGES["versions"]),
    ]
    assert request.scores["groundedness"] == 1.0
    assert request.labels["groundedness"] == "pass"
    assert request.slices["rag"] == "support"
    # Grouped by diagnosis like any other cut, with its reason beside the explanations.
    assert request.slices["diagnosis"] == "ok"
    assert request.explanations["diagnosis"]
    assert "diagnosis" not in request.scores
    for claim in request.claims:
        assert claim.answer_start is not None and claim.answer_end is not None
        assert answer[claim.answer_start : claim.answer_end] == claim.text
        assert claim.context_index is not None and claim.start is not None
        passage = request.contexts[claim.context_index].text
        assert passage is not None
        assert passage[claim.start : claim.end].lower() in claim.text.lower()


def test_retrieval_documents_in_openinference_keys_are_read_as_contexts(tmp_path: Path) -> None:
    def attribute(key: str, value: Any) -> dict[str, Any]:
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: value}}

    unit = {
        "traceId": "ab" * 16,
        "spanId": "01" * 8,
        "name": "rag",
        "attributes": [
            attribute(semconv.OI_INPUT_VALUE, "q"),
            attribute(semconv.OI_OUTPUT_VALUE, "a"),
            attribute(semconv.EVAL_STATUS, "no_claims"),
        ],
    }
    retriever = {
        "traceId": "ab" * 16,
        "spanId": "02" * 8,
        "parentSpanId": "01" * 8,
        "name": "retrieve",
        "attributes": [
            attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OI_KIND_RETRIEVER),
            attribute("retrieval.documents.1.document.content", "second"),
            attribute("retrieval.documents.0.document.content", "first"),
            attribute("retrieval.documents.0.document.id", "doc-0"),
        ],
    }
    path = tmp_path / "traces.jsonl"
    payload = {"resourceSpans": [{"scopeSpans": [{"spans": [unit, retriever]}]}]}
    path.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    (run,) = load_runs([path])
    (request,) = run.requests
    assert request.status == "no_claims"
    assert request.question == "q" and request.answer == "a"
    assert request.contexts is not None
    assert [(c.id, c.text) for c in request.contexts] == [("doc-0", "first"), (None, "second")]


def _evaluation(verdicts: list[Verdict], score: float | None = 0.5) -> Evaluation:
    claims = tuple(
        ClaimVerdict(
            Claim(f"claim {i}", None, None),
            verdict,
            Evidence(0, 0, 5, "alpha") if verdict is Verdict.SUPPORTED else None,
        )
        for i, verdict in enumerate(verdicts)
    )
    return Evaluation(
        status=EvalStatus.OK if verdicts else EvalStatus.NO_CLAIMS,
        metrics={"groundedness": MetricResult("groundedness", score)},
        claims=claims,
        judge="lexical",
    )


def _write_eval(path: Path, rows: dict[str, Evaluation]) -> Path:
    lines = [json.dumps(evaluation_to_json(i, e)) for i, e in rows.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_inputs(path: Path, ids: list[str]) -> Path:
    lines = [
        json.dumps(
            {"id": i, "question": f"question {i}", "contexts": ["alpha beta"], "answer": "x"}
        )
        for i in ids
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_eval_output_is_joined_with_its_input_records_by_id(tmp_path: Path) -> None:
    output = _write_eval(
        tmp_path / "run.jsonl",
        {"b": _evaluation([Verdict.SUPPORTED]), "a": _evaluation([], None)},
    )
    inputs = _write_inputs(tmp_path / "in.jsonl", ["a", "b"])
    (run,) = load_runs([output], [inputs])
    assert [(r.id, r.question) for r in run.requests] == [("b", "question b"), ("a", "question a")]
    assert run.requests[0].contexts is not None
    assert run.requests[0].contexts[0].text == "alpha beta"
    assert run.requests[0].claims[0].evidence_text == "alpha"
    assert run.requests[1].status == "no_claims"
    assert run.requests[1].scores["groundedness"] is None
    assert run.notes == []


def test_eval_output_without_its_input_says_the_texts_are_missing(tmp_path: Path) -> None:
    output = _write_eval(tmp_path / "run.jsonl", {"a": _evaluation([Verdict.SUPPORTED])})
    (run,) = load_runs([output])
    assert run.requests[0].contexts is None
    assert any("--input" in note for note in run.notes)


def test_a_file_of_records_to_evaluate_is_refused_with_what_to_do(tmp_path: Path) -> None:
    inputs = _write_inputs(tmp_path / "in.jsonl", ["a"])
    with pytest.raises(RunFileError, match="ragpulse eval"):
        load_runs([inputs])


class _References(HTMLParser):
    """Every way an HTML page can make the browser fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.csp: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"link", "img", "iframe", "object", "embed", "audio", "video", "source", "base"}:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name in {"src", "href", "srcset", "action", "poster", "data", "background"}:
                self.found.append(f"{tag}[{name}={value}]")
        values = dict(attrs)
        if tag == "meta" and values.get("http-equiv") == "Content-Security-Policy":
            self.csp = values.get("content")


def _page(tmp_path: Path) -> str:
    output = _write_eval(tmp_path / "run.jsonl", {"a": _evaluation([Verdict.SUPPORTED])})
    inputs = _write_inputs(tmp_path / "in.jsonl", ["a"])
    return build_report(load_runs([output], [inputs]))


def test_page_references_nothing_outside_itself(tmp_path: Path) -> None:
    page = _page(tmp_path)
    parser = _References()
    parser.feed(page)
    assert parser.found == []
    # The policy forbids every fetch, so even a reference added later could not load.
    assert parser.csp is not None and "default-src 'none'" in parser.csp
    for pattern in (
        r"url\(",
        r"@import",
        r"\bfetch\(",
        r"XMLHttpRequest",
        r"\bimport\(",
        "WebSocket",
    ):
        assert re.search(pattern, page) is None, pattern
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace name, never fetched


def test_texts_cannot_end_the_embedded_data_early(tmp_path: Path) -> None:
    hostile = "</script><script>document.title='owned'</script>"
    record = RagRecord(question=hostile, contexts=(Context(hostile),), answer=hostile)
    page = build_report([run_from_evaluations("run", [("1", record, _evaluation([]))])])
    assert "<script>document.title" not in page
    data = re.search(r'<script type="application/json" id="rp-detail-0">(.*?)</script>', page, re.S)
    assert data is not None
    assert json.loads(data.group(1))["requests"][0][1] == hostile


def _embedded(page: str, element: str) -> Any:
    found = re.search(rf'<script type="application/json" id="{element}">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_undefined_scores_are_neither_passing_nor_failing(tmp_path: Path) -> None:
    output = _write_eval(
        tmp_path / "run.jsonl",
        {
            "pass": _evaluation([Verdict.SUPPORTED], 1.0),
            "fail": _evaluation([Verdict.NOT_FOUND], 0.0),
            "undefined": _evaluation([], None),
        },
    )
    rows = _embedded(build_report(load_runs([output])), "rp-data")["runs"][0]
    assert rows["lab"]["groundedness"] == [1, 0, -1]
    assert rows["sc"]["groundedness"] == [1000, 0, -1]
    assert rows["thresholds"]["groundedness"] == 0.7


def test_ten_thousand_requests_sharing_a_corpus_embed_each_passage_once(tmp_path: Path) -> None:
    corpus = [
        f"Passage {k}: " + "the quick brown fox jumps over the lazy dog. " * 12 for k in range(50)
    ]
    items = []
    for i in range(10_000):
        contexts = tuple(
            Context(corpus[(i + k) % len(corpus)], f"doc-{(i + k) % 50}") for k in range(3)
        )
        answer = f"Answer {i}. The quick brown fox jumps over the lazy dog."
        record = RagRecord(question=f"Question number {i}?", contexts=contexts, answer=answer)
        items.append((str(i), record, _evaluation([Verdict.SUPPORTED, Verdict.NOT_FOUND])))
    page = build_report([run_from_evaluations("big", items)])
    detail = _embedded(page, "rp-detail-0")
    assert len(detail["texts"]) == len(corpus)
    # The page grows with the requests, not with their passages: under 500 bytes a request here.
    assert len(page.encode("utf-8")) < 10_000 * 500


def test_comparison_matches_requests_by_id_and_lists_those_whose_verdicts_changed(
    tmp_path: Path,
) -> None:
    before = _write_eval(
        tmp_path / "a.jsonl",
        {
            "same": _evaluation([Verdict.SUPPORTED]),
            "worse": _evaluation([Verdict.SUPPORTED]),
            "gone": _evaluation([Verdict.SUPPORTED]),
        },
    )
    after = _write_eval(
        tmp_path / "b.jsonl",
        {
            "worse": _evaluation([Verdict.CONTRADICTED], 0.0),
            "same": _evaluation([Verdict.SUPPORTED]),
            "new": _evaluation([Verdict.SUPPORTED]),
        },
    )
    compare = _embedded(build_report(load_runs([before, after])), "rp-data")["compare"]
    assert (compare["matched"], compare["only_before"], compare["only_after"]) == (2, 1, 1)
    assert compare["changed"] == [[1, 0, "ok", "ok", [["claim 0", "SUPPORTED", "CONTRADICTED"]]]]


def test_report_command_writes_the_page_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    output = _write_eval(tmp_path / "run.jsonl", {"a": _evaluation([Verdict.SUPPORTED])})
    page = tmp_path / "report.html"
    assert main(["report", str(output), "-o", str(page)]) == 0
    assert page.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert main(["report", str(tmp_path / "missing.jsonl"), "-o", str(page)]) == 2
    assert main(["report", str(output), str(output), str(output)]) == 2
    assert main(["report", str(output), "--threshold", "groundedness=2"]) == 2


def test_a_score_that_is_not_a_number_is_shown_as_undefined(tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl"
    line = {"id": "a", "status": "ok", "scores": {"groundedness": float("nan")}, "claims": []}
    output.write_text(json.dumps(line) + "\n", encoding="utf-8")  # Python writes NaN
    rows = _embedded(build_report(load_runs([output])), "rp-data")["runs"][0]
    assert rows["sc"]["groundedness"] == [-1]
    assert rows["lab"]["groundedness"] == [-1]


def test_eval_output_is_grouped_by_diagnosis_with_each_reason(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    base = {"question": "When is support open?", "contexts": ["Support is open from 9am to 5pm."]}
    rows = [
        {**base, "id": "good", "answer": "Support is open from 9am."},
        {**base, "id": "drift", "answer": "Support is open from 7am to 11pm on Sundays."},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    output = tmp_path / "out.jsonl"
    assert main(["eval", str(source), "--output", str(output)]) == 0
    (run,) = load_runs([output])
    by_id = {r.id: r for r in run.requests}
    assert by_id["good"].slices["diagnosis"] == "ok"
    assert by_id["drift"].slices["diagnosis"] == "generation_drift"
    assert "claims" in by_id["drift"].explanations["diagnosis"]
    page = build_report([run])
    assert "generation_drift" in page


def _labelled_eval(path: Path, labels: dict[str, float]) -> Path:
    evaluation = Evaluation(
        status=EvalStatus.OK,
        metrics={
            "faithfulness": MetricResult("faithfulness", 1.0),
            "groundedness": MetricResult("groundedness", 0.2),
        },
        judge="lexical",
    )
    line = json.dumps(evaluation_to_json("r1", evaluation, labels))
    path.write_text(line + "\n", encoding="utf-8")
    return path


def test_a_metric_its_run_never_labels_is_unlabelled_in_the_report(tmp_path: Path) -> None:
    # ragpulse eval with the offline judge: faithfulness labelled, groundedness scored unlabelled.
    (run,) = load_runs([_labelled_eval(tmp_path / "out.jsonl", {"faithfulness": 0.74})])
    rows, _ = run_data(run, {})
    assert rows["thresholds"]["groundedness"] is None
    assert rows["lab"]["groundedness"] == [-1]  # neither pass nor fail
    assert rows["lab"]["faithfulness"] == [1]  # the label the line carries


def test_a_threshold_given_to_the_report_labels_a_metric_its_run_left_unlabelled(
    tmp_path: Path,
) -> None:
    (run,) = load_runs([_labelled_eval(tmp_path / "out.jsonl", {"faithfulness": 0.74})])
    rows, _ = run_data(run, {"groundedness": 0.5})
    assert rows["thresholds"]["groundedness"] == 0.5
    assert rows["lab"]["groundedness"] == [0]
