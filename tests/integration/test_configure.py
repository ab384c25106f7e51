"""``configure()`` end to end: spans, scores and events arrive at a real OTLP receiver."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragpulse.settings.options import JudgeOptions
from servers.rotel_sink import ReceivedSpan, RotelSink, free_port

pytestmark = pytest.mark.integration

APP = Path(__file__).parent / "apps" / "configured_app.py"
ROOT = Path(__file__).resolve().parents[2]


def run_app(mode: str, env: dict[str, str], *extra: str, cwd: Path | None = None) -> str:
    full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT / "src")}
    for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        if key not in env:
            full_env.pop(key, None)
    done = subprocess.run(
        [sys.executable, str(APP), mode, *extra],
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def units(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == "support-bot"]


def assert_scored(spans: list[ReceivedSpan]) -> None:
    by_question = {s.attributes["ragpulse.input.question"]: s for s in units(spans)}
    grounded = by_question["When is support open?"]
    drifted = by_question["How much is the L2 router?"]
    assert grounded.attributes["ragpulse.eval.groundedness.score"] == 1.0
    assert grounded.attributes["ragpulse.eval.status"] == "ok"
    assert drifted.attributes["ragpulse.eval.groundedness.score"] == 0.0
    assert drifted.attributes["ragpulse.eval.faithfulness.label"] == "fail"
    # The offline judge scores groundedness without a label: it cannot decide it on real answers.
    assert "ragpulse.eval.groundedness.label" not in drifted.attributes
    assert drifted.attributes["ragpulse.eval.claims.contradicted"] >= 1


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_configure_exports_scored_spans_and_events_over_otlp(
    rotel_sink: RotelSink, protocol: str, tmp_path: Path
) -> None:
    endpoint = rotel_sink.http_endpoint if protocol != "grpc" else rotel_sink.grpc_endpoint
    run_app(
        "fresh",
        {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol},
        cwd=tmp_path,
    )
    spans = rotel_sink.wait_for_spans(lambda got: len(units(got)) == 2)
    assert_scored(spans)
    assert len({s.span_id for s in spans}) == len(spans)  # each span exactly once
    assert all(s.resource["service.name"] == "configured-app" for s in spans)
    unit_ids = {s.span_id for s in units(spans)}
    logs = rotel_sink.wait_for_logs(
        lambda got: sum(r.event_name == "gen_ai.evaluation.result" for r in got) >= 4, timeout=20
    )
    events = [r for r in logs if r.event_name == "gen_ai.evaluation.result"]
    assert {r.span_id for r in events} == unit_ids
    assert {r.attributes["gen_ai.evaluation.name"] for r in events} >= {
        "faithfulness",
        "groundedness",
    }


def test_configure_joins_an_app_that_set_up_opentelemetry_itself(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    out = run_app("joined", {}, rotel_sink.http_endpoint, cwd=tmp_path)
    assert "joined True" in out
    spans = rotel_sink.wait_for_spans(lambda got: len(units(got)) == 2)
    assert_scored(spans)
    # The app's own exporter sent each span once, with the scores: no unscored duplicate.
    assert len({s.span_id for s in spans}) == len(spans)
    assert all(s.resource["service.name"] == "own-setup" for s in spans)


def test_configure_without_endpoint_writes_otlp_json_lines(tmp_path: Path) -> None:
    out = run_app("fresh", {}, cwd=tmp_path)
    assert "ragpulse-traces.jsonl" in out
    lines = (tmp_path / "ragpulse-traces.jsonl").read_text().splitlines()
    spans = [
        span
        for line in lines
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    unit = [s for s in spans if s["name"] == "support-bot"]
    assert len(unit) == 2
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    keys = {a["key"] for s in unit for a in s["attributes"]}
    assert "ragpulse.eval.groundedness.score" in keys
    logs = (tmp_path / "ragpulse-logs.jsonl").read_text()
    assert "gen_ai.evaluation.result" in logs
    metrics = (tmp_path / "ragpulse-metrics.jsonl").read_text()
    assert "ragpulse.evaluation.score" in metrics


def test_configure_called_twice_evaluates_each_span_once_with_the_latest_settings(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    run_app(
        "twice",
        {"OTEL_EXPORTER_OTLP_ENDPOINT": rotel_sink.http_endpoint},
        cwd=tmp_path,
    )
    spans = rotel_sink.wait_for_spans(lambda got: len(units(got)) == 2)
    assert_scored(spans)  # the second call's default thresholds label the drifted answer "fail"
    assert len({s.span_id for s in spans}) == len(spans)
    logs = rotel_sink.wait_for_logs(
        lambda got: sum(r.event_name == "gen_ai.evaluation.result" for r in got) >= 4, timeout=20
    )
    events = [r for r in logs if r.event_name == "gen_ai.evaluation.result"]
    assert len(events) == 4  # two metrics for each of two requests: no second evaluator


PROMETHEUS_APP = """
import sys, urllib.request
import ragpulse

