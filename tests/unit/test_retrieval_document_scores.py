"""Per-document context scores on the retrieval spans, in the application's process.

An evaluated unit's retrieval spans leave with its result, each carrying
``ragpulse.eval.context_relevance.documents.N.*`` for its own documents (N as in
``retrieval.documents.N``); every other retrieval span goes on unchanged, and at
once when its trace is not sampled. Real SDK spans, processors and judges.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import semconv
from ragpulse.adapters import record_from_trace
from ragpulse.evaluation.types import Contexts, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging._wire import WireError, decode_evaluation, encode_evaluation
from ragpulse.judging.resilient import ResilientJudge
from ragpulse.processor.held import HeldSpans
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import BoundsOptions
from ragpulse.signals.emit import EmitOptions
from ragpulse.signals.make import make_signals
from servers.rag_traces import documents_of

WAIT = 20.0
QUESTION = "When is support open on weekdays?"
HOURS = "Support is open from 9am to 5pm on weekdays."
ROUTER = "The Larkspur L2 router costs $129 and was released in March 2024."
RETURNS = "Returns are accepted within 30 days of purchase."
ANSWER = "Support is open from 9am to 5pm on weekdays."
UNIT = "support-bot"
METRICS = ("groundedness", "context_relevance", "context_precision", "context_utilisation")


def listed_by_id(unit: ReadableSpan) -> dict[str, dict[str, Any]]:
    """The unit's ``ragpulse.eval.contexts`` rows by passage id."""
    rows = json.loads(str((unit.attributes or {})[semconv.EVAL_CONTEXTS]))
    return {row["id"]: row for row in rows}


def as_document(row: dict[str, Any]) -> dict[str, Any]:
    return {"score": row["relevance"], "relevant": row["relevant"], "used": row["used"]}


def named(memory: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in memory.get_finished_spans() if s.name == name]


def evaluating(
    judge: Any, *, rate: float = 1.0, **options: Any
) -> tuple[EvaluatingSpanProcessor, InMemorySpanExporter]:
    """A processor in front of an in-memory exporter, evaluating the context metrics."""
    memory = InMemorySpanExporter()
    options.setdefault("sampler", EvalSampler(rate=rate))
    options.setdefault("metrics", METRICS)
    return EvaluatingSpanProcessor(SimpleSpanProcessor(memory), judge=judge, **options), memory


@pytest.fixture
def worker_thread_judge() -> Iterator[ResilientJudge]:
    judge = ResilientJudge(LexicalJudge(), isolate_cpu_bound=False)
    yield judge
    judge.close()


# --- the decorated application ----------------------------------------------------------------


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [
        {"id": "router", "content": ROUTER},
        {"id": "hours", "content": HOURS},
    ]


@ragpulse.retrieval
def search_policies(query: str) -> list[dict[str, str]]:
    return [{"id": "returns", "content": RETURNS}]


@ragpulse.rag(name=UNIT)
def handle(question: str) -> str:
    search(question)
    search_policies(question)
    return ANSWER


def test_each_retrieval_span_of_an_evaluated_unit_carries_its_own_documents_scores(
    route_spans: Any, worker_thread_judge: ResilientJudge
) -> None:
    processor, memory = evaluating(worker_thread_judge)
    route_spans(processor)
    handle(QUESTION)
    assert processor.force_flush(int(WAIT * 1000))
    (unit,) = named(memory, UNIT)
    listed = listed_by_id(unit)
    (first,) = named(memory, "retrieval search")
    (second,) = named(memory, "retrieval search_policies")
    assert documents_of(first.attributes) == {
        0: as_document(listed["router"]),
        1: as_document(listed["hours"]),
    }
    assert documents_of(second.attributes) == {0: as_document(listed["returns"])}
    assert documents_of(first.attributes)[1]["used"] is True  # the answer is the hours passage


