"""A process that exits without ``shutdown()`` while its judge hangs.

A real child Python process decorates a request, has it evaluated by a judge that
never answers (``hold_timeout`` 30 s), and returns from its main module without
calling ``shutdown()``. It must exit within the default ``shutdown_timeout`` plus the
export of its spans, not after the whole hold timeout, and the held span must
reach a real rotel collector over OTLP/HTTP, marked ``pending``: whether the
TracerProvider shuts down at exit (the SDK's default) or not.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ragpulse.processor.span_processor
from ragpulse import semconv
from ragpulse.errors import EvalStatus
from ragpulse.settings import Settings
from servers.rotel_sink import RotelSink

pytestmark = pytest.mark.integration

# Where this ragpulse was imported from, so the child imports the same code.
PACKAGE_ROOT = Path(ragpulse.processor.__file__).resolve().parents[1]
HOLD_TIMEOUT = 30.0
EXPORT_SLACK = 8.0  # interpreter start-up is not counted; this covers the OTLP export
UNIT = "support-bot"

CHILD = """
import asyncio
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import ragpulse
from ragpulse.processor.span_processor import EvaluatingSpanProcessor


class HangingJudge:
    name = "hanging"
    annotator_kind = "LLM"

    async def evaluate(self, record, metrics):
        await asyncio.sleep(3600)


endpoint, hold_timeout, shutdown_on_exit = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1"
provider = TracerProvider(
    resource=Resource.create({"service.name": "exit-test"}), shutdown_on_exit=shutdown_on_exit
)
provider.add_span_processor(
    EvaluatingSpanProcessor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)),
        judge=HangingJudge(),
        sampler=ragpulse.EvalSampler(rate=1.0),
        bounds=ragpulse.BoundsOptions(hold_timeout=hold_timeout),
        judging=ragpulse.JudgeOptions(evaluation_timeout=3600.0),
    )
)
trace.set_tracer_provider(provider)


@ragpulse.retrieval
def search(question):
    return ["Support is open from 9am to 5pm on weekdays."]


@ragpulse.rag(name="support-bot")
def handle(question):
    search(question)
    return "Support is open from 9am to 5pm on weekdays."


handle("When is support open?")
print("request ended", flush=True)
"""


@pytest.mark.parametrize("shutdown_on_exit", [True, False], ids=["provider-exit-hook", "no-hook"])
def test_exit_without_shutdown_waits_only_the_grace_and_delivers_the_held_span(
    rotel_sink: RotelSink, tmp_path: Path, shutdown_on_exit: bool
) -> None:
    script = tmp_path / "app.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), str(tmp_path)])}
    child = subprocess.Popen(
        [
            sys.executable,
            str(script),
            rotel_sink.http_traces_endpoint,
            str(HOLD_TIMEOUT),
            "1" if shutdown_on_exit else "0",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        ended = time.monotonic()
        assert line.strip() == "request ended", child.stderr.read() if child.stderr else ""
        child.wait(timeout=HOLD_TIMEOUT + 30.0)
        exited_after = time.monotonic() - ended
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0
    assert exited_after < Settings.shutdown_timeout + EXPORT_SLACK < HOLD_TIMEOUT

    spans = rotel_sink.wait_for_spans(
        lambda got: {UNIT, "retrieval search"} <= {s.name for s in got}, timeout=10.0
    )
    (unit,) = [s for s in spans if s.name == UNIT]
    assert unit.attributes[semconv.EVAL_STATUS] == EvalStatus.PENDING
    assert len({s.span_id for s in spans}) == len(spans)
