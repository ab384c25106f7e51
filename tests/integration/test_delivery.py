"""Delivery: what ragpulse exports reaches the backend through restarts, SIGTERM and exit.

Each test runs ``apps/delivery_app.py`` as its own process against a real rotel collector,
and disturbs it the way production does: the backend restarts, the process is terminated,
the script ends without ``shutdown()``, the endpoint is unreachable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from ragpulse import semconv
from servers.rotel_restart import RestartableSink
from servers.rotel_sink import RotelSink, free_port

pytestmark = pytest.mark.integration

APP = Path(__file__).parent / "apps" / "delivery_app.py"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def restartable_sink(rotel_binary: Path) -> Iterator[RestartableSink]:
    """A rotel collector the test can stop and start again on the same ports."""
    with RestartableSink(binary=rotel_binary) as sink:
        yield sink


def app_env(endpoint: str | None, protocol: str = "http/protobuf", **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    env.update(extra)
    return env


def start_app(*args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APP), *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


Completed = CompletedProcess[str]


def run_app(*args: str, env: dict[str, str], cwd: Path, timeout: float) -> Completed:
    """Run the app to its end (``timeout`` is a hang guard); it must exit 0."""
    done = subprocess.run(
        [sys.executable, str(APP), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done


def endpoint_of(sink: RotelSink, protocol: str) -> str:
    return sink.grpc_endpoint if protocol == "grpc" else sink.http_endpoint


def request_names(sink: RotelSink) -> set[str]:
    return {s.name for s in sink.spans() if s.name.startswith("req-")}


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_backend_restart_loses_no_span_and_no_evaluation_event(
    restartable_sink: RestartableSink, protocol: str, tmp_path: Path
) -> None:
    count = 200
    env = app_env(endpoint_of(restartable_sink, protocol), protocol)
    app = start_app("stream-evaluated", str(count), "20", env=env, cwd=tmp_path)
    # Once the app is exporting (not a guess at how long it takes to start):
    restartable_sink.wait_for_spans(
        lambda got: any(s.name == "support-bot" for s in got), timeout=120
    )
    restartable_sink.pause()  # longer than the OTLP exporter's own 10 s of retries
    time.sleep(14)
    restartable_sink.resume()
    _out, err = app.communicate(timeout=300)  # a hang guard
    assert app.returncode == 0, err

    def questions() -> set[object]:
        units = [s for s in restartable_sink.spans() if s.name == "support-bot"]
        return {s.attributes["ragpulse.input.question"] for s in units}

    restartable_sink.wait_for_spans(lambda got: len(questions()) >= count, 30)
    assert questions() == {f"q-{i}" for i in range(count)}
    # Two events per request (faithfulness and groundedness), each delivered once.
    events = restartable_sink.wait_for_logs(
        lambda got: sum(r.event_name == "gen_ai.evaluation.result" for r in got) >= 2 * count, 30
    )
    assert sum(r.event_name == "gen_ai.evaluation.result" for r in events) == 2 * count


def test_batch_over_the_grpc_receiver_limit_is_split_and_delivered(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    # 22 spans of 400 KiB: one 8.6 MiB batch, over gRPC's 4 MiB default limit.
    env = app_env(rotel_sink.grpc_endpoint, "grpc")
    run_app("big", "22", "400", env=env, cwd=tmp_path, timeout=300)
    rotel_sink.wait_for_spans(lambda got: len(request_names(rotel_sink)) >= 22, 30)
    assert request_names(rotel_sink) == {f"req-{i}" for i in range(22)}


def test_a_burst_of_spans_from_several_threads_loses_none(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    # Ended faster than a batch processor's thread drains them: the SDK's default queue of
    # 2,048 dropped about 6 % of these before they reached ragpulse's exporter.
    count = 20_000
    done = run_app(
        "burst", str(count), "4", env=app_env(rotel_sink.http_endpoint), cwd=tmp_path, timeout=300
    )
    assert "Queue full" not in done.stderr
    rotel_sink.wait_for_spans(lambda got: len(request_names(rotel_sink)) >= count, 60)
    assert request_names(rotel_sink) == {f"req-{i}" for i in range(count)}


@pytest.mark.parametrize("mode", ["sigterm", "sigterm-chained"])
def test_sigterm_flushes_every_span_before_the_process_ends_by_default(
    rotel_sink: RotelSink, mode: str, tmp_path: Path
) -> None:
    count = 1450
    app = start_app(mode, str(count), env=app_env(rotel_sink.http_endpoint), cwd=tmp_path)
    assert app.stdout is not None
    # With default settings ragpulse's handler is in place (chaining to the app's own).
    assert app.stdout.readline().split() == ["ready", "ragpulse"]
    app.send_signal(signal.SIGTERM)
    out, err = app.communicate(timeout=120)
    if mode == "sigterm":
        assert app.returncode == -signal.SIGTERM, err  # SIGTERM still ends the process
    else:
        assert "app handler ran" in out and app.returncode == 0, err
    rotel_sink.wait_for_spans(lambda got: len(request_names(rotel_sink)) >= count, 60)
    assert len(request_names(rotel_sink)) == count


def test_sigterm_under_load_delivers_every_request_finished_before_it(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    # Default settings but the grace, a bound in time: 60 s (a container platform's
    # terminationGracePeriodSeconds can give it), so that on a machine loaded several times
    # over its cores the app's four threads, still running while the held spans go out, do
    # not race the test: what it checks is that nothing finished is lost, not a pace.
    env = app_env(rotel_sink.http_endpoint, RAGPULSE_SHUTDOWN_TIMEOUT="60")
    app = start_app("sigterm-load", "4", env=env, cwd=tmp_path)
    assert app.stdout is not None
    finished: set[str] = set()
    deadline = time.monotonic() + 120.0  # a bound for a hang, not a pace
    while len(finished) < 1650 and time.monotonic() < deadline:
        line = app.stdout.readline()
        if not line:
            break
        finished.add(line.split()[1])
    assert len(finished) >= 1650, app.stderr.read() if app.stderr else ""
    app.send_signal(signal.SIGTERM)  # every request in `finished` returned before this
    _, err = app.communicate(timeout=180)
    assert app.returncode == -signal.SIGTERM, err

    def questions() -> set[str]:
        return {
            str(s.attributes.get(semconv.RAG_QUESTION))
            for s in rotel_sink.spans()
            if s.name == "support-bot"
        }

    try:
        rotel_sink.wait_for_spans(lambda got: finished <= questions(), 60)
    except AssertionError:
        missing = sorted(finished - questions())
        why = f"{len(missing)} missing, e.g. {missing[:5]}; app: {err[-3000:]}"
        raise AssertionError(why) from None


def test_sigterm_while_evaluations_run_exports_every_unit_with_a_status(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    # The judge never answers, so whatever the machine's load every evaluation is unfinished
    # at SIGTERM, and two threads go on ending requests while ragpulse waits half the grace
    # for them. The grace is a bound for a hang, not a pace: the spans must all arrive.
    env = app_env(rotel_sink.http_endpoint, RAGPULSE_SHUTDOWN_TIMEOUT="10")
    app = start_app("sigterm-hanging", "2", env=env, cwd=tmp_path)
    assert app.stdout is not None
    finished = {app.stdout.readline().split()[1] for _ in range(100)}
    app.send_signal(signal.SIGTERM)  # every request in `finished` returned before this
    _, err = app.communicate(timeout=180)
    assert app.returncode == -signal.SIGTERM, err

    def units() -> dict[str, dict[str, object]]:
        return {
            str(s.attributes.get(semconv.RAG_QUESTION)): dict(s.attributes)
            for s in rotel_sink.spans()
            if s.name == "support-bot"
        }

    rotel_sink.wait_for_spans(lambda got: finished <= set(units()), 60)
    statuses = [u.get(semconv.EVAL_STATUS) for u in units().values()]
    without = statuses.count(None)
    assert without == 0, f"{without} of {len(statuses)} unit spans without a status"
    assert "pending" in statuses  # the held ones: their evaluation never finished


def test_handle_sigterm_off_leaves_sigterm_to_the_application(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    env = app_env(rotel_sink.http_endpoint, RAGPULSE_HANDLE_SIGTERM="0")
    app = start_app("sigterm", "1", env=env, cwd=tmp_path)
    assert app.stdout is not None
    assert app.stdout.readline().split() == ["ready", "default"]
    app.send_signal(signal.SIGTERM)
    app.communicate(timeout=120)
    assert app.returncode == -signal.SIGTERM


def test_exit_without_shutdown_and_a_hanging_judge_delivers_the_span_within_the_grace(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    env = app_env(rotel_sink.http_endpoint, RAGPULSE_SHUTDOWN_TIMEOUT="5")
    # The judge never answers and hold_timeout is 45 s; exit must wait for neither: the run's
    # bound stays under the hold, with room for a slow start on a busy machine.
    run_app("hang", env=env, cwd=tmp_path, timeout=40)
    unit = rotel_sink.wait_for_span(lambda s: s.name == "support-bot")
    assert unit.attributes["ragpulse.eval.status"] == "pending"


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_unreachable_endpoint_does_not_hold_exit(protocol: str, tmp_path: Path) -> None:
    # Spans, events and metrics to an endpoint nothing listens on, and no shutdown():
    # each signal's exporter retried for its own 10 s at exit (21.7 s in all). The exit is
    # timed from the app's last line (CLOCK_MONOTONIC is the machine's, in both processes),
    # so a slow start on a busy machine does not count; a 1 s grace is far from 21.7 s.
    dead = f"http://127.0.0.1:{free_port()}"
    env = app_env(dead, protocol, RAGPULSE_SHUTDOWN_TIMEOUT="1")
    done = run_app("short", env=env, cwd=tmp_path, timeout=300)
    ended = time.monotonic()
    [line] = [line for line in done.stdout.splitlines() if line.startswith("exiting at ")]
    assert ended - float(line.removeprefix("exiting at ")) < 15.0


def test_force_flush_is_false_while_the_backend_is_unreachable(tmp_path: Path) -> None:
    env = app_env(f"http://127.0.0.1:{free_port()}", RAGPULSE_SHUTDOWN_TIMEOUT="1")
    done = run_app("flush", env=env, cwd=tmp_path, timeout=30)
    assert "flushed False" in done.stdout


def test_force_flush_is_false_while_an_evaluation_is_in_flight(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    done = run_app("flush-hang", env=app_env(rotel_sink.http_endpoint), cwd=tmp_path, timeout=60)
    assert "flushed False" in done.stdout  # the evaluation was still running
    assert "then flushed True" in done.stdout
    rotel_sink.wait_for_span(lambda s: s.name == "support-bot")


DROPS_APP = """
import sys, time, urllib.request
import ragpulse
from opentelemetry import trace

handle = ragpulse.configure(evaluate=False, prometheus_port=int(sys.argv[1]))
with trace.get_tracer("drops").start_as_current_span("never-delivered"):
    pass
# Past export_buffer_seconds (and one failed request) the span is given up, and counted.
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    page = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics").read().decode()
    if "ragpulse_evaluator_export_dropped" in page:
        break
    time.sleep(0.2)
print(page)
handle.shutdown()
"""


def test_what_the_buffer_gives_up_is_counted_and_logged_once(tmp_path: Path) -> None:
    env = app_env(
        f"http://127.0.0.1:{free_port()}",
        RAGPULSE_EXPORT_BUFFER_SECONDS="0.5",
        RAGPULSE_SHUTDOWN_TIMEOUT="1",
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", DROPS_APP, str(free_port())],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    dropped = [
        line
        for line in done.stdout.splitlines()
        if line.startswith("ragpulse_evaluator_export_dropped")
        and 'ragpulse_export_signal="traces"' in line
        and 'ragpulse_export_reason="expired"' in line
    ]
    assert dropped and dropped[0].endswith(" 1.0")
    assert done.stderr.count("dropping traces (expired") == 1
