"""A user's metric that is slow to start, or never answers, fails alone.

A real app is configured with the offline judge, in its own processes, and a metric module of
its own, with a short ``evaluation_timeout`` (1 s). Its requests are evaluated one at a time,
and what it exported is read from its trace file:

- a module whose import takes 3 s (a model or a heavy library loaded at import): its
  process's start-up is nobody's judge time. The built-in scores of every request are
  written from the first; the metric fails alone while its process starts, and scores once
  it has started (the process is kept, not discarded and started cold again);
- a metric that never returns: every request's built-in scores are written, and the
  metric's error says it did not answer in time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragpulse import semconv

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 1.0  # evaluation_timeout: a third of the slow module's import

SLOW_TO_START = """
import time

import ragpulse

time.sleep(3)  # a heavy import


@ragpulse.metric("answer_length")
def answer_length(record):
    return min(1.0, len(record.answer or "") / 100)
"""

NEVER_ANSWERS = """
import time

import ragpulse


@ragpulse.metric("answer_length")
def answer_length(record):
    while True:
        time.sleep(0.1)
"""

APP = """
import sys
import time

import ragpulse

scored = []


def seen(record, evaluation):
    result = evaluation.metrics.get("answer_length")
    scored.append(result is not None and result.score is not None)


handle = ragpulse.configure(
    service_name="metric-start-app",
    metrics=("faithfulness", "groundedness", "answer_length"),
    evaluation=ragpulse.EvaluationOptions(metric_modules=["user_metrics.py"]),
    judging=ragpulse.JudgeOptions(evaluation_timeout=float(sys.argv[1])),
    bounds=ragpulse.BoundsOptions(hold_timeout=120, shutdown_timeout=60),
    on_evaluation=seen,
)


@ragpulse.rag(name="support-bot")
def answer(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."


requests, until_scored = int(sys.argv[2]), sys.argv[3] == "until-scored"
deadline = time.monotonic() + 180  # a bound for a hang
for n in range(requests):
    answer(f"q-{n}")
    handle.force_flush(60)  # this request's evaluation came back (or went out pending)
    if until_scored and scored and scored[-1] or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print("scored", sum(scored), "of", len(scored), flush=True)
handle.shutdown(60)
"""


def run_app(
    tmp_path: Path, module: str, requests: int, *, until_scored: bool
) -> list[dict[str, Any]]:
    """The unit spans the app exported, in order."""
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    (tmp_path / "user_metrics.py").write_text(module, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    mode = "until-scored" if until_scored else "all"
    done = subprocess.run(
        [sys.executable, "app.py", str(TIMEOUT), str(requests), mode],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard
    )
    assert done.returncode == 0, done.stderr
    units = []
    for line in (tmp_path / "ragpulse-traces.jsonl").read_text(encoding="utf-8").splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    if span["name"] == "support-bot":
                        attributes = span.get("attributes", [])
                        units.append(
                            {a["key"]: next(iter(a["value"].values())) for a in attributes}
                        )
    return sorted(units, key=lambda u: int(str(u[semconv.RAG_QUESTION]).split("-")[1]))


def built_ins(unit: dict[str, Any]) -> tuple[Any, Any, Any]:
    return (
        unit.get(semconv.EVAL_STATUS),
        unit.get("ragpulse.eval.faithfulness.score"),
        unit.get("ragpulse.eval.groundedness.score"),
    )


def test_a_metric_module_slow_to_start_costs_no_built_in_score_and_then_scores(
    tmp_path: Path,
) -> None:
    units = run_app(tmp_path, SLOW_TO_START, 60, until_scored=True)
    assert [built_ins(u) for u in units] == [("ok", 1.0, 1.0)] * len(units)
    # Its process was kept while it started, and scored once it had.
    assert units[-1].get("ragpulse.eval.answer_length.score") == pytest.approx(0.44)
    for unit in units[:-1]:
        assert "was still starting" in unit["ragpulse.eval.answer_length.explanation"]


def test_a_metric_that_never_answers_fails_alone(tmp_path: Path) -> None:
    units = run_app(tmp_path, NEVER_ANSWERS, 2, until_scored=False)
    assert [built_ins(u) for u in units] == [("ok", 1.0, 1.0)] * 2
    for unit in units:
        assert "answer_length failed" in unit["ragpulse.eval.answer_length.explanation"]
        assert "ragpulse.eval.answer_length.score" not in unit
