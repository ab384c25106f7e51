"""EvaluatingSpanProcessor: every span goes downstream exactly once, scored when it can be.

The app is decorated as a user decorates one; spans go through the real SDK
(the global TracerProvider of ``conftest.py``) into the processor, and from it
into a ``SimpleSpanProcessor`` with an in-memory exporter, so what the exporter
holds is exactly what was forwarded, in order, at the moment it was forwarded.

Judges are the real ``LexicalJudge``, or small judges written here the way a
user plugs in their own (``Judge`` is a public protocol) to play a judge that is
slow, hangs until the test lets it answer, raises, or returns garbage.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable, Collection, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

import ragpulse
from ragpulse import errors, semconv
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import GROUNDEDNESS, Evaluation, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging.resilient import ResilientJudge
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import BoundsOptions, JudgeOptions
from ragpulse.worker import EvalWorker

WAIT = 20.0  # upper bound of every wait: a hang fails the test, slowness does not

CONTEXTS = [
    "The Larkspur L2 router costs $129 and was released in March 2024.",
    "Support is open from 9am to 5pm on weekdays.",
]
SUPPORT_ANSWER = "Support is open from 9am to 5pm on weekdays."
UNIT = "support-bot"
CARRIER = "ragpulse.evaluation"


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": f"doc-{i}", "content": text} for i, text in enumerate(CONTEXTS)]


@ragpulse.generation(model="extractive")
def write(question: str, docs: list[dict[str, str]]) -> str:
    return SUPPORT_ANSWER


@ragpulse.rag(name=UNIT)
def handle(question: str) -> str:
    return write(question, search(question))


# --- judges a user might plug in --------------------------------------------------------


class GatedJudge:
    """Answers like ``LexicalJudge``, but only once the test opens ``gate``: a slow judge."""

    name = "gated"
    annotator_kind = "CODE"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.calls = 0
        self._inner = LexicalJudge()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        self.calls += 1
        self.started.set()
        deadline = time.monotonic() + WAIT
        while not self.gate.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return await self._inner.evaluate(record, metrics)


class SlowJudge:
    """Answers like ``LexicalJudge`` after ``delay`` seconds."""

    name = "slow"
    annotator_kind = "CODE"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._inner = LexicalJudge()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        await asyncio.sleep(self.delay)
        return await self._inner.evaluate(record, metrics)


class RaisingJudge:
    """A judge with a bug: it raises."""

    name = "raising"
    annotator_kind = "LLM"

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        raise RuntimeError("the judge fell over")


class GarbageJudge:
    """A judge that returns something that is not an ``Evaluation``."""

    name = "garbage"
    annotator_kind = "LLM"

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Any:
        return {"groundedness": "very"}


# --- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture
def gated(route_spans: Any) -> Iterator[GatedJudge]:
    """A gated judge; set up after ``route_spans`` so its gate opens before the processor
    shuts down at teardown."""
    judge = GatedJudge()
    yield judge
    judge.gate.set()


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


Pipeline = Callable[..., tuple[EvaluatingSpanProcessor, InMemorySpanExporter]]


@pytest.fixture
def pipeline(route_spans: Any, reader: InMemoryMetricReader) -> Pipeline:
    """Build an EvaluatingSpanProcessor in front of an in-memory exporter and route to it."""

    def build(**options: Any) -> tuple[EvaluatingSpanProcessor, InMemorySpanExporter]:
        memory = InMemorySpanExporter()
        options.setdefault("sampler", EvalSampler(rate=1.0))
        options.setdefault("meter_provider", MeterProvider(metric_readers=[reader]))
        processor = EvaluatingSpanProcessor(SimpleSpanProcessor(memory), **options)
        route_spans(processor)
        return processor, memory

    return build


def named(memory: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in memory.get_finished_spans() if s.name == name]


def wait_for(
    memory: InMemorySpanExporter, predicate: Callable[[list[ReadableSpan]], bool]
) -> list[ReadableSpan]:
    deadline = time.monotonic() + WAIT
    while True:
        spans = list(memory.get_finished_spans())
        if predicate(spans):
            return spans
        assert time.monotonic() < deadline, f"not forwarded: {[s.name for s in spans]}"
        time.sleep(0.01)


def wait_for_event(event: threading.Event) -> None:
    assert event.wait(WAIT), "the judge was never called"


def assert_each_once(spans: list[ReadableSpan]) -> None:
    ids = [s.context.span_id for s in spans]
    assert len(ids) == len(set(ids)), "a span was forwarded twice"


def status_of(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get(semconv.EVAL_STATUS)


def points(reader: InMemoryMetricReader, metric: str, key: str) -> dict[str, float]:
    """Sum of a counter's points by the value of attribute ``key``."""
    found: dict[str, float] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for instrument in scope_metrics.metrics:
                if instrument.name != metric:
                    continue
                for point in instrument.data.data_points:
                    label = str((point.attributes or {}).get(key))
                    found[label] = found.get(label, 0) + point.value  # type: ignore[union-attr]
    return found


