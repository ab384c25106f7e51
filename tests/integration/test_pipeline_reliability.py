"""Reliability of the evaluating pipeline, with real servers on 127.0.0.1.

The app is decorated; its spans go through ``EvaluatingSpanProcessor`` into the
SDK's ``BatchSpanProcessor`` and the real OTLP/HTTP exporter, to a real rotel
collector that records every span it receives. The judge is ``OpenAIJudge``
talking to a real Chat Completions server that is told to hang, fail, rate
limit or answer garbage, or to no server at all.

Whatever the judge does, every span the app ended arrives exactly once (by span
id) within ``hold_timeout`` plus the exporter's own batching and retries; the
result of each evaluation arrives on the span or on its carrier span; and the
worker's counters say what happened.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context as OtelContext
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import ragpulse
from ragpulse import semconv
from ragpulse.errors import BREAKER_OPEN as ERROR_BREAKER_OPEN
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import GROUNDEDNESS, Evaluation, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judges.llm.openai import OpenAIJudge
from ragpulse.judging.resilient import ResilientJudge, RetryPolicy
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import BoundsOptions, JudgeOptions
from ragpulse.worker import EvalWorker
from servers import rotel_sink as rotel_sink_module
from servers.chat_server import ChatServer, Reply, echo_judge_reply
from servers.rotel_sink import ReceivedSpan, RotelSink, free_port, free_ports

pytestmark = pytest.mark.integration

# Bounds that only catch a hang: every wait below ends as soon as what it waits for has
# happened, so on an idle machine none of them is reached, and on a busy one (a judge process
# that takes a second to start, a thread that waits for the interpreter lock) none is raced.
HOLD = 60.0  # hold_timeout: no span waits longer than this for its evaluation
EXPORT_SLACK = 60.0  # batching (100 ms), the exporter's retries, rotel's batch (50 ms)
EVALUATION_TIMEOUT = 30.0
HANG_TIMEOUT = 1.0  # the attempt timeout where a test wants a hanging judge to time out
UNIT = "support-bot"
CARRIER = "ragpulse.evaluation"
CONTEXTS = [
    "Support is open from 9am to 5pm on weekdays.",
    "The Larkspur L2 router costs $129 and was released in March 2024.",
]


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": f"doc-{i}", "content": text} for i, text in enumerate(CONTEXTS)]


@ragpulse.generation(model="extractive")
def write(question: str, docs: list[dict[str, str]]) -> str:
    return docs[0]["content"]


@ragpulse.rag(name=UNIT)
def handle(question: str) -> str:
    return write(question, search(question))


# --- the pipeline under test ------------------------------------------------------------------


class EndedSpans(SpanProcessor):
    """Notes the id of every span the app ended, once the pipeline has taken it."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._ids: list[str] = []

    def on_start(self, span: Span, parent_context: OtelContext | None = None) -> None:
        self.inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self.inner.on_end(span)
        assert span.context is not None
        with self._lock:
            self._ids.append(format(span.context.span_id, "016x"))

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._ids)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.inner.shutdown()


class WatchedExporter(SpanExporter):
    """The real OTLP exporter, with an event set when the first export begins."""

    def __init__(self, inner: OTLPSpanExporter) -> None:
        self.inner = inner
        self.first_export = threading.Event()
        self.results: list[SpanExportResult] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.first_export.set()
        result = self.inner.export(spans)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


@dataclass
class Pipeline:
    ended: EndedSpans
    processor: EvaluatingSpanProcessor
    exporter: WatchedExporter
    judge: ResilientJudge


Build = Callable[..., Pipeline]


@pytest.fixture
def build(route_spans: Any) -> Build:
    """Route the app's spans through ragpulse to OTLP/HTTP at ``endpoint``."""

    def make(
        endpoint: str,
        judge: Any,
        *,
        max_retries: int = 1,
        hold_timeout: float = HOLD,
        **options: Any,
    ) -> Pipeline:
        exporter = WatchedExporter(OTLPSpanExporter(endpoint=endpoint + "/v1/traces", timeout=30))
        downstream = BatchSpanProcessor(exporter, schedule_delay_millis=100, max_queue_size=100_000)
        resilient = ResilientJudge(
            judge,
            retry=RetryPolicy(
                max_retries=max_retries,
                backoff_base=0.05,
                backoff_max=1.0,
                attempt_timeout=options.pop("evaluation_timeout", EVALUATION_TIMEOUT),
            ),
        )
        worker = EvalWorker(
            resilient,
            judging=JudgeOptions(
                evaluation_timeout=resilient.longest_evaluation,
                concurrency=options.pop("concurrency", 4),
            ),
            bounds=BoundsOptions(max_queue_size=options.pop("max_queue_size", 1000)),
        )
        processor = EvaluatingSpanProcessor(
            downstream,
            sampler=EvalSampler(rate=1.0),
            worker=worker,
            **options,
            bounds=BoundsOptions(hold_timeout=hold_timeout),
        )
        ended = EndedSpans(processor)
        route_spans(ended)
        return Pipeline(ended, processor, exporter, resilient)

    return make