def test_retrieval_span_of_an_unsampled_trace_is_forwarded_before_its_unit_ends(
    route_spans: Any,
) -> None:
    processor, memory = evaluating(LexicalJudge(), rate=0.0)
    route_spans(processor)
    seen_inside: list[str] = []

    @ragpulse.rag(name=UNIT)
    def observed(question: str) -> str:
        search(question)
        seen_inside.extend(s.name for s in memory.get_finished_spans())
        return ANSWER

    observed(QUESTION)
    assert seen_inside == ["retrieval search"]
    (retrieval,) = named(memory, "retrieval search")
    assert not [k for k in retrieval.attributes or {} if k.startswith(semconv.EVAL_PREFIX)]
    assert processor.held_spans == 0


def test_retrieval_span_of_a_unit_that_is_not_evaluated_goes_on_unchanged_when_it_ends(
    route_spans: Any,
) -> None:
    # Sampled by trace id, refused by the evaluations-per-minute cap: not evaluated.
    sampler = EvalSampler(rate=1.0, max_evaluations_per_minute=1)
    processor, memory = evaluating(LexicalJudge(), sampler=sampler)
    route_spans(processor)
    handle(QUESTION)
    handle(QUESTION)  # over the cap
    assert processor.force_flush(int(WAIT * 1000))
    scored = [documents_of(s.attributes) for s in named(memory, "retrieval search")]
    assert len(scored) == 2
    assert sum(bool(documents) for documents in scored) == 1  # only the evaluated unit's
    assert processor.held_spans == 0


def test_retrieval_span_outside_any_unit_goes_on_unchanged_when_its_local_root_ends(
    route_spans: Any,
) -> None:
    processor, memory = evaluating(LexicalJudge())
    route_spans(processor)
    with trace.get_tracer("app").start_as_current_span("GET /search"):
        search(QUESTION)
        assert named(memory, "retrieval search") == []  # its trace may still be evaluated
    deadline = time.monotonic() + WAIT
    while not named(memory, "retrieval search"):  # read when the root has ended
        assert time.monotonic() < deadline, "the retrieval span was never forwarded"
        time.sleep(0.01)
    (retrieval,) = named(memory, "retrieval search")
    assert documents_of(retrieval.attributes) == {}
    assert processor.held_spans == 0


def test_retrieval_span_whose_unit_never_ends_goes_on_after_hold_timeout(
    route_spans: Any,
) -> None:
    processor, memory = evaluating(LexicalJudge(), bounds=BoundsOptions(hold_timeout=1.0))
    route_spans(processor)
    tracer = trace.get_tracer("app")
    root = tracer.start_span("long request")  # never ends in this test
    with trace.use_span(root, end_on_exit=False):
        search(QUESTION)
    deadline = time.monotonic() + WAIT
    while not named(memory, "retrieval search"):
        assert time.monotonic() < deadline, "the retrieval span was never forwarded"
        time.sleep(0.01)
    (retrieval,) = named(memory, "retrieval search")
    assert documents_of(retrieval.attributes) == {}


# --- a trace instrumented with OpenInference ------------------------------------------------------


def retriever(tracer: trace.Tracer, name: str, documents: list[tuple[str, str]]) -> None:
    attributes: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": QUESTION}
    for i, (doc_id, text) in enumerate(documents):
        attributes[f"retrieval.documents.{i}.document.id"] = doc_id
        attributes[f"retrieval.documents.{i}.document.content"] = text
    with tracer.start_as_current_span(name, attributes=attributes):
        pass