def eval_keys(span: ReadableSpan) -> set[str]:
    return {k for k in (span.attributes or {}) if k.startswith(semconv.EVAL_PREFIX)} - {
        semconv.RAG_UNIT,
        semconv.RAG_FORCE_EVALUATION,
    }


# --- forwarding ------------------------------------------------------------------------------


def test_span_that_is_not_an_evaluation_unit_is_forwarded_at_once_and_unchanged(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    _, memory = pipeline(judge=gated)
    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("GET /health", kind=SpanKind.SERVER) as span:
        span.set_attribute("http.route", "/health")
        span.add_event("checked", {"ok": True})
    (forwarded,) = memory.get_finished_spans()
    assert forwarded.context == span.get_span_context()
    assert dict(forwarded.attributes or {}) == {"http.route": "/health"}
    assert [e.name for e in forwarded.events] == ["checked"]
    assert forwarded.kind is SpanKind.SERVER
    assert gated.calls == 0


def test_unit_that_is_not_sampled_is_forwarded_without_eval_attributes_nor_a_judge_call(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    _, memory = pipeline(judge=gated, sampler=EvalSampler(rate=0.0))
    handle("When is support open?")
    # Read on the worker thread, at its next look: forwarded without any flush.
    wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))
    (unit,) = named(memory, UNIT)
    assert eval_keys(unit) == set()
    assert gated.calls == 0


def test_generation_span_of_a_sampled_unit_is_forwarded_at_once(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    _, memory = pipeline(judge=gated)
    handle("When is support open?")
    wait_for_event(gated.started)
    names = sorted(s.name for s in memory.get_finished_spans())
    # The unit waits for its scores, its retrieval span for its documents' scores.
    assert names == ["chat extractive"]


def test_sampled_unit_is_held_until_its_evaluation_returns_then_forwarded_once(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    processor, memory = pipeline(judge=gated)
    handle("When is support open?")
    wait_for_event(gated.started)
    assert named(memory, UNIT) == []
    assert processor.held_spans == 2  # the unit and its retrieval span
    gated.gate.set()
    wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))
    processor.force_flush()
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.OK
    assert unit.attributes[semconv.eval_score(GROUNDEDNESS)] == 1.0
    assert processor.held_spans == 0
    assert_each_once(list(memory.get_finished_spans()))


def test_forwarded_unit_keeps_ids_parent_times_kind_status_events_links_resource_and_scope(
    pipeline: Pipeline,
) -> None:
    _, memory = pipeline(judge=LexicalJudge())
    linked = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    originals: list[Any] = []

    @ragpulse.rag(name=UNIT)
    def detailed(question: str) -> str:
        span = trace.get_current_span()
        originals.append(span)
        span.add_event("cache.miss", {"key": "q1"})
        span.add_link(linked, {"why": "follows"})
        span.set_status(Status(StatusCode.OK))
        return write(question, search(question))

    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER) as request:
        detailed("When is support open?")
    (original,) = originals
    wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))
    (unit,) = named(memory, UNIT)
    assert unit.context == original.get_span_context()
    assert unit.parent is not None
    assert unit.parent.span_id == request.get_span_context().span_id
    assert unit.parent == original.parent
    assert (unit.start_time, unit.end_time) == (original.start_time, original.end_time)
    assert unit.kind is original.kind
    assert unit.status.status_code is StatusCode.OK
    assert [(e.name, dict(e.attributes or {}), e.timestamp) for e in unit.events] == [
        (e.name, dict(e.attributes or {}), e.timestamp) for e in original.events
    ]
    assert [(link.context, dict(link.attributes or {})) for link in unit.links] == [
        (linked, {"why": "follows"})
    ]
    assert unit.resource is original.resource
    assert unit.instrumentation_scope == original.instrumentation_scope
    before = dict(original.attributes or {})
    after = dict(unit.attributes or {})
    assert {k: after[k] for k in before} == before  # every original attribute, unchanged
    assert set(after) - set(before) == eval_keys(unit)  # plus the evaluation's, nothing else