def openai_judge(base_url: str) -> OpenAIJudge:
    return OpenAIJudge(model="judge-model", base_url=base_url, api_key="test", timeout=30)


def arrived_once(sink: RotelSink, ids: Collection[str], timeout: float) -> list[ReceivedSpan]:
    """Wait until every id in ``ids`` has arrived; then check none arrived twice."""
    wanted = set(ids)
    spans = sink.wait_for_spans(lambda got: wanted <= {s.span_id for s in got}, timeout=timeout)
    received = [s.span_id for s in spans]
    assert len(received) == len(set(received)), "a span arrived twice"
    return spans


def results_by_unit(spans: list[ReceivedSpan]) -> dict[str, dict[str, Any]]:
    """Each unit's evaluation attributes: from the unit, or from its carrier if it went pending."""
    results: dict[str, dict[str, Any]] = {}
    for span in spans:
        if span.name == UNIT:
            results.setdefault(span.span_id, dict(span.attributes))
    for span in spans:
        if span.name == CARRIER:
            target = span.attributes[semconv.EVAL_TARGET_SPAN_ID]
            assert results[target][semconv.EVAL_STATUS] == EvalStatus.PENDING
            results[target] = dict(span.attributes)
    return results


def settled(spans: list[ReceivedSpan], units: int) -> bool:
    """True when ``units`` units arrived and every pending one has its carrier."""
    pending = {
        s.span_id
        for s in spans
        if s.name == UNIT and s.attributes.get(semconv.EVAL_STATUS) == EvalStatus.PENDING
    }
    carried = {s.attributes.get(semconv.EVAL_TARGET_SPAN_ID) for s in spans if s.name == CARRIER}
    return sum(s.name == UNIT for s in spans) == units and pending <= carried


# --- a judge that misbehaves -------------------------------------------------------------------


@dataclass(frozen=True)
class Misbehaviour:
    name: str
    error_type: str
    retried: bool
    reply: Reply | None  # every reply of the chat server; None: no server at all
    attempt_timeout: float = EVALUATION_TIMEOUT  # short only where the timeout is the point


MISBEHAVIOURS = [
    Misbehaviour("hangs", "timeout", True, Reply(delay=60.0), attempt_timeout=HANG_TIMEOUT),
    Misbehaviour("fails", "server_error", True, Reply.failure(500, "the model is down")),
    Misbehaviour("rate-limits", "rate_limited", True, Reply.rate_limited(retry_after=0.2)),
    Misbehaviour("answers garbage", "unexpected", False, Reply(raw_body=b"<html>oops</html>")),
    Misbehaviour("answers prose", "schema_mismatch", False, Reply.text("All fine, I think.")),
    Misbehaviour("is unreachable", "connection_error", True, None),
]


@pytest.fixture(params=MISBEHAVIOURS, ids=[m.name for m in MISBEHAVIOURS])
def misbehaving_judge(request: pytest.FixtureRequest) -> Iterator[tuple[Misbehaviour, str]]:
    """(what the judge does, its base URL)."""
    behaviour: Misbehaviour = request.param
    if behaviour.reply is None:
        yield behaviour, f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
        return
    reply = behaviour.reply
    with ChatServer(responder=lambda body: reply) as server:
        yield behaviour, server.url


