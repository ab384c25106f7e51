"""``ragpulse serve`` delivers what it writes through a backend outage, as ``configure()`` does.

Spans, evaluation log events and metrics leave serve through the outputs layer's retrying,
byte-bounded delivery. Each test runs ``ragpulse serve`` as its own process against a real
rotel collector that is stopped for longer than an OTLP exporter's own retries (10 s) while
serve evaluates, then started again on the same ports.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragpulse import semconv
from servers.rag_traces import post_spans, rag_trace
from servers.rotel_restart import RestartableSink
from servers.serve_process import ServeProcess

pytestmark = pytest.mark.integration

OUTAGE_S = 14.0
"""Longer than the OTLP exporter's own retries (``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s)."""
TRACES = 20
EVENT = "gen_ai.evaluation.result"


@pytest.fixture
def restartable_sink(rotel_binary: Path) -> Iterator[RestartableSink]:
    with RestartableSink(binary=rotel_binary) as sink:
        yield sink


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_evaluation_events_and_scored_spans_survive_a_backend_outage(
    restartable_sink: RestartableSink, protocol: str, tmp_path: Path
) -> None:
    sink = restartable_sink
    endpoint = sink.grpc_endpoint if protocol == "grpc" else sink.http_endpoint
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    with ServeProcess(tmp_path, "--sample-rate", "1", env=env) as serve:
        assert post_spans(serve.http_endpoint, rag_trace(0x100)).status_code == 200
        # Serve is exporting (not a guess at how long its start takes):
        sink.wait_for_logs(lambda got: any(r.event_name == EVENT for r in got), timeout=120)
        sink.pause()
        for number in range(1, TRACES + 1):
            assert post_spans(serve.http_endpoint, rag_trace(0x100 + number)).status_code == 200
        time.sleep(OUTAGE_S)
        sink.resume()

        def scored_units(spans: list) -> set[str]:  # type: ignore[type-arg]
            return {
                s.trace_id
                for s in spans
                if s.parent_span_id is None and semconv.EVAL_STATUS in s.attributes
            }

        spans = sink.wait_for_spans(lambda got: len(scored_units(got)) >= TRACES + 1, 90)
        # One event per metric per evaluation: count the evaluations they are about.
        logs = sink.wait_for_logs(
            lambda got: len({r.trace_id for r in got if r.event_name == EVENT}) >= TRACES + 1,
            90,
        )

    assert scored_units(spans) == {f"{0x100 + n:032x}" for n in range(TRACES + 1)}
    assert {r.trace_id for r in logs if r.event_name == EVENT} == scored_units(spans)
