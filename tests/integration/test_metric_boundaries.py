"""A user's metric fails alone: whatever it does (hang, exit, print), the evaluation stands.

Each metric runs under its own time bound and failure boundary; a metric that misbehaves is
an ``error`` of that metric (``metric_failed``) and the other metrics of the record are
written, by ``ragpulse eval`` and in an application alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ragpulse.evaluation.types import Context, EvalStatus, RagRecord
from ragpulse.judges.lexical import LexicalJudge
from ragpulse.judging.custom_metrics import CustomMetricsJudge
from ragpulse.metrics._custom import FunctionMetric, user_spec

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = """
import asyncio
import os
import sys
import time

import ragpulse


@ragpulse.metric("stuck", timeout=1)
def stuck(record):
    time.sleep(3600)


@ragpulse.metric("stuck_async", timeout=1)
async def stuck_async(record):
    await asyncio.sleep(3600)


@ragpulse.metric("hard_exit")
def hard_exit(record):
    os._exit(7)


@ragpulse.metric("soft_exit")
def soft_exit(record):
    sys.exit(3)


@ragpulse.metric("chatty", threshold=0.9)
def chatty(record):
    print("a line the metric prints")
    return 0.5
"""

RECORDS = [
    {
        "id": f"q{n}",
        "question": "When is support open?",
        "contexts": ["Support is open from 9am to 5pm on weekdays."],
        "answer": "Support is open from 9am to 5pm on weekdays.",
    }
    for n in (1, 2)
]


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **extra}
    for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "RAGPULSE_METRICS", "RAGPULSE_JUDGE"):
        env.pop(key, None)
    return env


def _eval(
    tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "hostile.py").write_text(HOSTILE)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return subprocess.run(
        [sys.executable, "-m", "ragpulse", "eval", str(source), *options],
        cwd=tmp_path,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=100,
    )


def _rows(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_metric_that_hangs_fails_alone_and_eval_finishes(tmp_path: Path) -> None:
    metrics = "faithfulness,stuck,stuck_async"
    done = _eval(tmp_path, "--metric-module", "hostile.py", "--metrics", metrics)
    assert done.returncode == 0, done.stderr
    rows = _rows(done)
    assert [row["id"] for row in rows] == ["q1", "q2"]
    for row in rows:
        assert row["status"] == "ok"
        assert row["scores"]["faithfulness"] == 1.0
        for name in ("stuck", "stuck_async"):
            assert row["scores"][name] is None
            assert "no answer within 1s" in row["explanations"][name]
    assert "metric stuck failed on 2 records" in done.stderr


def test_a_metric_that_exits_fails_alone_and_eval_writes_every_row(tmp_path: Path) -> None:
    metrics = "faithfulness,hard_exit,soft_exit"
    done = _eval(tmp_path, "--metric-module", "hostile.py", "--metrics", metrics)
    assert done.returncode == 0, done.stderr
    rows = _rows(done)
    assert len(rows) == 2
    for row in rows:
        assert row["scores"]["faithfulness"] == 1.0
        assert (
            row["explanations"]["hard_exit"] == "hard_exit failed: its process ended (exit code 7)"
        )
        assert row["explanations"]["soft_exit"] == "soft_exit failed: it called sys.exit(3)"
    assert "metric hard_exit failed on 2 records" in done.stderr


def test_what_a_metric_prints_never_reaches_evals_stdout(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--metric-module", "hostile.py", "--metrics", "faithfulness,chatty")
    assert done.returncode == 0, done.stderr
    assert [row["scores"]["chatty"] for row in _rows(done)] == [0.5, 0.5]  # every line is JSON
    assert "a line the metric prints" in done.stderr


def test_fail_under_gates_a_custom_metric(tmp_path: Path) -> None:
    options = ("--metric-module", "hostile.py", "--metrics", "faithfulness,chatty")
    failed = _eval(tmp_path, *options, "--fail-under", "chatty=0.9")
    assert failed.returncode == 1, failed.stderr
    assert "FAIL chatty: mean 0.500 < 0.9" in failed.stderr
    passed = _eval(tmp_path, *options, "--fail-under", "chatty=0.4")
    assert passed.returncode == 0, passed.stderr
    assert "PASS chatty" in passed.stderr


def test_eval_imports_the_metric_modules_of_the_environment(tmp_path: Path) -> None:
    env = _env(RAGPULSE_METRIC_MODULES="hostile.py")
    done = _eval(tmp_path, "--metrics", "faithfulness,chatty", env=env)
    assert done.returncode == 0, done.stderr
    assert [row["scores"]["chatty"] for row in _rows(done)] == [0.5, 0.5]


def test_an_unimportable_module_of_the_environment_is_a_usage_error(tmp_path: Path) -> None:
    done = _eval(tmp_path, env=_env(RAGPULSE_METRIC_MODULES="missing_metrics.py"))
    assert done.returncode == 2
    assert "RAGPULSE_METRIC_MODULES missing_metrics.py" in done.stderr


APP = """
import ragpulse

