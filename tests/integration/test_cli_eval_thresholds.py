"""``ragpulse eval``'s summary compares each metric with the threshold its module declares."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess

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


def test_the_summary_shows_each_metrics_own_threshold(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--metrics", "groundedness,correctness,context_relevance")
    assert done.returncode == 0, done.stderr
    rows = _summary(done.stderr)
    assert rows["groundedness"][3] == "0.7"
    assert rows["correctness"][3] == "0.5"
    # context_relevance is a share to read: no threshold, so no share below one.
    assert rows["context_relevance"][3] == "none"
    assert rows["context_relevance"][4] == "-"


def test_threshold_moves_the_named_metric_only(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--threshold", "groundedness=0.9")
    assert done.returncode == 0, done.stderr
    rows = _summary(done.stderr)
    assert rows["groundedness"][3] == "0.9"
    assert rows["faithfulness"][3] == "0.7"
    assert rows["correctness"][3] == "0.5"


def test_a_threshold_without_its_metric_is_refused(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--threshold", "0.5")
    assert done.returncode == 2
    assert "--threshold expects METRIC=VALUE" in done.stderr
    done = _eval(tmp_path, "--threshold", "nonesuch=0.5")
    assert done.returncode == 2
    assert "unknown metric" in done.stderr
