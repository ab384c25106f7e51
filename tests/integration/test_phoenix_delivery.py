"""PhoenixAnnotations delivery: a Phoenix that fails first, refuses, or never answers.

Runs against a real HTTP server on loopback that answers ``POST /v1/span_annotations`` as
scripted (``servers.annotation_server``); the real Phoenix is in test_phoenix_annotations.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.trace import SpanContext

from ragpulse.evaluation.types import EvalStatus, Evaluation, MetricResult, RagRecord
from ragpulse.outputs.phoenix import PhoenixAnnotations
from servers.annotation_server import AnnotationServer
from servers.rotel_sink import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# Generous: these bound waits for retries with backoff on a busy machine, never pass early.
WAIT_S = 60.0
METRICS = ("groundedness", "faithfulness")


def _evaluate(hook: PhoenixAnnotations, span_id: int) -> None:
    record = RagRecord("q", (), "a", span_context=SpanContext(1, span_id, is_remote=False))
    hook(
        record,
        Evaluation(
            status=EvalStatus.OK,
            metrics={name: MetricResult(name, 0.5) for name in METRICS},
        ),
    )


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {WAIT_S}s"
        time.sleep(0.05)


def test_a_batch_phoenix_answers_with_503_is_retried_and_then_sent() -> None:
    with AnnotationServer(statuses=[503, 503]) as server:
        hook = PhoenixAnnotations(server.url)
        _evaluate(hook, span_id=2)
        assert hook.flush(timeout=WAIT_S)
        hook.shutdown()
    stats = hook.stats
    assert (stats.sent, stats.failed_batches, stats.dropped, stats.queued) == (2, 0, 0, 0)
    assert stats.retries == 2
    assert len(server.requests) == 3
    assert sorted(a["name"] for a in server.accepted) == sorted(METRICS)


def test_annotations_queued_while_phoenix_is_still_starting_arrive_once_it_listens() -> None:
    port = free_port()
    hook = PhoenixAnnotations(f"http://127.0.0.1:{port}")
    _evaluate(hook, span_id=2)
    _wait_until(lambda: hook.stats.retries >= 1, "retried")
    with AnnotationServer(port=port) as server:
        assert hook.flush(timeout=WAIT_S)
        hook.shutdown()
    assert (hook.stats.sent, hook.stats.failed_batches) == (2, 0)
    assert {a["span_id"] for a in server.accepted} == {format(2, "016x")}


def test_a_batch_phoenix_refuses_with_422_is_given_up_at_once_and_the_next_is_sent() -> None:
    with AnnotationServer(statuses=[422]) as server:
        hook = PhoenixAnnotations(server.url)
        _evaluate(hook, span_id=2)
        # Refused for good: the flush ends at once, and says False, as Phoenix did not take it.
        assert not hook.flush(timeout=WAIT_S)
        _evaluate(hook, span_id=3)
        assert hook.flush(timeout=WAIT_S)
        hook.shutdown()
    stats = hook.stats
    assert (stats.sent, stats.failed_batches, stats.retries) == (2, 1, 0)
    assert len(server.requests) == 2
    assert {a["span_id"] for a in server.accepted} == {format(3, "016x")}


def test_shutdown_counts_what_an_unreachable_phoenix_never_took_as_dropped() -> None:
    hook = PhoenixAnnotations(f"http://127.0.0.1:{free_port()}")
    _evaluate(hook, span_id=2)
    hook.shutdown(timeout=1.0)
    stats = hook.stats
    assert (stats.sent, stats.dropped, stats.queued) == (0, 2, 0)
    _evaluate(hook, span_id=3)
    assert hook.stats.dropped == 4


def test_annotations_queued_behind_a_request_join_the_next_one_up_to_the_batch_size() -> None:
    # Phoenix answers the first request 503: while it backs off, 29 more evaluations queue up
    # behind it, and the requests that follow carry them together, never more than 25 each.
    with AnnotationServer(statuses=[503]) as server:
        hook = PhoenixAnnotations(server.url, batch_size=25)
        for span_id in range(2, 32):
            _evaluate(hook, span_id=span_id)
        assert hook.flush(timeout=WAIT_S)
        hook.shutdown()
    sizes = [len(request) for request in server.requests]
    assert max(sizes) <= 25
    assert len(server.accepted) == 60 and hook.stats.sent == 60
    assert len(sizes) <= 1 + 4  # the refused first one, then 60 in requests of up to 25


def test_a_full_queue_drops_annotations_and_counts_them_without_blocking_the_caller() -> None:
    hook = PhoenixAnnotations(f"http://127.0.0.1:{free_port()}", max_queue_size=4, batch_size=2)
    for span_id in range(2, 7):
        _evaluate(hook, span_id=span_id)
    stats = hook.stats
    # The request being sent may exceed the bound by its own batch, never more.
    assert stats.queued <= 4 + 2
    assert stats.dropped == 10 - stats.queued and stats.dropped >= 4
    hook.shutdown(timeout=0.5)
    assert (hook.stats.sent, hook.stats.dropped, hook.stats.queued) == (0, 10, 0)


APP = textwrap.dedent(
    """
    import json, sys
    import ragpulse
    from ragpulse.outputs.phoenix import PhoenixAnnotations

    hook = PhoenixAnnotations(sys.argv[1])
    handle = ragpulse.configure(
        service_name="annotated", output_file=sys.argv[2], on_evaluation=hook
    )

    @ragpulse.rag(name="annotated")
    def ask(question):
        ragpulse.record_contexts(["Refunds take 5 business days."])
        return "Refunds take 5 business days."

    ask("How long do refunds take?")
    flushed = handle.force_flush(float(sys.argv[3]))
    print(json.dumps({"flushed": flushed, "stats": vars(hook.stats)}))
    handle.shutdown()
    """
)


def test_handle_force_flush_returns_true_once_phoenix_took_the_annotations(
    tmp_path: Path,
) -> None:
    with AnnotationServer(statuses=[503]) as server:
        done = subprocess.run(
            [sys.executable, "-c", APP, server.url, str(tmp_path / "traces.jsonl"), str(WAIT_S)],
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            capture_output=True,
            text=True,
            timeout=WAIT_S * 3,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    sent = result["stats"]["sent"]
    assert result["flushed"] is True
    assert sent > 0 and result["stats"]["queued"] == 0
    assert len(server.accepted) == sent
