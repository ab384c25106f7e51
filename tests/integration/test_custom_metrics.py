"""The user's own metrics: a function of the record and a rubric the judge model scores.

They land where the built-ins do, a failing one is an error of that metric only, and they
run where the judge runs: in its child processes, imported there by module path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.cases import custom_metrics
from tests.servers.chat_server import ChatServer, Reply, chat_server_fixture

from ragpulse.evaluation.types import Context, EvalStatus, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging.custom_metrics import CustomMetricsJudge, with_custom_metrics
from ragpulse.judging.process import ProcessJudge
from ragpulse.metrics import RubricMetric, known, load_metric_module

pytestmark = pytest.mark.integration

chat_server = chat_server_fixture()
ROOT = Path(__file__).resolve().parents[2]
RECORD = RagRecord(
    "When is support open?",
    (Context("Support is open from 9am to 5pm on weekdays."),),
    "SUPPORT IS OPEN from 9am to 5pm on weekdays.",
)


async def _evaluate(judge: Any, metrics: tuple[str, ...]) -> Any:
    try:
        return await judge.evaluate(RECORD, metrics)
    finally:
        close = getattr(judge, "aclose", None)
        if close is not None:
            await close()


async def test_a_function_metric_scores_beside_the_built_ins() -> None:
    judge = with_custom_metrics(LexicalJudge(), ["shouting"])
    evaluation = await _evaluate(judge, ("faithfulness", "shouting"))
    assert evaluation.status is EvalStatus.OK
    assert evaluation.score("faithfulness") == 1.0
    assert 0.0 < evaluation.score("shouting") < 1.0
    assert evaluation.metrics["shouting"].explanation == "13 of 33 capitals"


async def test_a_metric_that_raises_is_an_error_of_that_metric_only() -> None:
    judge = with_custom_metrics(LexicalJudge(), ["broken", "shouting"])
    evaluation = await _evaluate(judge, ("groundedness", "broken", "shouting"))
    assert evaluation.status is EvalStatus.OK
    assert evaluation.score("groundedness") == 1.0
    broken = evaluation.metrics["broken"]
    assert broken.status is EvalStatus.ERROR and broken.score is None
    assert "KeyError" in (broken.explanation or "")
    assert evaluation.score("shouting") is not None


async def test_a_score_outside_zero_to_one_is_an_error_of_that_metric() -> None:
    judge = with_custom_metrics(LexicalJudge(), ["too_big"])
    evaluation = await _evaluate(judge, ("faithfulness", "too_big"))
    result = evaluation.metrics["too_big"]
    assert result.status is EvalStatus.ERROR
    assert "outside [0, 1]" in (result.explanation or "")
    assert evaluation.score("faithfulness") == 1.0


async def test_a_function_metric_runs_in_the_judges_child_process() -> None:
    wrapped = with_custom_metrics(LexicalJudge(), ["shouting"])
    assert isinstance(wrapped, CustomMetricsJudge) and wrapped.cpu_bound
    judge = ProcessJudge(wrapped, processes=1)
    evaluation = await _evaluate(judge, ("faithfulness", "shouting"))
    assert evaluation.status is EvalStatus.OK, evaluation.explanation
    assert evaluation.metrics["shouting"].explanation == "13 of 33 capitals"


async def test_a_metric_module_given_by_file_path_is_imported_in_the_child(tmp_path: Path) -> None:
    module = tmp_path / "file_metrics.py"
    module.write_text(
        textwrap.dedent(
            """
            import ragpulse

            @ragpulse.metric("answer_length")
            def answer_length(record):
                return min(1.0, len(record.answer or "") / 100)
            """
        )
    )
    assert load_metric_module(str(module)) == ["answer_length"]
    assert "answer_length" in known()
    judge = ProcessJudge(with_custom_metrics(LexicalJudge(), ["answer_length"]), processes=1)
    evaluation = await _evaluate(judge, ("answer_length",))
    assert evaluation.score("answer_length") == pytest.approx(len(RECORD.answer or "") / 100)


@pytest.fixture
async def tone(chat_server: ChatServer) -> AsyncIterator[RubricMetric]:
    metric = RubricMetric(
        "tone_test",
        criteria="Polite and calm; no capitals used for emphasis.",
        model="judge-model",
        base_url=chat_server.url,
        api_key="test-key",
    )
    yield metric


async def test_a_rubric_metric_is_one_call_scored_with_its_reasons(
    chat_server: ChatServer, tone: RubricMetric
) -> None:
    chat_server.script(Reply.json({"score": 0.4, "reasons": "It shouts the opening words."}))
    judge = with_custom_metrics(LexicalJudge(), ["tone_test"])
    evaluation = await _evaluate(judge, ("faithfulness", "tone_test"))
    assert chat_server.request_count == 1
    assert evaluation.score("tone_test") == 0.4
    assert evaluation.metrics["tone_test"].explanation == "It shouts the opening words."
    assert evaluation.usage.calls == 1
    request = chat_server.chat_requests[0]
    assert "Polite and calm" in request.system
    # The record is data, fenced with the call's nonce.
    assert "nonce=" in request.user and "SUPPORT IS OPEN" in request.user


async def test_a_rubric_reply_out_of_range_is_an_error_of_that_metric(
    chat_server: ChatServer, tone: RubricMetric
) -> None:
    chat_server.script(Reply.json({"score": 7, "reasons": "Very polite."}))
    judge = with_custom_metrics(LexicalJudge(), ["tone_test"])
    evaluation = await _evaluate(judge, ("faithfulness", "tone_test"))
    assert evaluation.metrics["tone_test"].status is EvalStatus.ERROR
    assert evaluation.score("faithfulness") == 1.0


def test_a_second_metric_of_a_taken_name_is_refused() -> None:
    import ragpulse

    with pytest.raises(ValueError, match="already named"):
        ragpulse.metric("shouting")(lambda record: 1.0)
    with pytest.raises(ValueError, match="built-in"):
        ragpulse.metric("faithfulness")(lambda record: 1.0)


APP = """
import sys
import ragpulse