def test_every_span_arrives_exactly_once_whatever_the_judge_does(
    build: Build, rotel_sink: RotelSink, misbehaving_judge: tuple[Misbehaviour, str]
) -> None:
    behaviour, base_url = misbehaving_judge
    pipeline = build(
        rotel_sink.http_endpoint,
        openai_judge(base_url),
        evaluation_timeout=behaviour.attempt_timeout,
    )
    answers = [handle(f"When is support open? ({n})") for n in range(5)]
    assert answers == [CONTEXTS[0]] * 5  # the app's calls are untouched

    ended = pipeline.ended.ids()
    assert len(ended) == 15
    arrived_once(rotel_sink, ended, timeout=HOLD + EXPORT_SLACK)
    spans = rotel_sink.wait_for_spans(lambda got: settled(got, 5), timeout=HOLD + EXPORT_SLACK)
    assert len({s.span_id for s in spans}) == len(spans)

    results = results_by_unit(spans)
    assert len(results) == 5
    error_types = [attributes[semconv.EVAL_ERROR_TYPE] for attributes in results.values()]
    assert {a[semconv.EVAL_STATUS] for a in results.values()} == {EvalStatus.ERROR}
    # After five failed calls in a row the circuit breaker fails the rest fast.
    assert set(error_types) <= {behaviour.error_type, ERROR_BREAKER_OPEN}
    assert behaviour.error_type in error_types
    assert pipeline.processor.worker.stats.completed == 5
    stats = pipeline.judge.stats
    assert stats.errors_by_type[behaviour.error_type] >= error_types.count(behaviour.error_type)
    assert stats.errors_by_type.get(ERROR_BREAKER_OPEN, 0) == error_types.count(ERROR_BREAKER_OPEN)
    assert (stats.retries > 0) == behaviour.retried


def test_rate_limited_judge_is_retried_after_retry_after_and_the_score_lands_on_the_span(
    build: Build, rotel_sink: RotelSink
) -> None:
    with ChatServer(mode="echo-judge") as server:
        server.script(Reply.rate_limited(retry_after=0.3))
        pipeline = build(rotel_sink.http_endpoint, openai_judge(server.url), concurrency=1)
        handle("When is support open?")
        unit = rotel_sink.wait_for_span(lambda s: s.name == UNIT, timeout=HOLD + EXPORT_SLACK)
        assert server.request_count == 2
    assert unit.attributes[semconv.EVAL_STATUS] == EvalStatus.OK
    assert unit.attributes[semconv.eval_score(GROUNDEDNESS)] == 1.0
    stats = pipeline.judge.stats
    assert stats.retries == 1
    assert stats.errors_by_type == {"rate_limited": 1}


def test_app_call_returns_before_the_judge_has_answered(
    build: Build, rotel_sink: RotelSink
) -> None:
    asked, answered, app_returned = threading.Event(), threading.Event(), threading.Event()

    def judge_after_the_app_returned(body: dict[str, Any]) -> Reply:
        asked.set()
        # Bounded: if the app waited for the judge, this gives up and the test fails.
        app_returned.wait(10.0)
        answered.set()
        return echo_judge_reply(body)

    with ChatServer(responder=judge_after_the_app_returned) as server:
        judge = openai_judge(server.url)
        build(rotel_sink.http_endpoint, judge, hold_timeout=30.0, evaluation_timeout=20.0)
        handle("When is support open?")
        assert not answered.is_set()
        app_returned.set()
        unit = rotel_sink.wait_for_span(lambda s: s.name == UNIT, timeout=30.0)
    assert asked.is_set() and answered.is_set()
    assert unit.attributes[semconv.EVAL_STATUS] == EvalStatus.OK


def test_judge_hanging_past_hold_timeout_sends_units_pending_then_carriers_with_the_error(
    build: Build, rotel_sink: RotelSink
) -> None:
    with ChatServer(responder=lambda body: Reply(delay=60.0)) as server:
        build(
            rotel_sink.http_endpoint,
            openai_judge(server.url),
            hold_timeout=1.0,
            # Far past the hold, so the hold ends first even when the reaper thread is late.
            evaluation_timeout=15.0,
            max_retries=0,
        )
        for n in range(3):
            handle(f"When is support open? ({n})")
        units = rotel_sink.wait_for_spans(
            lambda got: sum(s.name == UNIT for s in got) == 3, timeout=1.0 + EXPORT_SLACK
        )
        for unit in (s for s in units if s.name == UNIT):
            assert unit.attributes[semconv.EVAL_STATUS] == EvalStatus.PENDING
        spans = rotel_sink.wait_for_spans(lambda got: settled(got, 3), timeout=EXPORT_SLACK)
    assert len({s.span_id for s in spans}) == len(spans)
    carriers = [s for s in spans if s.name == CARRIER]
    assert len(carriers) == 3
    for carrier in carriers:
        assert carrier.attributes[semconv.EVAL_STATUS] == EvalStatus.ERROR
        assert carrier.attributes[semconv.EVAL_ERROR_TYPE] == "timeout"
        assert carrier.status_name == "ERROR"
        (link,) = carrier.links
        assert link.span_id == carrier.attributes[semconv.EVAL_TARGET_SPAN_ID]
        assert carrier.parent_span_id == link.span_id