# --- bounds: hold timeout, held spans, held bytes, queue ---------------------------------


def assert_carrier_of(carrier: ReadableSpan, unit: ReadableSpan) -> None:
    attributes = carrier.attributes or {}
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == semconv.OI_KIND_EVALUATOR
    assert carrier.context.trace_id == unit.context.trace_id
    assert carrier.context.span_id != unit.context.span_id
    assert carrier.parent is not None and carrier.parent.span_id == unit.context.span_id
    assert [link.context.span_id for link in carrier.links] == [unit.context.span_id]
    assert attributes[semconv.EVAL_TARGET_SPAN_ID] == format(unit.context.span_id, "016x")
    assert attributes[semconv.EVAL_TARGET_TRACE_ID] == format(unit.context.trace_id, "032x")
    assert carrier.resource == unit.resource


def test_unit_held_past_hold_timeout_is_forwarded_pending_and_its_result_follows_as_carrier(
    pipeline: Pipeline, gated: GatedJudge, reader: InMemoryMetricReader
) -> None:
    processor, memory = pipeline(judge=gated, bounds=BoundsOptions(hold_timeout=1.0))
    handle("When is support open?")
    wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.PENDING
    assert semconv.eval_score(GROUNDEDNESS) not in (unit.attributes or {})
    assert named(memory, CARRIER) == []

    gated.gate.set()
    wait_for(memory, lambda spans: any(s.name == CARRIER for s in spans))
    (carrier,) = named(memory, CARRIER)
    assert_carrier_of(carrier, unit)
    assert status_of(carrier) == EvalStatus.OK
    assert carrier.attributes[semconv.eval_score(GROUNDEDNESS)] == 1.0
    processor.force_flush()
    assert len(named(memory, UNIT)) == 1  # the result did not send the unit again
    assert points(reader, semconv.METRIC_FORCED_EXPORTS, "reason") == {"hold_timeout": 1}
    assert sum(points(reader, semconv.METRIC_LATE_RESULTS, "reason").values()) == 1


def test_unit_over_max_held_spans_is_forwarded_pending_without_waiting_and_gets_a_carrier(
    pipeline: Pipeline, gated: GatedJudge, reader: InMemoryMetricReader
) -> None:
    processor, memory = pipeline(judge=gated, bounds=BoundsOptions(max_held_spans=1))
    handle("When is support open?")  # held
    handle("Is support open on Sunday?")  # over the bound
    units = wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))
    units = [s for s in units if s.name == UNIT]
    assert [u.attributes[semconv.RAG_QUESTION] for u in units] == ["Is support open on Sunday?"]
    assert status_of(units[0]) == EvalStatus.PENDING
    assert processor.held_spans == 1

    gated.gate.set()
    assert processor.force_flush(int(WAIT * 1000))
    (carrier,) = named(memory, CARRIER)
    assert_carrier_of(carrier, units[0])
    late, held = named(memory, UNIT)  # in the order they were forwarded
    assert late.context == units[0].context
    assert status_of(held) == EvalStatus.OK
    assert points(reader, semconv.METRIC_FORCED_EXPORTS, "reason") == {"max_held": 1}


def test_unit_over_max_held_bytes_is_forwarded_pending_without_waiting_and_gets_a_carrier(
    pipeline: Pipeline, gated: GatedJudge, reader: InMemoryMetricReader
) -> None:
    processor, memory = pipeline(judge=gated, bounds=BoundsOptions(max_held_bytes=64))
    handle("When is support open?")
    wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.PENDING
    assert processor.held_spans == 0 and processor.held_bytes == 0

    gated.gate.set()
    assert processor.force_flush(int(WAIT * 1000))
    (carrier,) = named(memory, CARRIER)
    assert_carrier_of(carrier, unit)
    assert status_of(carrier) == EvalStatus.OK
    assert points(reader, semconv.METRIC_FORCED_EXPORTS, "reason") == {"max_held": 1}


