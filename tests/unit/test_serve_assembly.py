"""Trace assembly in ragpulse serve: a unit waits for the spans its record needs, never longer."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse import semconv
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.serve._assembly import COMPLETE, EVICTED, TIMEOUT, TraceAssembler
from ragpulse.serve._byte_budget import ByteBudget

CONTEXT = "The Eiffel Tower is 330 metres tall and stands in Paris."
ANSWER = "The Eiffel Tower is 330 metres tall."
RAGPULSE = InstrumentationScope("ragpulse", "0")
OTHER = InstrumentationScope("app", "1")


class Recorder(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)

    def names(self) -> list[str]:
        return [span.name for span in self.ended]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _span(
    name: str,
    trace_id: int,
    span_id: int,
    parent_id: int | None,
    attributes: dict[str, object],
    scope: InstrumentationScope = RAGPULSE,
) -> ReadableSpan:
    parent = SpanContext(trace_id, parent_id, False, TraceFlags(1)) if parent_id else None
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, False, TraceFlags(1)),
        parent=parent,
        resource=Resource({"service.name": "app"}),
        attributes=attributes,
        start_time=span_id,
        end_time=span_id + 10,
        instrumentation_scope=scope,
    )


def rag_unit(trace_id: int, contexts: int = 1) -> ReadableSpan:
    return _span(
        "answer",
        trace_id,
        1,
        None,
        {
            semconv.RAG_UNIT: True,
            semconv.RAG_QUESTION: "How tall is the Eiffel Tower?",
            semconv.RAG_ANSWER: ANSWER,
            semconv.RAG_CONTEXTS_COUNT: contexts,
        },
    )


def retrieval(trace_id: int, span_id: int, text: str = CONTEXT) -> ReadableSpan:
    return _span(
        "retrieval search",
        trace_id,
        span_id,
        1,
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            "gen_ai.retrieval.documents": json.dumps([{"content": text}]),
        },
    )


def plain(trace_id: int, span_id: int) -> ReadableSpan:
    return _span("db query", trace_id, span_id, 1, {"db.system": "sqlite"}, OTHER)


def test_unit_arriving_before_its_retrieval_waits_and_goes_once_it_arrives() -> None:
    recorder, released = Recorder(), []
    assembler = TraceAssembler(recorder, on_release=lambda reason, n: released.append(reason))

    assembler.add(rag_unit(7))
    assert recorder.names() == []
    assembler.add(retrieval(7, 2))

    assert recorder.names() == ["retrieval search", "answer"]
    assert released == [COMPLETE]
    assert assembler.traces == 0


def test_unit_waits_for_as_many_contexts_as_it_reported() -> None:
    recorder = Recorder()
    assembler = TraceAssembler(recorder)

    assembler.add(rag_unit(7, contexts=2))
    assembler.add(retrieval(7, 2))
    assert recorder.names() == ["retrieval search"]
    assembler.add(retrieval(7, 3, "The tower was finished in 1889."))

    assert recorder.names() == ["retrieval search", "retrieval search", "answer"]


def test_spans_no_record_needs_pass_straight_through() -> None:
    recorder = Recorder()
    assembler = TraceAssembler(recorder)

    assembler.add(plain(7, 5))

    assert recorder.names() == ["db query"]
    assert assembler.traces == 0


def test_unit_whose_children_never_come_goes_on_at_the_assembly_timeout() -> None:
    recorder, clock, released = Recorder(), Clock(), []
    assembler = TraceAssembler(
        recorder, timeout=2.0, clock=clock, on_release=lambda reason, n: released.append(reason)
    )
    assembler.add(rag_unit(7))

    clock.now += 1.9
    assembler.expire()
    assert recorder.names() == []
    clock.now += 0.2
    assembler.expire()

    assert recorder.names() == ["answer"]
    assert released == [TIMEOUT]


def test_oldest_trace_is_evicted_and_forwarded_when_the_trace_bound_is_hit() -> None:
    recorder, released = Recorder(), []
    assembler = TraceAssembler(
        recorder, max_traces=2, on_release=lambda reason, n: released.append(reason)
    )
    for trace_id in (1, 2, 3):
        assembler.add(rag_unit(trace_id))

    assert [span.context.trace_id for span in recorder.ended] == [1]
    assert released == [EVICTED]
    assert assembler.traces == 2


def test_drain_releases_every_held_unit() -> None:
    recorder = Recorder()
    assembler = TraceAssembler(recorder)
    for trace_id in (1, 2):
        assembler.add(rag_unit(trace_id))

    assembler.drain()

    assert sorted(span.context.trace_id for span in recorder.ended) == [1, 2]
    assert assembler.traces == 0 and assembler.bytes == 0


def test_out_of_order_ragpulse_trace_is_evaluated_by_the_processor_with_its_scores() -> None:
    memory = InMemorySpanExporter()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(memory), sampler=EvalSampler(rate=1.0), adapters=True
    )
    assembler = TraceAssembler(processor)

    assembler.add(rag_unit(9))
    assembler.add(plain(9, 4))
    assembler.add(retrieval(9, 2))
    processor.force_flush(10_000)
    processor.shutdown()

    spans = {span.name: span for span in memory.get_finished_spans()}
    assert set(spans) == {"answer", "db query", "retrieval search"}
    unit = spans["answer"].attributes
    assert unit[semconv.EVAL_STATUS] == "ok"
    assert unit["ragpulse.eval.groundedness.score"] == 1.0
    assert len(memory.get_finished_spans()) == 3


def test_budget_refuses_past_its_bound_and_frees_what_is_exported() -> None:
    budget = ByteBudget(1000)
    spans = [retrieval(1, 2), retrieval(1, 3)]

    assert budget.reserve(800)
    budget.assign(spans, 800)
    assert not budget.reserve(300)
    budget.release(spans[:1])
    assert budget.used == 400
    assert budget.reserve(300)


def test_empty_budget_takes_one_request_larger_than_its_bound() -> None:
    budget = ByteBudget(100)

    assert budget.reserve(5000)
    assert not budget.reserve(1)


def test_unit_the_sampler_will_not_evaluate_goes_on_without_waiting() -> None:
    recorder = Recorder()
    assembler = TraceAssembler(recorder, wanted=lambda unit: False)

    assembler.add(rag_unit(7))

    assert recorder.names() == ["answer"]
    assert assembler.traces == 0


def test_parts_kept_for_a_unit_the_sampler_refuses_are_let_go_with_it() -> None:
    recorder = Recorder()
    assembler = TraceAssembler(recorder, wanted=lambda unit: False)

    assembler.add(retrieval(7, 2))
    assert assembler.traces == 1
    assembler.add(rag_unit(7))

    assert recorder.names() == ["retrieval search", "answer"]
    assert assembler.traces == 0 and assembler.bytes == 0


class CountingSpan(ReadableSpan):
    """A span that counts how often its attributes are read."""

    reads = 0

    @property
    def attributes(self) -> Any:
        self.reads += 1
        return super().attributes


def counting(source: ReadableSpan) -> CountingSpan:
    """``source`` as a span that counts the reads of its attributes."""
    return CountingSpan(
        name=source.name,
        context=source.context,
        parent=source.parent,
        resource=source.resource,
        attributes=source.attributes,
        start_time=source.start_time,
        end_time=source.end_time,
        instrumentation_scope=source.instrumentation_scope,
    )


def test_each_part_is_read_a_bounded_number_of_times_however_long_its_unit_waits() -> None:
    # A unit that never completes (it reported more contexts than ever arrive), then many
    # retrieval spans of its trace: each is read on arrival, not again with every later one.
    assembler = TraceAssembler(Recorder())
    assembler.add(rag_unit(7, contexts=1_000_000))
    parts = []
    for number in range(300):
        part = counting(retrieval(7, 10 + number, f"Passage number {number}."))
        parts.append(part)
        assembler.add(part)

    assert assembler.units == 1
    assert max(part.reads for part in parts) <= 20


def test_a_unit_released_at_the_timeout_goes_with_the_parts_that_came_while_it_waited() -> None:
    clock, got = Clock(), []
    assembler = TraceAssembler(
        Recorder(), timeout=2.0, clock=clock, release=lambda span, records: got.extend(records)
    )
    assembler.add(rag_unit(7, contexts=2))  # waits for two passages
    assembler.add(retrieval(7, 2))  # only one ever comes
    clock.now += 2.1
    assembler.expire()

    assert len(got) == 1
    assert [context.text for context in got[0].contexts] == [CONTEXT]


def test_a_unit_no_part_reached_is_not_read_again_when_it_is_released() -> None:
    # Its record was read on arrival; with no part since, the same record goes with it.
    clock, got = Clock(), []
    assembler = TraceAssembler(
        Recorder(), timeout=2.0, clock=clock, release=lambda span, records: got.extend(records)
    )
    unit = counting(rag_unit(7))
    assembler.add(unit)
    reads = unit.reads
    clock.now += 2.1
    assembler.expire()

    assert unit.reads == reads
    assert len(got) == 1
    assert got[0].question == "How tall is the Eiffel Tower?" and not got[0].contexts