# --- the OTLP receiver goes away -------------------------------------------------------------


def start_sink_on(
    monkeypatch: pytest.MonkeyPatch, binary: Path, grpc_port: int, http_port: int
) -> RotelSink:
    """A rotel sink on the given ports (RotelSink picks its ports with ``free_ports``)."""
    with monkeypatch.context() as patch:
        patch.setattr(rotel_sink_module, "free_ports", lambda count: [grpc_port, http_port])
        return RotelSink(binary=binary).start()


def test_spans_ended_while_the_receiver_is_down_arrive_once_it_is_back(
    build: Build, rotel_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grpc_port, http_port = free_ports(2)
    pipeline = build(f"http://127.0.0.1:{http_port}", LexicalJudge())
    for n in range(3):
        handle(f"When is support open? ({n})")
    # The exporter is trying now, against a port nothing listens on.
    assert pipeline.exporter.first_export.wait(HOLD + 10.0)
    ended = pipeline.ended.ids()
    assert len(ended) == 9

    sink = start_sink_on(monkeypatch, rotel_binary, grpc_port, http_port)
    try:
        spans = arrived_once(sink, ended, timeout=EXPORT_SLACK)
    finally:
        sink.stop()
    assert pipeline.exporter.results[0] is SpanExportResult.SUCCESS  # retried, not dropped
    units = [s for s in spans if s.name == UNIT]
    assert len(units) == 3
    assert {u.attributes[semconv.EVAL_STATUS] for u in units} == {EvalStatus.OK}


# --- shutdown and fork ---------------------------------------------------------------------------


class SleepyJudge:
    """A user's judge that takes ``delay`` seconds, then answers like ``LexicalJudge``."""

    name = "sleepy"
    annotator_kind = "CODE"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._inner = LexicalJudge()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        await asyncio.sleep(self.delay)
        return await self._inner.evaluate(record, metrics)


def test_shutdown_under_load_loses_no_span_ended_before_it(
    build: Build, rotel_sink: RotelSink
) -> None:
    pipeline = build(rotel_sink.http_endpoint, SleepyJudge(0.02), max_queue_size=50, concurrency=2)
    stop = threading.Event()

    def load(worker: int) -> None:
        for n in range(20_000):
            if stop.is_set():
                return
            handle(f"When is support open? ({worker}.{n})")

    threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 120.0
    while len(pipeline.ended.ids()) < 900 and time.monotonic() < deadline:
        time.sleep(0.01)
    held = pipeline.processor.held_spans
    before = pipeline.ended.ids()
    pipeline.ended.shutdown()
    stop.set()
    for thread in threads:
        thread.join(10.0)
    assert held > 0  # shutdown found evaluations in flight and spans held
    assert len(before) >= 900

    spans = arrived_once(rotel_sink, before, timeout=EXPORT_SLACK)
    statuses = {s.attributes.get(semconv.EVAL_STATUS) for s in spans if s.name == UNIT}
    assert EvalStatus.OK in statuses
    assert EvalStatus.SKIPPED in statuses  # the bounded queue refused some, and said so


def test_forked_child_evaluates_and_its_span_arrives(build: Build, rotel_sink: RotelSink) -> None:
    pipeline = build(rotel_sink.http_endpoint, LexicalJudge())
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            handle("When is support open? (child)")
            code = 0 if pipeline.processor.force_flush(int(HOLD * 1000)) else 2
        finally:
            os._exit(code)
    handle("When is support open? (parent)")
    deadline = time.monotonic() + HOLD + EXPORT_SLACK
    status = None
    while status is None and time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            status = None
            time.sleep(0.02)
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail(f"the forked child did not finish within {HOLD + EXPORT_SLACK} s")
    assert os.waitstatus_to_exitcode(status) == 0

    spans = rotel_sink.wait_for_spans(
        lambda got: sum(s.name == UNIT for s in got) == 2, timeout=EXPORT_SLACK
    )
    assert len({s.span_id for s in spans}) == len(spans)
    units = {str(s.attributes[semconv.RAG_QUESTION]): s for s in spans if s.name == UNIT}
    child = units["When is support open? (child)"]
    assert child.attributes[semconv.EVAL_STATUS] == EvalStatus.OK
    assert child.attributes[semconv.eval_score(GROUNDEDNESS)] == 1.0
    assert units["When is support open? (parent)"].attributes[semconv.EVAL_STATUS] == "ok"