tone = ragpulse.RubricMetric("tone", criteria="Polite and calm.", model="judge-model",
                             base_url=sys.argv[1], api_key="test-key")
handle = ragpulse.configure(
    service_name="custom-app",
    metrics=("faithfulness", "shouting", tone),
    evaluation=ragpulse.EvaluationOptions(metric_modules=["my_metrics.py"]),
    bounds=ragpulse.BoundsOptions(hold_timeout=60, shutdown_timeout=60),
)

@ragpulse.rag(name="support-bot")
def answer(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "SUPPORT IS OPEN from 9am to 5pm on weekdays."

answer("When is support open?")
handle.shutdown()
"""

MODULE = """
import ragpulse

@ragpulse.metric("shouting", threshold=0.9)
def shouting(record):
    letters = [c for c in record.answer or "" if c.isalpha()]
    return 1.0 - sum(c.isupper() for c in letters) / len(letters) if letters else None
"""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_configured_custom_metrics_land_on_the_span_the_histogram_and_the_log_events(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat_server.script(Reply.json({"score": 0.5, "reasons": "Loud but polite."}))
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "my_metrics.py").write_text(MODULE)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "RAGPULSE_METRICS", "RAGPULSE_JUDGE"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, "app.py", chat_server.url],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    spans = [
        span
        for batch in _lines(tmp_path / "ragpulse-traces.jsonl")
        for rs in batch["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
        if span["name"] == "support-bot"
    ]
    [unit] = spans
    attributes = {a["key"]: next(iter(a["value"].values())) for a in unit["attributes"]}
    assert attributes["ragpulse.eval.faithfulness.score"] == 1.0
    assert 0.0 < attributes["ragpulse.eval.shouting.score"] < 0.9
    assert attributes["ragpulse.eval.shouting.label"] == "fail"  # its own threshold, 0.9
    assert attributes["ragpulse.eval.tone.score"] == 0.5
    assert attributes["ragpulse.eval.tone.explanation"] == "Loud but polite."
    logs = (tmp_path / "ragpulse-logs.jsonl").read_text()
    assert '"shouting"' in logs and '"tone"' in logs
    metrics = (tmp_path / "ragpulse-metrics.jsonl").read_text()
    assert '"shouting"' in metrics and '"tone"' in metrics


def test_a_metric_of_the_main_script_keeps_the_judge_out_of_child_processes() -> None:
    def scripted(record: RagRecord) -> float:
        return 1.0

    scripted.__module__ = "__main__"  # as if defined in the script the app runs
    spec = custom_metrics.shouting  # any importable metric keeps processes available
    from ragpulse.metrics._custom import FunctionMetric, user_spec

    in_script = FunctionMetric(user_spec("scripted", "", 0.7), scripted)
    assert not CustomMetricsJudge(LexicalJudge(), [in_script]).cpu_bound
    importable = FunctionMetric(user_spec("importable", "", 0.7), spec)
    assert CustomMetricsJudge(LexicalJudge(), [importable]).cpu_bound