handle = ragpulse.configure(
    service_name="hostile-app",
    metrics=("faithfulness", "stuck", "stuck_async", "hard_exit", "soft_exit", "chatty"),
    evaluation=ragpulse.EvaluationOptions(metric_modules=["hostile.py"]),
    judging=ragpulse.JudgeOptions(evaluation_timeout=30),
    bounds=ragpulse.BoundsOptions(hold_timeout=60, shutdown_timeout=60),
)


@ragpulse.rag(name="support-bot")
def answer(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."


answer("When is support open?")
print("app done")
handle.shutdown()
"""


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _value(attribute: dict[str, Any]) -> Any:
    return next(iter(attribute["value"].values()))


def test_in_an_application_the_other_metrics_of_the_request_are_written(tmp_path: Path) -> None:
    (tmp_path / "hostile.py").write_text(HOSTILE)
    (tmp_path / "app.py").write_text(APP)
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "app done\n"  # the metric's print went to stderr
    [unit] = [
        span
        for batch in _jsonl(tmp_path / "ragpulse-traces.jsonl")
        for rs in batch["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
        if span["name"] == "support-bot"
    ]
    attributes = {a["key"]: _value(a) for a in unit["attributes"]}
    assert attributes["ragpulse.eval.status"] == "ok"
    assert attributes["ragpulse.eval.faithfulness.score"] == 1.0
    assert attributes["ragpulse.eval.chatty.score"] == 0.5
    for name in ("stuck", "stuck_async", "hard_exit", "soft_exit"):
        assert f"ragpulse.eval.{name}.score" not in attributes
        assert attributes[f"ragpulse.eval.{name}.explanation"].startswith(f"{name} failed: ")
    failed = {
        _value(a)
        for batch in _jsonl(tmp_path / "ragpulse-logs.jsonl")
        for rl in batch["resourceLogs"]
        for sl in rl["scopeLogs"]
        for record in sl["logRecords"]
        if {"key": "error.type", "value": {"stringValue": "metric_failed"}} in record["attributes"]
        for a in record["attributes"]
        if a["key"] == "gen_ai.evaluation.name"
    }
    assert failed == {"stuck", "stuck_async", "hard_exit", "soft_exit"}


RECORD = RagRecord(
    "When is support open?",
    (Context("Support is open from 9am to 5pm on weekdays."),),
    "Support is open from 9am to 5pm on weekdays.",
)


def _scripted(name: str, body: Any, timeout: float = 5.0) -> FunctionMetric:
    body.__module__ = "__main__"  # as if defined in the script the application runs
    return FunctionMetric(user_spec(name, "", 0.7), body, timeout)


async def test_a_metric_of_the_main_script_that_hangs_fails_alone_on_its_own_thread() -> None:
    def hangs(record: RagRecord) -> float:
        time.sleep(3600)
        return 1.0

    judge = CustomMetricsJudge(LexicalJudge(), [_scripted("main_hangs", hangs, timeout=0.5)])
    evaluation = await judge.evaluate(RECORD, ("faithfulness", "main_hangs"))
    assert evaluation.status is EvalStatus.OK
    assert evaluation.score("faithfulness") == 1.0
    result = evaluation.metrics["main_hangs"]
    assert result.status is EvalStatus.ERROR
    assert "its thread is left behind" in (result.explanation or "")


async def test_a_metric_of_the_main_script_that_calls_sys_exit_fails_alone() -> None:
    def exits(record: RagRecord) -> float:
        sys.exit(3)

    judge = CustomMetricsJudge(LexicalJudge(), [_scripted("main_exits", exits)])
    evaluation = await judge.evaluate(RECORD, ("faithfulness", "main_exits"))
    assert evaluation.score("faithfulness") == 1.0
    assert (
        evaluation.metrics["main_exits"].explanation == "main_exits failed: it called sys.exit(3)"
    )