def test_unit_refused_by_a_full_queue_is_forwarded_skipped_with_the_reason_and_counted(
    pipeline: Pipeline, gated: GatedJudge, reader: InMemoryMetricReader
) -> None:
    processor, memory = pipeline(
        judge=gated, bounds=BoundsOptions(max_queue_size=1), judging=JudgeOptions(concurrency=1)
    )
    handle("first")  # taken by the judge
    wait_for_event(gated.started)
    handle("second")  # waits in the queue
    handle("third")  # finds the queue full
    wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))
    (skipped,) = named(memory, UNIT)
    assert skipped.attributes[semconv.RAG_QUESTION] == "third"
    assert status_of(skipped) == EvalStatus.SKIPPED
    assert skipped.attributes[semconv.EVAL_ERROR_TYPE] == errors.REASON_QUEUE_FULL
    assert points(reader, semconv.METRIC_DECISIONS, semconv.ATTR_DECISION_REASON) == {
        errors.REASON_EVALUATED: 2,
        errors.REASON_QUEUE_FULL: 1,
    }

    gated.gate.set()
    assert processor.force_flush(int(WAIT * 1000))
    units = named(memory, UNIT)
    assert_each_once(units)
    assert sorted(str(status_of(u)) for u in units) == ["ok", "ok", "skipped"]


# --- flush and shutdown ---------------------------------------------------------------------


def test_force_flush_waits_for_evaluations_in_flight(pipeline: Pipeline) -> None:
    processor, memory = pipeline(judge=SlowJudge(0.2))
    handle("When is support open?")
    assert named(memory, UNIT) == []
    assert processor.force_flush(int(WAIT * 1000))
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.OK