def test_each_openinference_retriever_gets_the_scores_of_its_own_documents(
    worker_thread_judge: ResilientJudge,
) -> None:
    processor, memory = evaluating(worker_thread_judge)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    try:
        with tracer.start_as_current_span(
            "RunnableSequence",
            attributes={"openinference.span.kind": "CHAIN", "input.value": QUESTION},
        ) as root:
            retriever(tracer, "ProductRetriever", [("router", ROUTER), ("hours", HOURS)])
            # The same hours passage again, at position 1 of the second retriever.
            retriever(tracer, "PolicyRetriever", [("returns", RETURNS), ("hours", HOURS)])
            root.set_attribute("output.value", ANSWER)
        assert processor.force_flush(int(WAIT * 1000))
        spans = {s.name: s for s in memory.get_finished_spans()}
    finally:
        provider.shutdown()
    listed = listed_by_id(spans["RunnableSequence"])
    assert documents_of(spans["ProductRetriever"].attributes) == {
        0: as_document(listed["router"]),
        1: as_document(listed["hours"]),
    }
    assert documents_of(spans["PolicyRetriever"].attributes) == {
        0: as_document(listed["returns"]),
        1: as_document(listed["hours"]),
    }


# --- the judge's process: numbers and flags cross, never text ----------------------------------


def test_per_document_rows_cross_the_judge_wire_as_numbers_and_flags() -> None:
    record = RagRecord(question=QUESTION, contexts=Contexts([ROUTER, HOURS]), answer=ANSWER)
    evaluation = asyncio.run(LexicalJudge().evaluate(record, ("context_relevance",)))
    _, signals = make_signals(evaluation, name=UNIT, service=None, options=EmitOptions())
    decoded = decode_evaluation(encode_evaluation(evaluation, signals))
    assert decoded.signals is not None  # type: ignore[attr-defined]
    assert decoded.signals.documents == signals.documents  # type: ignore[attr-defined]
    assert [row[0] for row in signals.documents] == [0, 1]


def test_a_document_row_carrying_text_is_refused_by_the_wire() -> None:
    record = RagRecord(question=QUESTION, contexts=Contexts([HOURS]), answer=ANSWER)
    evaluation = asyncio.run(LexicalJudge().evaluate(record, ("context_relevance",)))
    _, signals = make_signals(evaluation, name=UNIT, service=None, options=EmitOptions())
    kind, fields, made = encode_evaluation(evaluation, signals)
    leaking = (*made[:-1], ((0, HOURS, True, True),))
    with pytest.raises(WireError):
        decode_evaluation((kind, fields, leaking))


# --- the table's bounds ------------------------------------------------------------------------


def ended_retrieval() -> ReadableSpan:
    provider = TracerProvider()
    with provider.get_tracer("test").start_as_current_span("retrieval search") as span:
        pass
    return span  # type: ignore[return-value]


def test_retrieval_spans_wait_only_within_half_the_bounds_so_units_always_fit() -> None:
    table = HeldSpans(hold_timeout=60.0, max_spans=4, max_bytes=10_000, on_expired=lambda *_: None)
    try:
        spans = [ended_retrieval() for _ in range(3)]
        keys = [(s.context.trace_id, s.context.span_id) for s in spans]  # type: ignore[union-attr]
        assert [table.wait(k, s, 10) for k, s in zip(keys, spans, strict=True)] == [
            True,
            True,
            False,
        ]
        units = [ended_retrieval() for _ in range(2)]
        for unit in units:
            key = (unit.context.trace_id, unit.context.span_id)  # type: ignore[union-attr]
            assert table.hold(key, unit, 10)
        assert table.count == 4
    finally:
        table.close()


def test_a_retrieval_span_whose_unit_never_comes_is_handed_on_by_the_reaper() -> None:
    handed: list[ReadableSpan] = []
    arrived = threading.Event()

    def on_expired(units: list[Any], stale: list[ReadableSpan]) -> None:
        handed.extend(stale)
        arrived.set()

    table = HeldSpans(hold_timeout=1.0, max_spans=10, max_bytes=10_000, on_expired=on_expired)
    try:
        span = ended_retrieval()
        assert table.wait((span.context.trace_id, span.context.span_id), span, 10)  # type: ignore[union-attr]
        assert arrived.wait(WAIT)
        assert handed == [span]
        assert (table.count, table.bytes, table.waiting) == (0, 0, 0)
    finally:
        table.close()


