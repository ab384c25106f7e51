"""``ragpulse eval`` labels each score against its threshold: the user's, else the judge's
declaration, else the metric module's; none where the judge declines a label."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess

from ragpulse.judges._labels import label_policy

CONTEXT = "The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall."
RECORD = {
    "id": "r1",
    "question": "When was the tower completed?",
    "contexts": [CONTEXT],
    "answer": "The Eiffel Tower was completed in 1889.",
    "reference": "It was completed in 1889.",
}


def _eval(tmp_path: Path, *args: str) -> CompletedProcess[str]:
    records = tmp_path / "in.jsonl"
    records.write_text(json.dumps(RECORD) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "ragpulse.cli", "eval", str(records)]
    command += ["--output", str(tmp_path / "out.jsonl"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _summary(stderr: str) -> dict[str, list[str]]:
    """Metric -> its row of the summary table (n, mean, p10, threshold, below it)."""
    rows = [line.split("│")[1:-1] for line in stderr.splitlines() if line.startswith("│")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows if len(cells) == 6}


def _labels(tmp_path: Path) -> dict[str, str | None]:
    line = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()[0]
    labels: dict[str, str | None] = json.loads(line)["labels"]
    return labels


def test_the_summary_shows_each_metrics_threshold_under_the_judge(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--metrics", "faithfulness,groundedness,correctness,context_relevance")
    assert done.returncode == 0, done.stderr
    rows = _summary(done.stderr)
    assert rows["faithfulness"][3] == f"{label_policy('lexical')['faithfulness'].threshold:g}"
    assert rows["correctness"][3] == "0.5"
    # The offline judge declines groundedness's label; context_relevance is a share to read.
    for metric in ("groundedness", "context_relevance"):
        assert rows[metric][3] == "unlabelled"
        assert rows[metric][4] == "-"


def test_each_score_has_its_label_beside_it_and_none_where_the_judge_declines(
    tmp_path: Path,
) -> None:
    done = _eval(tmp_path, "--metrics", "faithfulness,groundedness,context_relevance")
    assert done.returncode == 0, done.stderr
    labels = _labels(tmp_path)
    assert labels["faithfulness"] == "pass"
    assert labels["groundedness"] is None
    assert labels["context_relevance"] is None


def test_the_summary_says_why_a_scored_metric_has_no_label(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--metrics", "groundedness")
    assert done.returncode == 0, done.stderr
    assert "groundedness is scored without a pass/fail label by the lexical judge" in done.stderr


def test_a_threshold_given_labels_a_metric_the_judge_declines(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--metrics", "groundedness", "--threshold", "groundedness=0.5")
    assert done.returncode == 0, done.stderr
    assert _labels(tmp_path)["groundedness"] == "pass"
    assert "without a pass/fail label" not in done.stderr


def test_threshold_moves_the_named_metric_only(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--threshold", "groundedness=0.9")
    assert done.returncode == 0, done.stderr
    rows = _summary(done.stderr)
    assert rows["groundedness"][3] == "0.9"
    assert rows["faithfulness"][3] == f"{label_policy('lexical')['faithfulness'].threshold:g}"
    assert rows["correctness"][3] == "0.5"


def test_a_threshold_without_its_metric_is_refused(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--threshold", "0.5")
    assert done.returncode == 2
    assert "--threshold expects METRIC=VALUE" in done.stderr
    done = _eval(tmp_path, "--threshold", "nonesuch=0.5")
    assert done.returncode == 2
    assert "unknown metric" in done.stderr