def test_force_flush_forwards_what_is_still_held_when_its_timeout_passes(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    processor, memory = pipeline(judge=gated)
    handle("When is support open?")
    wait_for_event(gated.started)
    assert not processor.force_flush(timeout_millis=100)
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.PENDING
    assert processor.held_spans == 0

    gated.gate.set()
    wait_for(memory, lambda spans: any(s.name == CARRIER for s in spans))
    assert_carrier_of(named(memory, CARRIER)[0], unit)


def test_shutdown_evaluates_what_was_accepted_and_forwards_every_unit(pipeline: Pipeline) -> None:
    processor, memory = pipeline(judge=SlowJudge(0.05), judging=JudgeOptions(concurrency=2))
    for n in range(6):
        handle(f"question {n}")
    processor.shutdown()
    units = named(memory, UNIT)
    assert_each_once(units)
    assert len(units) == 6
    assert {status_of(u) for u in units} == {EvalStatus.OK}


def test_shutdown_forwards_units_whose_judge_never_answers(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    processor, memory = pipeline(
        judge=gated, bounds=BoundsOptions(shutdown_timeout=1.0), judging=JudgeOptions(concurrency=2)
    )
    for n in range(5):
        handle(f"question {n}")
    processor.shutdown()
    spans = list(memory.get_finished_spans())
    assert_each_once(spans)
    units = named(memory, UNIT)
    assert len(units) == 5
    assert {status_of(u) for u in units} == {EvalStatus.PENDING}
    assert len(spans) == 15  # with every retrieval and generation span


def test_force_flush_says_false_while_an_evaluation_is_still_running(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    processor, memory = pipeline(judge=gated)
    handle("When is support open?")
    wait_for_event(gated.started)
    assert processor.force_flush(timeout_millis=1000) is False
    gated.gate.set()
    assert processor.force_flush(int(WAIT * 1000)) is True  # the carrier went out
    assert len(named(memory, CARRIER)) == 1


def test_force_flush_says_false_when_a_late_result_is_still_running(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    processor, memory = pipeline(judge=gated, bounds=BoundsOptions(hold_timeout=1.0))
    handle("When is support open?")
    wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))  # went out pending
    assert processor.held_spans == 0
    assert processor.force_flush(timeout_millis=1000) is False  # its carrier has not


def test_shutdown_waits_no_longer_than_shutdown_timeout_for_a_judge_that_never_answers(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    processor, memory = pipeline(
        judge=gated, bounds=BoundsOptions(hold_timeout=60.0, shutdown_timeout=1.0)
    )
    handle("When is support open?")
    wait_for_event(gated.started)
    processor.shutdown()  # a hang here fails the test at the gated judge's WAIT
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.PENDING
    assert processor.held_spans == 0
    gated.gate.set()


def test_retired_processor_passes_spans_on_and_flushes_true_after_abandoning_a_hung_judge(
    pipeline: Pipeline, gated: GatedJudge
) -> None:
    processor, memory = pipeline(judge=gated)
    handle("When is support open?")
    wait_for_event(gated.started)
    assert processor.retire(timeout=1.0)
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.PENDING
    handle("Is support open on Sunday?")  # passes straight through, saying it was not judged
    assert processor.force_flush(int(WAIT * 1000)) is True
    later = [u for u in named(memory, UNIT) if u.context != unit.context]
    assert [status_of(u) for u in later] == [EvalStatus.SKIPPED]
    gated.gate.set()


class InstantWorker(EvalWorker):
    """A real worker on a machine where its thread always wins the race: ``submit``
    returns only once the evaluation's callback has run."""

    def submit(self, record: RagRecord, callback: Callable[[RagRecord, Evaluation], None]) -> bool:
        done = threading.Event()

        def call_then_release(r: RagRecord, e: Evaluation) -> None:
            try:
                callback(r, e)
            finally:
                done.set()

        accepted = super().submit(record, call_then_release)
        if accepted:
            assert done.wait(WAIT), "the worker never answered"
        return accepted

    def add_intake(self, intake: Callable[[], object]) -> None:
        """Not read by the worker thread: spans are read by the thread that flushes, which
        the result can beat, as it could a request thread (or ``ragpulse serve``'s)."""


def instrumented_request(tracer: trace.Tracer, question: str = "When is support open?") -> None:
    """One request as OpenInference instruments it: a chain, its retriever and its LLM."""
    with tracer.start_as_current_span(
        "RunnableSequence",
        attributes={"openinference.span.kind": "CHAIN", "input.value": question},
    ) as root:
        documents: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
        for i, text in enumerate(CONTEXTS):
            documents[f"retrieval.documents.{i}.document.id"] = f"doc-{i}"
            documents[f"retrieval.documents.{i}.document.content"] = text
        with tracer.start_as_current_span("VectorStoreRetriever", attributes=documents):
            pass
        with tracer.start_as_current_span(
            "ChatOpenAI",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": SUPPORT_ANSWER,
            },
        ):
            pass
        root.set_attribute("output.value", SUPPORT_ANSWER)


@pytest.mark.parametrize(
    "bound", [BoundsOptions(max_held_spans=0), BoundsOptions(max_held_bytes=64)]
)
def test_result_faster_than_the_request_thread_gets_a_carrier_with_the_units_resource(
    route_spans: Any, bound: BoundsOptions
) -> None:
    memory = InMemorySpanExporter()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(memory),
        sampler=EvalSampler(rate=1.0),
        worker=InstantWorker(LexicalJudge()),
        bounds=bound,
    )
    resource = Resource.create({"service.name": "support-service", "deployment.region": "eu"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(processor)
    try:
        instrumented_request(provider.get_tracer("openinference.instrumentation.langchain"))
        processor.force_flush(int(WAIT * 1000))
        spans = wait_for(memory, lambda got: CARRIER in {s.name for s in got})
    finally:
        provider.shutdown()
    (unit,) = [s for s in spans if s.name == "RunnableSequence"]
    (carrier,) = named(memory, CARRIER)
    assert status_of(unit) == EvalStatus.PENDING
    assert_carrier_of(carrier, unit)
    assert carrier.resource.attributes["service.name"] == "support-service"
    assert carrier.resource.attributes["deployment.region"] == "eu"
    assert_each_once(spans)


# --- judges that fail -------------------------------------------------------------------------


def test_judge_that_raises_gives_status_error_with_error_type(pipeline: Pipeline) -> None:
    processor, memory = pipeline(judge=RaisingJudge())
    assert handle("When is support open?") == SUPPORT_ANSWER
    assert processor.force_flush(int(WAIT * 1000))
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.ERROR
    assert unit.attributes[semconv.EVAL_ERROR_TYPE] == "RuntimeError"
    assert unit.attributes[semconv.EVAL_JUDGE] == "raising"
    assert semconv.eval_score(GROUNDEDNESS) not in (unit.attributes or {})


def test_judge_that_returns_garbage_gives_status_error_with_error_type(
    pipeline: Pipeline,
) -> None:
    processor, memory = pipeline(judge=GarbageJudge())
    handle("When is support open?")
    assert processor.force_flush(int(WAIT * 1000))
    (unit,) = named(memory, UNIT)
    assert status_of(unit) == EvalStatus.ERROR
    assert unit.attributes[semconv.EVAL_ERROR_TYPE] == "invalid_result"


# --- on_evaluation ------------------------------------------------------------------------------


def test_on_evaluation_receives_each_record_and_its_result(pipeline: Pipeline) -> None:
    seen: list[tuple[RagRecord, Evaluation]] = []
    processor, memory = pipeline(on_evaluation=lambda r, e: seen.append((r, e)))
    handle("When is support open?")
    handle("Is support open on weekdays?")
    assert processor.force_flush(int(WAIT * 1000))
    units = {u.context.span_id: u for u in named(memory, UNIT)}
    assert len(seen) == 2
    for record, evaluation in seen:
        assert record.span_context is not None
        unit = units[record.span_context.span_id]
        assert record.question == unit.attributes[semconv.RAG_QUESTION]
        assert [c.text for c in record.contexts] == CONTEXTS
        assert evaluation.score(GROUNDEDNESS) == unit.attributes[semconv.eval_score(GROUNDEDNESS)]


def test_on_evaluation_that_raises_breaks_nothing(pipeline: Pipeline) -> None:
    calls: list[int] = []

    def explode(record: RagRecord, evaluation: Evaluation) -> None:
        calls.append(1)
        raise ValueError("callback bug")

    processor, memory = pipeline(on_evaluation=explode)
    handle("When is support open?")
    assert processor.force_flush(int(WAIT * 1000))
    handle("Is support open on weekdays?")
    assert processor.force_flush(int(WAIT * 1000))
    units = named(memory, UNIT)
    assert len(calls) == 2
    assert [status_of(u) for u in units] == [EvalStatus.OK, EvalStatus.OK]


# --- sampling decisions ---------------------------------------------------------------------------


def test_decisions_are_counted_by_reason_evaluated_and_over_budget(
    pipeline: Pipeline, reader: InMemoryMetricReader
) -> None:
    processor, memory = pipeline(sampler=EvalSampler(rate=1.0, max_evaluations_per_minute=3))
    for n in range(5):
        handle(f"question {n}")
    assert processor.force_flush(int(WAIT * 1000))
    assert points(reader, semconv.METRIC_DECISIONS, semconv.ATTR_DECISION_REASON) == {
        errors.REASON_EVALUATED: 3,
        errors.REASON_OVER_BUDGET: 2,
    }
    statuses = sorted(str(status_of(u)) for u in named(memory, UNIT))
    assert statuses == ["ok", "ok", "ok", "skipped", "skipped"]  # over budget: forwarded now


def test_decisions_are_counted_by_reason_not_sampled_and_forced(
    pipeline: Pipeline, reader: InMemoryMetricReader
) -> None:
    @ragpulse.rag(name=UNIT)
    def escalated(question: str) -> str:
        ragpulse.force_evaluation()
        return write(question, search(question))

    processor, memory = pipeline(sampler=EvalSampler(rate=0.0))
    for n in range(3):
        handle(f"question {n}")
    escalated("a complaint")
    assert processor.force_flush(int(WAIT * 1000))
    assert points(reader, semconv.METRIC_DECISIONS, semconv.ATTR_DECISION_REASON) == {
        errors.REASON_NOT_SAMPLED: 3,
        errors.REASON_FORCED: 1,
    }
    (forced,) = [u for u in named(memory, UNIT) if status_of(u) is not None]
    assert forced.attributes[semconv.RAG_QUESTION] == "a complaint"


def test_a_decorated_agent_answer_with_no_evidence_is_skipped_no_evidence(
    pipeline: Pipeline, reader: InMemoryMetricReader
) -> None:
    @ragpulse.tool(evidence=False)
    def calculator(expression: str) -> str:
        return "391"

    @ragpulse.rag(name=UNIT)
    def agent(question: str) -> str:
        calculator("17*23")
        return "17 times 23 is 391."

    processor, memory = pipeline(sampler=EvalSampler(rate=1.0))
    agent("What is 17*23?")
    handle("When is support open?")
    assert processor.force_flush(int(WAIT * 1000))
    assert points(reader, semconv.METRIC_DECISIONS, semconv.ATTR_DECISION_REASON) == {
        errors.REASON_EVALUATED: 2,
    }
    statuses = sorted(
        (str(status_of(u)), str(u.attributes.get(semconv.EVAL_ERROR_TYPE)))
        for u in named(memory, UNIT)
    )
    assert statuses == [("ok", "None"), ("skipped", errors.NO_EVIDENCE)]
    # Asked for and not judged: the coverage shows the agent answers it misses.
    assert processor.coverage.value() == 0.5


# --- adapters: a trace instrumented by someone else ----------------------------------------------


def test_openinference_trace_is_evaluated_at_its_local_root(route_spans: Any) -> None:
    memory = InMemorySpanExporter()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(memory), judge=LexicalJudge(), sampler=EvalSampler(rate=1.0)
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    question = "When is support open?"
    try:
        with tracer.start_as_current_span(
            "RunnableSequence",
            attributes={"openinference.span.kind": "CHAIN", "input.value": question},
        ) as root:
            retriever_attributes: dict[str, Any] = {
                "openinference.span.kind": "RETRIEVER",
                "input.value": question,
            }
            for i, text in enumerate(CONTEXTS):
                retriever_attributes[f"retrieval.documents.{i}.document.id"] = f"doc-{i}"
                retriever_attributes[f"retrieval.documents.{i}.document.content"] = text
            with tracer.start_as_current_span(
                "VectorStoreRetriever", attributes=retriever_attributes
            ):
                pass
            with tracer.start_as_current_span(
                "ChatOpenAI",
                attributes={
                    "openinference.span.kind": "LLM",
                    "llm.input_messages.0.message.role": "user",
                    "llm.input_messages.0.message.content": question,
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": SUPPORT_ANSWER,
                },
            ):
                pass
            root.set_attribute("output.value", SUPPORT_ANSWER)
        assert processor.force_flush(int(WAIT * 1000))
        spans = list(memory.get_finished_spans())
    finally:
        provider.shutdown()
    assert_each_once(spans)
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"RunnableSequence", "VectorStoreRetriever", "ChatOpenAI"}
    evaluated = by_name["RunnableSequence"]
    assert evaluated.context.span_id == root.get_span_context().span_id
    assert status_of(evaluated) == EvalStatus.OK
    assert evaluated.attributes[semconv.eval_score(GROUNDEDNESS)] == 1.0
    claims = json.loads(str(evaluated.attributes[semconv.EVAL_CLAIMS]))
    assert claims[0]["context_id"] == "doc-1"
    assert {key.rsplit(".", 1)[0] for key in eval_keys(by_name["VectorStoreRetriever"])} == {
        semconv.EVAL_DOCUMENTS_PREFIX + "0",
        semconv.EVAL_DOCUMENTS_PREFIX + "1",
    }  # only its documents' scores
    assert eval_keys(by_name["ChatOpenAI"]) == set()


def test_instrumented_trace_is_left_alone_when_adapters_are_off(route_spans: Any) -> None:
    memory = InMemorySpanExporter()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(memory), sampler=EvalSampler(rate=1.0), adapters=False
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("openinference.instrumentation.openai")
    try:
        with tracer.start_as_current_span(
            "ChatCompletion",
            attributes={
                "openinference.span.kind": "LLM",
                "input.value": "When is support open?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": SUPPORT_ANSWER,
            },
        ):
            pass
        (span,) = memory.get_finished_spans()
    finally:
        provider.shutdown()
    assert eval_keys(span) == set()


def test_worker_of_the_processor_counts_what_it_did(pipeline: Pipeline) -> None:
    processor, _ = pipeline(judge=RaisingJudge())
    handle("When is support open?")
    assert processor.force_flush(int(WAIT * 1000))
    stats = processor.worker.stats
    assert (stats.submitted, stats.completed) == (1, 1)
    assert stats.errors_by_type == {"RuntimeError": 1}


def test_judge_attempts_are_counted_for_a_worker_passed_in(
    pipeline: Pipeline, reader: InMemoryMetricReader
) -> None:
    worker = EvalWorker(ResilientJudge(RaisingJudge()))
    processor, _ = pipeline(worker=worker)
    handle("When is support open?")
    assert processor.force_flush(int(WAIT * 1000))
    assert points(reader, semconv.METRIC_ERRORS, semconv.ERROR_TYPE) == {"RuntimeError": 1}


def test_judge_attempts_are_counted_once_for_the_judge_given(
    pipeline: Pipeline, reader: InMemoryMetricReader
) -> None:
    processor, _ = pipeline(judge=RaisingJudge())
    handle("When is support open?")
    assert processor.force_flush(int(WAIT * 1000))
    assert points(reader, semconv.METRIC_ERRORS, semconv.ERROR_TYPE) == {"RuntimeError": 1}


class RepeatingSpanIds(RandomIdGenerator):
    """Random trace ids, but every trace's two spans get span ids 1 and 2: ids that repeat across
    traces, as they may when many apps' traces meet in one ``ragpulse serve``."""

    def __init__(self) -> None:
        self._next = itertools.cycle((1, 2))

    def generate_span_id(self) -> int:
        return next(self._next)


def test_units_of_two_traces_with_the_same_span_id_are_both_scored_and_forwarded(
    route_spans: Any, gated: GatedJudge
) -> None:
    memory = InMemorySpanExporter()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(memory), judge=gated, sampler=EvalSampler(rate=1.0)
    )
    provider = TracerProvider(id_generator=RepeatingSpanIds())
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    roots = []
    try:
        for question in ("When is support open?", "When is support open on weekdays?"):
            with tracer.start_as_current_span(
                "RunnableSequence",
                attributes={"openinference.span.kind": "CHAIN", "input.value": question},
            ) as root:
                with tracer.start_as_current_span(
                    "VectorStoreRetriever",
                    attributes={
                        "openinference.span.kind": "RETRIEVER",
                        "retrieval.documents.0.document.content": CONTEXTS[1],
                    },
                ):
                    pass
                root.set_attribute("output.value", SUPPORT_ANSWER)
            roots.append(root.get_span_context())
        assert roots[0].span_id == roots[1].span_id and roots[0].trace_id != roots[1].trace_id
        gated.gate.set()
        assert processor.force_flush(int(WAIT * 1000))
        units = named(memory, "RunnableSequence")
    finally:
        provider.shutdown()
    assert sorted(u.context.trace_id for u in units) == sorted(r.trace_id for r in roots)
    assert [status_of(u) for u in units] == [EvalStatus.OK, EvalStatus.OK]


def test_every_evaluation_is_counted_by_status_and_error_type_also_those_no_judge_made(
    pipeline: Pipeline, reader: InMemoryMetricReader
) -> None:
    # too_large is decided by the worker before any judge attempt, so the per-attempt
    # error counter never sees it: the evaluations counter must.
    processor, _ = pipeline(judge=LexicalJudge(), bounds=BoundsOptions(max_input_chars=10))
    handle("When is support open?")
    assert processor.force_flush(int(WAIT * 1000))
    assert points(reader, semconv.METRIC_EVALUATIONS, semconv.ERROR_TYPE) == {"too_large": 1}
    assert points(reader, semconv.METRIC_EVALUATIONS, semconv.EVAL_STATUS) == {"skipped": 1}


def test_evaluations_that_succeed_are_counted_ok(
    pipeline: Pipeline, reader: InMemoryMetricReader
) -> None:
    processor, _ = pipeline(judge=LexicalJudge())
    handle("When is support open?")
    handle("When is support open today?")
    assert processor.force_flush(int(WAIT * 1000))
    assert points(reader, semconv.METRIC_EVALUATIONS, semconv.EVAL_STATUS) == {"ok": 2}


def test_processor_from_settings_applies_the_holding_and_worker_bounds(
    route_spans: Any, gated: GatedJudge
) -> None:
    # configure() and ragpulse serve both build their processor from Settings: a bound set
    # there must reach the held-span table and the worker in either.
    from ragpulse.settings import Settings

    memory = InMemorySpanExporter()
    settings = Settings.load({"max_held_spans": 1, "max_queue_size": 5}, environ={})
    processor = EvaluatingSpanProcessor.from_settings(
        SimpleSpanProcessor(memory), settings, judge=gated
    )
    route_spans(processor)
    handle("When is support open?")
    wait_for_event(gated.started)
    handle("When is support open today?")  # over max_held_spans=1: out, pending
    wait_for(memory, lambda spans: any(s.name == UNIT for s in spans))
    assert [status_of(s) for s in named(memory, UNIT)] == [EvalStatus.PENDING]
    assert processor.worker._max_queue_size == 5
    gated.gate.set()
    assert processor.force_flush(int(WAIT * 1000))