def test_a_retrieval_span_received_twice_waits_once_and_its_copy_goes_on() -> None:
    table = HeldSpans(hold_timeout=60.0, max_spans=10, max_bytes=10_000, on_expired=lambda *_: None)
    try:
        span = ended_retrieval()
        key = (span.context.trace_id, span.context.span_id)  # type: ignore[union-attr]
        assert table.wait(key, span, 10)
        assert not table.wait(key, span, 10)
        assert [w.span for w in table.claim_trace(key[0])] == [span]
        assert (table.count, table.bytes) == (0, 0)
    finally:
        table.close()


# --- which span and position each context came from ---------------------------------------------


def finished(tracer: trace.Tracer, name: str, attributes: dict[str, Any]) -> ReadableSpan:
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        pass
    return span  # type: ignore[return-value]


def test_a_context_keeps_its_document_position_when_an_earlier_document_had_no_text() -> None:
    tracer = TracerProvider().get_tracer("openinference.instrumentation.llama_index")
    with tracer.start_as_current_span(
        "query", attributes={"openinference.span.kind": "CHAIN", "input.value": QUESTION}
    ) as root:
        retrieved = finished(
            tracer,
            "retrieve",
            {
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.id": "image-only",
                "retrieval.documents.1.document.content": HOURS,
            },
        )
        root.set_attribute("output.value", ANSWER)
    record = record_from_trace(root, [retrieved])  # type: ignore[arg-type]
    assert record is not None
    assert record.sources == ((retrieved.context.span_id, 1, 0, 1),)  # type: ignore[union-attr]


def test_genai_documents_map_to_their_place_in_the_documents_list() -> None:
    tracer = TracerProvider().get_tracer("app")
    with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}) as root:
        documents = [{"id": "router", "content": ROUTER}, {"id": "hours", "content": HOURS}]
        retrieved = finished(
            tracer,
            "retrieval",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(documents),
            },
        )
        root.set_attribute(
            "gen_ai.output.messages",
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]),
        )
    record = record_from_trace(root, [retrieved])  # type: ignore[arg-type]
    assert record is not None
    assert [c.id for c in record.contexts] == ["router", "hours"]
    assert record.sources == ((retrieved.context.span_id, 0, 0, 2),)  # type: ignore[union-attr]


@ragpulse.tool
def search_hours(query: str, tool_call_id: str) -> str:
    return HOURS


@ragpulse.tool
def lookup_returns(query: str, tool_call_id: str) -> str:
    return RETURNS


@ragpulse.tool(evidence=False)
def open_ticket(subject: str) -> str:
    return "Ticket 1234 opened."


@ragpulse.rag(name="support-agent")
def agent(question: str) -> str:
    lookup_returns(question, tool_call_id="call_a")
    search_hours(question, tool_call_id="call_b")
    open_ticket(question)
    return ANSWER


def test_each_evidence_tool_span_of_an_evaluated_agent_carries_its_result_score(
    route_spans: Any, worker_thread_judge: ResilientJudge
) -> None:
    processor, memory = evaluating(worker_thread_judge)
    route_spans(processor)
    agent(QUESTION)
    assert processor.force_flush(int(WAIT * 1000))
    (unit,) = named(memory, "support-agent")
    listed = listed_by_id(unit)
    (hours,) = named(memory, "execute_tool search_hours")
    (returns,) = named(memory, "execute_tool lookup_returns")
    (ticket,) = named(memory, "execute_tool open_ticket")
    assert documents_of(hours.attributes) == {0: as_document(listed["call_b"])}
    assert documents_of(returns.attributes) == {0: as_document(listed["call_a"])}
    assert documents_of(hours.attributes)[0]["used"] is True
    assert documents_of(returns.attributes)[0]["used"] is False
    # The acting tool's result was no evidence: it went on unchanged.
    assert documents_of(ticket.attributes) == {}
