"""``ragpulse eval`` without ``--metrics`` scores every metric a record carries the input for,
and says which metrics it left unscored for lack of input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragpulse.cli.main import main

pytestmark = pytest.mark.integration

PASSAGES = [
    "Encryption keys are rotated every 90 days.",
    "Larkspur keeps 30 versions of each file for 90 days.",
]
QUESTION = "How often are encryption keys rotated?"
OFF_QUESTION = {
    "id": "off",
    "question": QUESTION,
    "contexts": PASSAGES,
    "answer": "Larkspur keeps 30 versions of each file for 90 days.",
}


def _eval(tmp_path: Path, records: list[dict[str, Any]], *options: str) -> list[dict[str, Any]]:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    output = tmp_path / "out.jsonl"
    assert main(["eval", str(source), "--output", str(output), *options]) == 0
    return [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def test_an_off_question_answer_is_scored_on_relevancy_by_default(tmp_path: Path) -> None:
    (row,) = _eval(tmp_path, [OFF_QUESTION])
    assert row["scores"]["groundedness"] == 1.0  # the answer is grounded, on another question
    assert row["scores"]["relevancy"] is not None
    assert row["scores"]["relevancy"] < 0.7


def test_a_rubric_is_scored_as_completeness_by_default(tmp_path: Path) -> None:
    rubric = ["30 versions of each file", "keys held in a hardware security module"]
    (row,) = _eval(tmp_path, [{**OFF_QUESTION, "id": "rubric", "rubric": rubric}])
    assert row["scores"]["completeness"] == 0.5


def test_citation_markers_are_scored_as_citation_by_default(tmp_path: Path) -> None:
    answer = "Encryption keys are rotated every 90 days [1]."
    (row,) = _eval(tmp_path, [{**OFF_QUESTION, "id": "cited", "answer": answer}])
    assert row["scores"]["citation"] == 1.0


def test_metrics_named_on_the_command_line_are_the_only_ones_scored(tmp_path: Path) -> None:
    (row,) = _eval(tmp_path, [OFF_QUESTION], "--metrics", "groundedness")
    assert row["scores"]["groundedness"] == 1.0
    assert row["scores"]["relevancy"] is None


def test_the_summary_says_which_metrics_lacked_their_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _eval(tmp_path, [OFF_QUESTION, {**OFF_QUESTION, "id": "q2", "question": None}])
    said = " ".join(capsys.readouterr().err.split())
    assert (
        "not scored for lack of input: correctness on 2 records (no reference); "
        "relevancy on 1 record (no question); completeness on 2 records (no rubric); "
        "citation on 2 records (no [N] markers in the answer)"
    ) in said


SHOUTING = """
import ragpulse

@ragpulse.metric("cli_shouting")
def cli_shouting(record):
    letters = [c for c in record.answer or "" if c.isalpha()]
    return 1.0 - sum(c.isupper() for c in letters) / len(letters) if letters else None
"""


def test_a_metric_module_adds_the_users_metric_to_the_output(tmp_path: Path) -> None:
    module = tmp_path / "cli_metrics.py"
    module.write_text(SHOUTING, encoding="utf-8")
    loud = {**OFF_QUESTION, "answer": "ENCRYPTION KEYS are rotated every 90 days."}
    (row,) = _eval(
        tmp_path,
        [loud],
        "--metric-module",
        str(module),
        "--metrics",
        "faithfulness,cli_shouting",
    )
    assert row["scores"]["faithfulness"] == 1.0
    assert 0.0 < row["scores"]["cli_shouting"] < 1.0


def test_an_unknown_metric_module_is_a_usage_error(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(OFF_QUESTION) + "\n", encoding="utf-8")
    assert main(["eval", str(source), "--metric-module", str(tmp_path / "absent.py")]) == 2


def test_every_row_carries_a_diagnosis_with_its_reason(tmp_path: Path) -> None:
    invented = {**OFF_QUESTION, "id": "drift", "answer": "Keys are rotated every 7 days."}
    missed = {
        "id": "miss",
        "question": QUESTION,
        "contexts": ["The cafeteria menu changes every Monday."],
        "answer": "Encryption keys are rotated every 90 days.",
        "reference": "Keys are rotated every 90 days.",
    }
    rows = {row["id"]: row for row in _eval(tmp_path, [OFF_QUESTION, invented, missed])}
    assert rows["drift"]["diagnosis"] == "generation_drift"
    assert rows["miss"]["diagnosis"] == "retrieval_miss"
    assert all(row["diagnosis_reason"] for row in rows.values())


def test_context_metrics_are_scored_when_named(tmp_path: Path) -> None:
    (row,) = _eval(
        tmp_path,
        [{**OFF_QUESTION, "reference": "Keys are rotated every 90 days."}],
        "--metrics",
        "context_relevance,context_precision,context_recall,context_utilisation",
    )
    assert row["scores"]["context_recall"] == 1.0
    assert row["scores"]["context_precision"] == 1.0
    assert row["scores"]["context_utilisation"] == 0.5
