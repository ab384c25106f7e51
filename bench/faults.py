"""Faults a production RAG app meets, replayed against a real rotel collector.

Each scenario runs a small app configured with ``ragpulse.configure()`` as its own
process (this file, with ``--app``), disturbs it, and counts what reached the
collector:

- ``outage-http``, ``outage-grpc``: requests for 60 s; the backend is down for 30 s
  in the middle (stopped, then started again on the same ports).
- ``sigterm``: 1,450 requests, then SIGTERM (``handle_sigterm=True``).
- ``overload``: 2,000 requests as fast as possible against a judge that takes 50 ms
  with one evaluation at a time and a queue of 20.
- ``hostile``: retrieved items and answers a careless or hostile app passes in (a
  self-referencing dict, an object whose ``__repr__`` raises, a one-shot
  generator, 100,000 passages, a 2 MB answer).

A span is lost when a request's span never arrives; a log record (an evaluation
event) is lost when the app emitted it and it never arrived; an app error is an
exception ragpulse raised into the app (or a changed return value);
``max_request_ms`` is the slowest request as the app timed it. Ends with
``RESULT spans_lost=… logs_lost=… app_errors=… max_request_ms=…``.

    python bench/faults.py            # all scenarios, about four minutes
    python bench/faults.py --quick    # a 10 s outage, for a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from tests.servers.rotel_restart import RestartableSink  # noqa: E402
from tests.servers.rotel_sink import RotelSink  # noqa: E402

UNIT = "faults-app"
LOG_COUNT_ENV = "FAULTS_LOG_COUNT_FILE"


# --- the app (run as its own process) -------------------------------------------------------


def _count_emitted_logs(path: Path) -> None:
    """Count the log records the app emits; the count is written when the provider shuts down."""
    from opentelemetry import _logs
    from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord

    class Counting(LogRecordProcessor):
        def __init__(self) -> None:
            self.emitted = 0

        def on_emit(self, log_record: ReadWriteLogRecord) -> None:
            self.emitted += 1

        def shutdown(self) -> None:
            path.write_text(str(self.emitted))

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    provider = _logs.get_logger_provider()
    if isinstance(provider, LoggerProvider):
        # Added after ragpulse's batch processor, so it writes once that one has exported.
        provider.add_log_record_processor(Counting())


def _app(mode: str, count: int, seconds: float) -> None:
    import ragpulse
    from ragpulse.evaluation.types import EvalStatus, Evaluation, RagRecord

    class SlowJudge:
        name = "slow"
        annotator_kind = "CODE"

        async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
            await asyncio.sleep(0.05)
            return Evaluation(status=EvalStatus.NO_CLAIMS, metrics={}, judge=self.name)

    options: dict[str, object] = {"service_name": UNIT}
    if mode == "sigterm":
        options["handle_sigterm"] = True
    if mode == "overload":
        options.update(judge=SlowJudge(), concurrency=1, max_queue_size=20)
    handle = ragpulse.configure(**options)  # type: ignore[arg-type]
    _count_emitted_logs(Path(os.environ[LOG_COUNT_ENV]))

    class Unreadable:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

        __str__ = __repr__

    looped: dict[str, object] = {"text": "Support is open from 9am to 5pm."}
    looped["a"] = looped
    looped["b"] = looped
    hostile_contexts: list[object] = [
        ["Support is open from 9am to 5pm.", Unreadable()],
        [looped],
        [f"Passage {i} about opening hours." for i in range(100_000)],
        ["Support is open from 9am to 5pm."],
    ]

    @ragpulse.retrieval
    def search(question: str, i: int) -> object:
        if mode == "hostile":
            kind = i % 5
            if kind == 3:
                return (d for d in ["Support is open from 9am to 5pm."])
            return hostile_contexts[kind % len(hostile_contexts)]
        return ["Support is open from 9am to 5pm on weekdays."]

    @ragpulse.rag(name=UNIT)
    def answer(question: str, i: int) -> str:
        docs = search(question, i)
        # Undecorated, the caller reads the generator's one passage; so must it here.
        generated = mode == "hostile" and i % 5 == 3
        if generated and list(docs) != ["Support is open from 9am to 5pm."]:  # type: ignore[call-overload]
            raise AssertionError("the retriever's generator reached the app changed")
        if mode == "hostile" and i % 5 == 4:
            return "Support is open from 9am to 5pm. " * 60_000
        return f"Support is open from 9am to 5pm on weekdays. ({i})"

    errors = 0
    slowest = 0.0
    pause = seconds / count if seconds else 0.0
    for i in range(count):
        started = time.perf_counter()
        try:
            result = answer("When is support open?", i)
            if (
                mode != "hostile"
                and result != f"Support is open from 9am to 5pm on weekdays. ({i})"
            ):
                errors += 1
        except Exception:
            errors += 1
        slowest = max(slowest, time.perf_counter() - started)
        if pause:
            time.sleep(pause)
    print(json.dumps({"requests": count, "app_errors": errors, "max_request_ms": slowest * 1e3}))
    sys.stdout.flush()
    if mode == "sigterm":
        while True:
            time.sleep(0.1)
    handle.shutdown()


# --- the harness ------------------------------------------------------------------------------


@dataclass
class Outcome:
    scenario: str
    requests: int
    received: int
    spans_lost: int
    logs_emitted: int
    logs_lost: int
    app_errors: int
    max_request_ms: float
    seconds: float


def _start(mode: str, count: int, seconds: float, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--app", mode, str(count), str(seconds)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _log_count_file() -> Path:
    return Path(tempfile.mkdtemp(prefix="ragpulse-faults-")) / "logs-emitted"


def _env(sink: RotelSink, protocol: str, log_count: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    env[LOG_COUNT_ENV] = str(log_count)
    env["PYTHONPATH"] = str(REPO / "src")
    env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = (
        sink.grpc_endpoint if protocol == "grpc" else sink.http_endpoint
    )
    env["OTEL_METRIC_EXPORT_INTERVAL"] = "5000"
    return env


def _count(
    sink: RotelSink, requests: int, log_count: Path, settle: float = 20.0
) -> tuple[int, int, int, int]:
    """Spans received and lost, log records emitted and lost (waiting up to ``settle`` s)."""
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        if len({s.span_id for s in sink.spans() if s.name == UNIT}) >= requests:
            break
        time.sleep(0.5)
    emitted = int(log_count.read_text()) if log_count.exists() else 0
    while time.monotonic() < deadline and len(sink.logs()) < emitted:
        time.sleep(0.5)
    received = len({s.span_id for s in sink.spans() if s.name == UNIT})
    logs_lost = max(0, emitted - len(sink.logs()))
    return received, max(0, requests - received), emitted, logs_lost


def _app_report(process: subprocess.Popen[str], timeout: float) -> dict[str, float]:
    out, err = process.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the app printed no report (exit {process.returncode}): {err[-2000:]}")
    report: dict[str, float] = json.loads(lines[-1])
    if process.returncode not in (0, -signal.SIGTERM):
        report["app_errors"] = report.get("app_errors", 0) + 1
    return report


def outage(protocol: str, down: float) -> Outcome:
    started = time.monotonic()
    log_count = _log_count_file()
    sink = RestartableSink()
    sink.start()
    try:
        requests, seconds = int(7.5 * (down + 30)), down + 30
        app = _start("outage", requests, seconds, _env(sink, protocol, log_count))
        time.sleep(15)
        sink.pause()
        time.sleep(down)
        sink.resume()
        report = _app_report(app, timeout=seconds + 120)
        received, lost, emitted, logs_lost = _count(sink, requests, log_count)
    finally:
        sink.stop()
    name = f"outage-{'grpc' if protocol == 'grpc' else 'http'} ({down:g} s down)"
    return Outcome(
        name,
        requests,
        received,
        lost,
        emitted,
        logs_lost,
        int(report["app_errors"]),
        report["max_request_ms"],
        time.monotonic() - started,
    )


def sigterm() -> Outcome:
    started = time.monotonic()
    log_count = _log_count_file()
    with RotelSink() as sink:
        requests = 1450
        app = _start("sigterm", requests, 0.0, _env(sink, "http/protobuf", log_count))
        assert app.stdout is not None
        first = app.stdout.readline()
        app.send_signal(signal.SIGTERM)
        app.communicate(timeout=60)
        report = json.loads(first)
        if app.returncode != -signal.SIGTERM:
            report["app_errors"] += 1
        received, lost, emitted, logs_lost = _count(sink, requests, log_count)
    return Outcome(
        "sigterm",
        requests,
        received,
        lost,
        emitted,
        logs_lost,
        int(report["app_errors"]),
        report["max_request_ms"],
        time.monotonic() - started,
    )


def run_app_scenario(mode: str, requests: int) -> Outcome:
    started = time.monotonic()
    log_count = _log_count_file()
    with RotelSink() as sink:
        app = _start(mode, requests, 0.0, _env(sink, "http/protobuf", log_count))
        report = _app_report(app, timeout=600)
        received, lost, emitted, logs_lost = _count(sink, requests, log_count)
    return Outcome(
        mode,
        requests,
        received,
        lost,
        emitted,
        logs_lost,
        int(report["app_errors"]),
        report["max_request_ms"],
        time.monotonic() - started,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 10 s outage instead of 30 s")
    parser.add_argument(
        "--app", nargs=3, metavar=("MODE", "COUNT", "SECONDS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.app:
        mode, count, seconds = args.app
        _app(mode, int(count), float(seconds))
        return
    down = 10.0 if args.quick else 30.0
    outcomes = [
        outage("http/protobuf", down),
        outage("grpc", down),
        sigterm(),
        run_app_scenario("overload", 2000),
        run_app_scenario("hostile", 50),
    ]
    table = Table(title="ragpulse under faults (real rotel collector on 127.0.0.1)")
    for column in (
        "scenario",
        "requests",
        "spans received",
        "spans lost",
        "logs emitted",
        "logs lost",
        "app errors",
        "slowest request ms",
        "wall s",
    ):
        table.add_column(column, justify="left" if column == "scenario" else "right")
    for o in outcomes:
        table.add_row(
            o.scenario,
            str(o.requests),
            str(o.received),
            str(o.spans_lost),
            str(o.logs_emitted),
            str(o.logs_lost),
            str(o.app_errors),
            f"{o.max_request_ms:.1f}",
            f"{o.seconds:.0f}",
        )
    Console(width=140).print(table)
    print(
        "RESULT"
        f" spans_lost={sum(o.spans_lost for o in outcomes)}"
        f" logs_lost={sum(o.logs_lost for o in outcomes)}"
        f" app_errors={sum(o.app_errors for o in outcomes)}"
        f" max_request_ms={max(o.max_request_ms for o in outcomes):.1f}"
    )


if __name__ == "__main__":
    main()
