"""``ragpulse eval`` run as a real process on small JSONL files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CONTEXT = "The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall."
GOOD = {
    "id": "good",
    "question": "When was the tower completed?",
    "contexts": [CONTEXT],
    "answer": "The Eiffel Tower was completed in 1889.",
}
BAD = {
    "id": "bad",
    "question": "Who designed it?",
    "contexts": [CONTEXT],
    "answer": "It was designed by a committee of Belgian monks.",
}


def _write(path: Path, *lines: dict[str, Any] | str) -> Path:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _eval(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ragpulse.cli", "eval", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_record_gets_one_output_line_with_the_documented_keys(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", GOOD, BAD), "--output", out)
    assert done.returncode == 0, done.stderr
    results = _results(out)
    assert [r["id"] for r in results] == ["good", "bad"]
    for result in results:
        assert set(result) == {
            "id",
            "status",
            "scores",
            "claims",
            "judge",
            "error_type",
            "error",
        }
        assert set(result["scores"]) == {"faithfulness", "groundedness", "correctness"}
        for claim in result["claims"]:
            assert set(claim) == {"text", "answer_start", "answer_end", "verdict", "evidence"}
    good_claim = results[0]["claims"][0]
    assert good_claim["verdict"] == "SUPPORTED"
    evidence = good_claim["evidence"]
    assert set(evidence) == {"context_index", "start", "end", "text"}
    assert CONTEXT[evidence["start"] : evidence["end"]] == evidence["text"]
    assert results[0]["scores"]["groundedness"] == 1.0
    assert results[1]["scores"]["groundedness"] == 0.0
    assert results[0]["judge"] == "lexical"


def test_correctness_is_null_without_a_reference_and_scored_with_one(tmp_path: Path) -> None:
    with_reference = {
        **GOOD,
        "id": "ref",
        "reference": "It was completed in 1889, the Eiffel Tower.",
    }
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", GOOD, with_reference), "--output", out)
    assert done.returncode == 0, done.stderr
    no_ref, ref = _results(out)
    assert no_ref["scores"]["correctness"] is None
    assert ref["scores"]["correctness"] == 1.0


def test_a_bad_line_gets_an_invalid_input_row_so_outputs_align_with_inputs(
    tmp_path: Path,
) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, "{not json", {"id": "x", "answer": "a"}, BAD)
    out = tmp_path / "out.jsonl"
    done = _eval(source, "--output", out)
    assert done.returncode == 3, done.stderr
    rows = _results(out)
    assert [r["id"] for r in rows] == ["good", "2", "x", "bad"]
    for row in rows[1:3]:
        assert row["status"] == "error" and row["error_type"] == "invalid_input"
        assert row["scores"] == {"faithfulness": None, "groundedness": None, "correctness": None}
    assert "line 2" in rows[1]["error"] and "contexts" in rows[2]["error"]
    assert "line 2" in done.stderr
    assert "line 3" in done.stderr


def test_context_is_accepted_as_an_alias_of_contexts(tmp_path: Path) -> None:
    record = {"id": "alias", "context": [CONTEXT], "answer": GOOD["answer"]}
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", record), "--output", out)
    assert done.returncode == 0, done.stderr
    assert _results(out)[0]["scores"]["groundedness"] == 1.0


def test_results_go_to_stdout_and_the_summary_to_stderr(tmp_path: Path) -> None:
    done = _eval(_write(tmp_path / "in.jsonl", GOOD, BAD))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in lines] == ["good", "bad"]
    assert "mean" in done.stderr and "p10" in done.stderr
    assert "groundedness" in done.stderr


def test_only_the_asked_metrics_are_scored(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", GOOD), "--metrics", "groundedness", "--output", out)
    assert done.returncode == 0, done.stderr
    scores = _results(out)[0]["scores"]
    assert scores == {"faithfulness": None, "groundedness": 1.0, "correctness": None}


def test_an_empty_answer_is_reported_as_no_claims(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _eval(_write(tmp_path / "in.jsonl", {**GOOD, "answer": ""}), "--output", out)
    assert done.returncode == 0, done.stderr
    result = _results(out)[0]
    assert result["status"] == "no_claims"
    assert result["scores"]["groundedness"] is None


def test_fail_under_exits_1_when_a_mean_is_below_the_gate(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, BAD)  # groundedness mean 0.5
    failed = _eval(source, "--output", tmp_path / "o.jsonl", "--fail-under", "groundedness=0.8")
    assert failed.returncode == 1
    assert "groundedness" in failed.stderr


def test_fail_under_exits_0_when_every_mean_meets_its_gate(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", GOOD, BAD)
    passed = _eval(
        source,
        "--output",
        tmp_path / "o.jsonl",
        "--fail-under",
        "groundedness=0.4",
        "--fail-under",
        "faithfulness=0.5",
    )
    assert passed.returncode == 0, passed.stderr


def test_an_unknown_metric_is_a_usage_error(tmp_path: Path) -> None:
    done = _eval(_write(tmp_path / "in.jsonl", GOOD), "--metrics", "fluency")
    assert done.returncode == 2
    assert "fluency" in done.stderr


def test_a_missing_input_file_is_a_usage_error(tmp_path: Path) -> None:
    done = _eval(tmp_path / "absent.jsonl")
    assert done.returncode == 2
    assert "absent.jsonl" in done.stderr
