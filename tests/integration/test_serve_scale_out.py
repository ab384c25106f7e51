"""Three ``ragpulse serve`` replicas behind a router that routes by trace id like the Collector's
loadbalancing exporter: each trace evaluated once, no span lost or duplicated, a replica killed
and restarted mid-run loses nothing the sender retried."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse import semconv
from servers.otlp_router import HashRing, OtlpRouter
from servers.serve_process import ExportedSpan, ServeProcess

pytestmark = pytest.mark.integration

CONTEXT = "The Eiffel Tower is 330 metres tall and stands in Paris."
ANSWER = "The Eiffel Tower is 330 metres tall."
RESOURCE = Resource({"service.name": "shop"})
SCOPE = InstrumentationScope("rag-handler", "1.0.0")


def _trace(rng: random.Random) -> list[ReadableSpan]:
    """A RAG request (root, retriever, LLM) plus one plain span, with random ids."""
    trace_id = rng.getrandbits(128) or 1
    ids = [rng.getrandbits(64) or 1 for _ in range(4)]

    def span(name: str, index: int, parent: int | None, attributes: dict[str, Any]) -> Any:
        return ReadableSpan(
            name=name,
            context=SpanContext(trace_id, ids[index], False, TraceFlags(1)),
            parent=SpanContext(trace_id, ids[parent], False, TraceFlags(1))
            if parent is not None
            else None,
            resource=RESOURCE,
            attributes=attributes,
            start_time=1_700_000_000_000_000_000 + index,
            end_time=1_700_000_000_100_000_000 - index,
            instrumentation_scope=SCOPE,
        )

    return [
        span(
            "POST /ask",
            0,
            None,
            {
                "openinference.span.kind": "CHAIN",
                "input.value": "How tall is the Eiffel Tower?",
                "output.value": ANSWER,
            },
        ),
        span(
            "retrieve",
            1,
            0,
            {
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.content": CONTEXT,
            },
        ),
        span("llm", 2, 0, {"openinference.span.kind": "LLM", "output.value": ANSWER}),
        span("cache lookup", 3, 0, {"db.system": "redis"}),
    ]


def _batches(traces: list[list[ReadableSpan]], rng: random.Random) -> list[list[ReadableSpan]]:
    """Spans of many traces shuffled into batches: a trace is spread over several of them."""
    spans = [span for trace in traces for span in trace]
    rng.shuffle(spans)
    return [spans[i : i + 17] for i in range(0, len(spans), 17)]


def _send(url: str, batches: list[list[ReadableSpan]]) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=120)
    for batch in batches:
        assert exporter.export(batch) is SpanExportResult.SUCCESS


def _key(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")


def _all_spans(replicas: list[ServeProcess]) -> dict[str, list[ExportedSpan]]:
    return {replica.name: replica.spans() for replica in replicas}


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[list[ServeProcess]]:
    started = [
        ServeProcess(tmp_path, "--sample-rate", "1", name=f"replica-{i}").start() for i in range(3)
    ]
    yield started
    for replica in started:
        replica.stop()


def test_hash_ring_sends_one_trace_to_one_endpoint_and_spreads_traces_evenly() -> None:
    endpoints = ["10.0.0.1:4318", "10.0.0.2:4318", "10.0.0.3:4318"]
    ring = HashRing(endpoints)
    rng = random.Random(5)
    trace_ids = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(30_000)]

    counts = Counter(ring.endpoint_for(trace_id) for trace_id in trace_ids)

    assert set(counts) == set(endpoints)
    assert all(abs(count / 10_000 - 1) < 0.25 for count in counts.values()), counts
    assert all(ring.endpoint_for(t) == HashRing(endpoints).endpoint_for(t) for t in trace_ids[:50])


def test_hash_ring_moves_about_a_quarter_of_traces_when_a_fourth_endpoint_joins() -> None:
    three = HashRing(["a:1", "b:1", "c:1"])
    four = HashRing(["a:1", "b:1", "c:1", "d:1"])
    rng = random.Random(6)
    trace_ids = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(20_000)]

    moved = sum(three.endpoint_for(t) != four.endpoint_for(t) for t in trace_ids)

    assert 0.1 < moved / len(trace_ids) < 0.4
    assert all(
        four.endpoint_for(t) == "d:1"
        for t in trace_ids
        if three.endpoint_for(t) != four.endpoint_for(t)
    )


def test_three_replicas_evaluate_each_trace_once_and_forward_every_span_once(
    replicas: list[ServeProcess],
) -> None:
    rng = random.Random(7)
    traces = [_trace(rng) for _ in range(60)]
    endpoints = {f"127.0.0.1:{replica.http_port}": replica for replica in replicas}

    with OtlpRouter(list(endpoints)) as router:
        _send(router.url, _batches(traces, rng))
        expected = {_key(span) for trace in traces for span in trace}
        outputs = _wait_for_all(replicas, expected)

    _assert_exactly_once(outputs, traces)
    # Routing: every span of a trace ended on the replica its trace id maps to.
    for name, spans in outputs.items():
        for span in spans:
            endpoint = router.ring.endpoint_for(bytes.fromhex(span.trace_id))
            assert endpoints[endpoint].name == name
    assert all(router.delivered[endpoint] > 0 for endpoint in endpoints)
    assert not router.dropped


def test_replica_killed_and_restarted_mid_run_loses_nothing_the_sender_retried(
    replicas: list[ServeProcess], tmp_path: Path
) -> None:
    rng = random.Random(8)
    first, second = [_trace(rng) for _ in range(30)], [_trace(rng) for _ in range(30)]
    endpoints = [f"127.0.0.1:{replica.http_port}" for replica in replicas]
    victim = replicas[1]

    with OtlpRouter(endpoints) as router:
        _send(router.url, _batches(first, rng))
        _wait_for_all(replicas, {_key(span) for trace in first for span in trace})
        victim.kill()
        sender = threading.Thread(target=_send, args=(router.url, _batches(second, rng)))
        sender.start()
        # The victim's parts are refused while it is down; the router keeps retrying them.
        _wait(lambda: router.refused[endpoints[1]] > 0)
        restarted = ServeProcess(
            tmp_path,
            "--sample-rate",
            "1",
            name=victim.name,
            http_port=victim.http_port,
            grpc_port=victim.grpc_port,
        ).start()
        replicas[1] = restarted
        sender.join(timeout=120)
        assert not sender.is_alive()
        everything = first + second
        outputs = _wait_for_all(replicas, {_key(span) for trace in everything for span in trace})

    assert router.refused[endpoints[1]] > 0
    assert not router.dropped
    _assert_exactly_once(outputs, everything)


def _wait(condition: Any, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.05)


def _wait_for_all(
    replicas: list[ServeProcess], expected: set[tuple[str, str]], timeout: float = 60.0
) -> dict[str, list[ExportedSpan]]:
    import time

    deadline = time.monotonic() + timeout
    while True:
        outputs = _all_spans(replicas)
        seen = {(s.trace_id, s.span_id) for spans in outputs.values() for s in spans}
        if expected <= seen:
            return outputs
        if time.monotonic() > deadline:
            logs = "\n".join(replica.log() for replica in replicas)
            raise AssertionError(f"{len(expected - seen)} spans never arrived\n{logs}")
        time.sleep(0.1)


def _assert_exactly_once(
    outputs: dict[str, list[ExportedSpan]], traces: list[list[ReadableSpan]]
) -> None:
    spans = [span for replica_spans in outputs.values() for span in replica_spans]
    copies = Counter((span.trace_id, span.span_id) for span in spans)
    sent = {_key(span) for trace in traces for span in trace}
    assert set(copies) == sent, "a span was lost, or one appeared that was never sent"
    assert max(copies.values()) == 1, "a span was forwarded twice"
    evaluated = Counter(
        span.trace_id for span in spans if span.attributes.get(semconv.EVAL_STATUS) == "ok"
    )
    roots = [span for span in spans if span.name == "POST /ask"]
    unevaluated = [
        (span.trace_id, span.attributes.get(semconv.EVAL_STATUS))
        for span in roots
        if span.trace_id not in evaluated
    ]
    assert not unevaluated, f"traces not evaluated: {unevaluated}"
    assert set(evaluated.values()) == {1}, "a trace was evaluated twice"