handle = ragpulse.configure(service_name="scraped", prometheus_port=int(sys.argv[1]))

@ragpulse.rag(name="scraped")
def ask(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm."])
    return "Support is open from 9am to 5pm."

for _ in range(3):
    ask("When is support open?")
    handle.force_flush()
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics").read().decode())
handle.shutdown()
"""


def test_prometheus_endpoint_serves_each_series_once_after_flushes(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run(
        [sys.executable, "-c", PROMETHEUS_APP, str(port)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    samples = [line for line in done.stdout.splitlines() if line and not line.startswith("#")]
    assert len(samples) == len(set(samples))
    count = next(
        line
        for line in samples
        if line.startswith("ragpulse_evaluation_score_count")
        and 'gen_ai_evaluation_name="groundedness"' in line
    )
    assert count.endswith(" 3.0")
    assert any(
        line.startswith("ragpulse_evaluator_decisions_total") and line.endswith(" 3.0")
        for line in samples
    )


def run_script(
    script: str, env: dict[str, str], *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    full_env.update(env)
    full_env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


ONE_REQUEST_APP = """
import ragpulse

handle = ragpulse.configure(service_name="settings-app")

@ragpulse.rag(name="settings-app")
def ask(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm."])
    return "Support is open from 9am to 5pm."

ask("When is support open?")
print("prometheus", handle.prometheus_url)
handle.shutdown()
"""


def test_a_bad_prometheus_port_variable_is_logged_and_the_app_runs_on(tmp_path: Path) -> None:
    done = run_script(ONE_REQUEST_APP, {"RAGPULSE_PROMETHEUS_PORT": "9464x"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "prometheus None" in done.stdout
    assert "RAGPULSE_PROMETHEUS_PORT='9464x'" in done.stderr
    assert "settings-app" in (tmp_path / "ragpulse-traces.jsonl").read_text()


def test_a_busy_prometheus_port_is_logged_and_the_app_runs_on(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run_script(ONE_REQUEST_APP, {"RAGPULSE_PROMETHEUS_PORT": str(port)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "prometheus None" in done.stdout
    assert f"cannot serve Prometheus metrics on 127.0.0.1:{port}" in done.stderr
    assert "settings-app" in (tmp_path / "ragpulse-traces.jsonl").read_text()


REFERENCE_APP = """
import json, sys
import ragpulse

results = []
# A group given as a JSON object ({"judging": {...}}) becomes its options object.
groups = {"judging": ragpulse.JudgeOptions}
keywords = {k: groups[k](**v) if k in groups else v for k, v in json.loads(sys.argv[1]).items()}
handle = ragpulse.configure(
    on_evaluation=lambda record, evaluation: results.append(evaluation), **keywords
)

@ragpulse.rag(name="reference-app")
def ask(question):
    ragpulse.record_contexts(["Refunds take 5 business days and are paid to the original card."])
    ragpulse.record_reference("Refunds take 5 business days.")
    return "Refunds take 5 business days. They are paid to the original card."

ask("How long do refunds take?")
handle.force_flush(10.0)
print(json.dumps([e.score("correctness") for e in results]))
handle.shutdown()
"""


def test_correctness_mode_from_keyword_or_variable_reaches_the_default_judge(
    tmp_path: Path,
) -> None:
    def scores(keywords: dict[str, str], env: dict[str, str]) -> list[float]:
        done = run_script(REFERENCE_APP, env, json.dumps(keywords), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout.splitlines()[-1]))

    # agreement (the default): the card is detail the reference does not address.
    assert scores({}, {}) == [1.0]
    # Ragas' f1: the card is a precision miss, P 1/2 and R 1/1.
    assert scores({"judging": {"correctness_mode": "f1"}}, {}) == [pytest.approx(2 / 3)]
    assert scores({}, {"RAGPULSE_CORRECTNESS_MODE": "f1"}) == [pytest.approx(2 / 3)]


SLOW_JUDGE_APP = """
import asyncio, json, sys
import ragpulse
from ragpulse.evaluation.types import EvalStatus, Evaluation

class SlowJudge:
    name = "slow"
    annotator_kind = "CODE"
    async def evaluate(self, record, metrics):
        await asyncio.sleep(3.0)
        return Evaluation(status=EvalStatus.NO_CLAIMS, metrics={}, judge=self.name)

results = []
handle = ragpulse.configure(
    judge=SlowJudge(), on_evaluation=lambda record, evaluation: results.append(evaluation)
)

@ragpulse.rag(name="slow")
def ask(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm."])
    return "Support is open from 9am to 5pm."

for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    ask("When is support open?")
handle.force_flush(10.0)
print(json.dumps([[e.status.value, e.error_type] for e in results]))
handle.shutdown()
"""


def test_eval_timeout_variable_bounds_each_evaluation(tmp_path: Path) -> None:
    env = {"RAGPULSE_EVAL_TIMEOUT": "0.2"}
    done = run_script(SLOW_JUDGE_APP, env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.splitlines()[-1])
    # Each evaluation ended by the 0.2 s bound (its attempts timing out opened the
    # judge's breaker), none waited the judge's 3 s.
    assert len(results) == 3
    assert all(
        status == "error" and kind in {"timeout", "breaker_open"} for status, kind in results
    )


def test_max_queue_size_variable_bounds_the_evaluation_queue(tmp_path: Path) -> None:
    env = {"RAGPULSE_MAX_QUEUE_SIZE": "1", "RAGPULSE_EVAL_CONCURRENCY": "1"}
    done = run_script(SLOW_JUDGE_APP.replace("3.0", "0.5"), env, "5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # At most one evaluation runs and one waits in the queue of one: the rest are refused.
    assert 1 <= len(json.loads(done.stdout.splitlines()[-1])) <= 2


def test_max_input_chars_variable_skips_records_too_large_to_judge(tmp_path: Path) -> None:
    env = {"RAGPULSE_MAX_INPUT_CHARS": "40"}  # the record's context and answer hold 64
    done = run_script(SLOW_JUDGE_APP.replace("3.0", "0.01"), env, "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [["skipped", "too_large"]] * 2


def test_worker_and_holding_bounds_are_settings_from_keywords_and_variables() -> None:
    from ragpulse.settings import Settings

    # The defaults are the fields' own, whatever parsing nothing does to them.
    default_queue_bytes, default_input_chars = Settings.max_queue_bytes, Settings.max_input_chars
    default_held_spans, default_held_bytes = Settings.max_held_spans, Settings.max_held_bytes
    defaults = Settings.load({}, environ={})
    assert (defaults.max_queue_bytes, defaults.max_input_chars) == (
        default_queue_bytes,
        default_input_chars,
    )
    assert (defaults.max_held_spans, defaults.max_held_bytes) == (
        default_held_spans,
        default_held_bytes,
    )
    environ = {"RAGPULSE_MAX_QUEUE_BYTES": "1048576", "RAGPULSE_MAX_HELD_SPANS": "64x"}
    read = Settings.load({"max_input_chars": 1000, "max_held_bytes": None}, environ=environ)
    assert (read.max_queue_bytes, read.max_input_chars) == (1048576, 1000)
    assert read.max_held_spans == default_held_spans  # a bad value falls back, logged
    assert "RAGPULSE_MAX_HELD_SPANS" in str(dict(read.rejected))


TWICE_APP = """
import json, sys
import ragpulse
from opentelemetry import trace

first = ragpulse.configure(evaluate=False, output_file="first-traces.jsonl")
second = ragpulse.configure(evaluate=False, output_file="second-traces.jsonl")
first.shutdown()  # replaced: must not stop what the live handle uses
tracer = trace.get_tracer("twice")
for i in range(10):
    with tracer.start_as_current_span(f"later-{i}"):
        pass
second.shutdown()
print(json.dumps({k: str(v) for k, v in second.output_files.items()}))
"""


def test_shutting_down_a_replaced_handle_keeps_the_live_one_working(tmp_path: Path) -> None:
    done = run_script(TWICE_APP, {}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout.splitlines()[-1])
    # The exporters of the first call stay (providers are set once per process), and the
    # live handle lists the files they write, not the ones its own arguments named.
    assert files["traces"] == "first-traces.jsonl"
    assert not any("second" in path for path in files.values())
    traces = (tmp_path / "first-traces.jsonl").read_text()
    assert all(f"later-{i}" in traces for i in range(10))
    assert "output_file keep the values of the first call" in done.stderr


def test_worker_and_worker_keywords_together_are_refused() -> None:
    import ragpulse
    from ragpulse.judges.lexical.judge import LexicalJudge
    from ragpulse.worker import EvalWorker

    worker = EvalWorker(LexicalJudge())
    try:
        with pytest.raises(TypeError, match=r"worker= or JudgeOptions\(concurrency=\.\.\.\)"):
            ragpulse.configure(worker=worker, judging=JudgeOptions(concurrency=2))
    finally:
        worker.shutdown(timeout=1.0)


LONG_ANSWER_APP = """
import ragpulse

handle = ragpulse.configure(service_name="caps", evaluate=False)

@ragpulse.rag(name="caps")
def ask(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm."])
    return "Support is open from 9am to 5pm. " * 100

ask("When is support open?")
handle.shutdown()
"""


def test_capture_caps_from_the_environment_reach_the_exported_span(tmp_path: Path) -> None:
    done = run_script(LONG_ANSWER_APP, {"RAGPULSE_MAX_TEXT_BYTES": "200"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = (tmp_path / "ragpulse-traces.jsonl").read_text()
    spans = [
        span
        for rs in json.loads(line.splitlines()[0])["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    unit = next(s for s in spans if s["name"] == "caps")
    answer = next(a for a in unit["attributes"] if a["key"] == "ragpulse.output.answer")
    assert len(answer["value"]["stringValue"].encode()) <= 200


EVALUATE_OFF_AGAIN_APP = """
import ragpulse

ragpulse.configure(service_name="again")
handle = ragpulse.configure(service_name="again", evaluate=False)

@ragpulse.rag(name="again")
def ask(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm."])
    return "Support is open from 9am to 5pm."

ask("When is support open?")
handle.shutdown()
"""


def test_configure_again_with_evaluate_false_stops_evaluating(tmp_path: Path) -> None:
    done = run_script(EVALUATE_OFF_AGAIN_APP, {}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    traces = (tmp_path / "ragpulse-traces.jsonl").read_text()
    assert '"name": "again"' in traces
    assert "ragpulse.eval.status" not in traces


@pytest.mark.parametrize(
    ("variable", "value"),
    [("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "ten"), ("OTEL_EXPORTER_OTLP_COMPRESSION", "zip")],
)
def test_an_otel_variable_the_grpc_exporter_cannot_use_does_not_stop_the_app(
    variable: str, value: str, tmp_path: Path
) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "RAGPULSE_SHUTDOWN_TIMEOUT": "0.5",
        variable: value,
    }
    done = run_script(ONE_REQUEST_APP, env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "When is support open?" not in done.stderr  # no traceback of the request
    assert value in done.stderr  # one warning names the value it could not use


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
        ("OTEL_BLRP_MAX_QUEUE_SIZE", "-3"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "1" * 21),
        ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "abc"),  # read as the SDK is imported
        ("OTEL_PYTHON_TRACER_PROVIDER", "not-installed"),
        ("RAGPULSE_METRIC_MODULES", "m" * (os.pathconf(".", "PC_NAME_MAX") + 1)),
    ],
)
def test_a_value_that_raised_into_configure_is_one_warning_and_the_app_runs_on(
    variable: str, value: str, tmp_path: Path
) -> None:
    done = run_script(ONE_REQUEST_APP, {variable: value}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(f"ignoring {variable}=") == 1
    assert f"ignoring {variable}='{value[:100]}" in done.stderr
    assert "using the default" in done.stderr
    assert "settings-app" in (tmp_path / "ragpulse-traces.jsonl").read_text()


def _sdk_variables() -> list[str]:
    """Every variable the SDK and the API name, and every OTEL_* row of the settings table."""
    import opentelemetry.environment_variables as api_variables
    import opentelemetry.sdk.environment_variables as sdk_variables

    from ragpulse.settings import SOURCES

    named = {
        getattr(module, name)
        for module in (sdk_variables, api_variables)
        for name in dir(module)
        if name.startswith("OTEL_") and isinstance(getattr(module, name), str)
    }
    named |= {s.env for s in SOURCES.values() if s.env and s.env.startswith("OTEL_")}
    return sorted(v for v in named if v.startswith("OTEL_"))


CHECKED_APP = ONE_REQUEST_APP.replace(
    'print("prometheus", handle.prometheus_url)', "print(sorted(handle.settings.rejected))"
)


@pytest.mark.parametrize("value", ["0", "-3", "1" * 21, "abc", "1e400", "nan"])
def test_every_otel_variable_set_to_a_bad_value_at_once_leaves_the_app_running_and_exporting(
    value: str, tmp_path: Path
) -> None:
    variables = _sdk_variables()
    done = run_script(CHECKED_APP, dict.fromkeys(variables, value), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rejected = ast.literal_eval(done.stdout.splitlines()[-1])
    assert rejected  # every run has variables this value is wrong for
    for variable in rejected:
        assert done.stderr.count(f"ignoring {variable}=") == 1, variable
    assert "settings-app" in (tmp_path / "ragpulse-traces.jsonl").read_text()


def test_a_local_model_stating_absurd_sizes_is_an_error_status_not_an_overflow(
    tmp_path: Path,
) -> None:
    from tests.models.tiny_onnx import write_nli_model

    model = write_nli_model(tmp_path / "absurd", ["support is open"])
    config = json.loads((model / "config.json").read_text())
    config.update(num_hidden_layers=12, hidden_size=10**400, intermediate_size=3072)
    (model / "config.json").write_text(json.dumps(config))
    env = {"RAGPULSE_JUDGE": "nli", "RAGPULSE_JUDGE_MODEL": str(model)}
    done = run_script(ONE_REQUEST_APP, env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "OverflowError" not in done.stderr
    spans = [
        span
        for line in (tmp_path / "ragpulse-traces.jsonl").read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    unit = next(s for s in spans if s["name"] == "settings-app")
    attributes = {a["key"]: a["value"].get("stringValue") for a in unit["attributes"]}
    assert attributes["ragpulse.eval.status"] == "error"
