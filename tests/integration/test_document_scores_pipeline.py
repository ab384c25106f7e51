"""Per-document context scores reach the backend on the retrieval spans, over real OTLP.

A decorated RAG function's spans go through ``EvaluatingSpanProcessor``, the SDK's
``BatchSpanProcessor`` and the OTLP/HTTP exporter to a real rotel collector. An
evaluated unit's retrieval span arrives with
``ragpulse.eval.context_relevance.documents.N.*`` matching the unit's
``ragpulse.eval.contexts``, whether the judge runs in its own processes (the
per-document values cross back as numbers) or on the worker thread; when the
evaluation fails, is late, or the processor shuts down first, the retrieval span
arrives unchanged, and no span is ever lost.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Collection, Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import ragpulse
from ragpulse import semconv
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging.resilient import ResilientJudge
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import BoundsOptions
from servers.rag_traces import documents_of
from servers.rotel_sink import ReceivedSpan, RotelSink

pytestmark = pytest.mark.integration

WAIT = 120.0  # catches a hang only; every wait ends when what it waits for arrived
UNIT = "support-bot"
RETRIEVAL = "retrieval search"
CARRIER = "ragpulse.evaluation"
METRICS = ("groundedness", "context_relevance", "context_precision", "context_utilisation")
QUESTION = "When is support open on weekdays?"
CONTEXTS = [
    ("router", "The Larkspur L2 router costs $129 and was released in March 2024."),
    ("hours", "Support is open from 9am to 5pm on weekdays."),
]
ANSWER = "Support is open from 9am to 5pm on weekdays."


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": doc_id, "content": text} for doc_id, text in CONTEXTS]


@ragpulse.rag(name=UNIT)
def handle(question: str) -> str:
    search(question)
    return ANSWER


class GatedJudge:
    """The offline judge, answering only once ``gate`` opens."""

    name = "gated"
    annotator_kind = "CODE"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self._inner = LexicalJudge()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        self.started.set()
        deadline = time.monotonic() + WAIT
        while not self.gate.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return await self._inner.evaluate(record, metrics)


class FailingJudge:
    """A judge whose every evaluation fails (status ``error``)."""

    name = "failing"
    annotator_kind = "LLM"

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        return Evaluation.failed("server_error", judge=self.name, annotator_kind="LLM")


@pytest.fixture
def gated() -> Iterator[GatedJudge]:
    judge = GatedJudge()
    yield judge
    judge.gate.set()


def pipeline(
    route_spans: Any, sink: RotelSink, judge: Any, **options: Any
) -> EvaluatingSpanProcessor:
    exporter = OTLPSpanExporter(endpoint=sink.http_traces_endpoint, timeout=30)
    processor = EvaluatingSpanProcessor(
        BatchSpanProcessor(exporter, schedule_delay_millis=50),
        judge=judge,
        sampler=EvalSampler(rate=1.0),
        metrics=METRICS,
        **options,
    )
    route_spans(processor)
    return processor


def eval_keys(span: ReceivedSpan) -> set[str]:
    return {key for key in span.attributes if key.startswith(semconv.EVAL_PREFIX)}


def arrived(sink: RotelSink, *names: str) -> dict[str, ReceivedSpan]:
    spans = sink.wait_for_spans(lambda got: set(names) <= {s.name for s in got}, timeout=WAIT)
    ids = [s.span_id for s in spans]
    assert len(ids) == len(set(ids)), "a span arrived twice"
    return {s.name: s for s in spans}


@pytest.mark.parametrize(
    "judge",
    [LexicalJudge(), ResilientJudge(LexicalJudge(), isolate_cpu_bound=False)],
    ids=["judge-process", "worker-thread"],
)
def test_retrieval_span_arrives_with_the_document_scores_its_unit_lists(
    route_spans: Any, rotel_sink: RotelSink, judge: Any
) -> None:
    pipeline(route_spans, rotel_sink, judge)
    handle(QUESTION)
    spans = arrived(rotel_sink, UNIT, RETRIEVAL)
    unit, retrieval = spans[UNIT], spans[RETRIEVAL]
    assert unit.attributes[semconv.EVAL_STATUS] == EvalStatus.OK
    listed = json.loads(unit.attributes[semconv.EVAL_CONTEXTS])
    assert documents_of(retrieval.attributes) == {
        row["index"]: {"score": row["relevance"], "relevant": row["relevant"], "used": row["used"]}
        for row in listed
    }
    assert documents_of(retrieval.attributes)[1]["used"] is True
    # Numbers and flags only: no passage text rides along.
    assert not any(
        isinstance(value, str) for value in documents_of(retrieval.attributes)[0].values()
    )


def test_retrieval_span_of_a_failed_evaluation_arrives_unchanged(
    route_spans: Any, rotel_sink: RotelSink
) -> None:
    pipeline(route_spans, rotel_sink, FailingJudge())
    handle(QUESTION)
    spans = arrived(rotel_sink, UNIT, RETRIEVAL)
    assert spans[UNIT].attributes[semconv.EVAL_STATUS] == EvalStatus.ERROR
    assert eval_keys(spans[RETRIEVAL]) == set()


def test_retrieval_span_past_the_hold_timeout_arrives_unchanged_and_the_scores_follow_on_a_carrier(
    route_spans: Any, rotel_sink: RotelSink, gated: GatedJudge
) -> None:
    pipeline(route_spans, rotel_sink, gated, bounds=BoundsOptions(hold_timeout=1.0))
    handle(QUESTION)
    assert gated.started.wait(WAIT)
    spans = arrived(rotel_sink, UNIT, RETRIEVAL)  # while the judge still holds on
    assert spans[UNIT].attributes[semconv.EVAL_STATUS] == EvalStatus.PENDING
    assert eval_keys(spans[RETRIEVAL]) == set()
    gated.gate.set()
    carrier = arrived(rotel_sink, CARRIER)[CARRIER]
    assert semconv.EVAL_CONTEXTS in carrier.attributes


def test_no_retrieval_span_is_lost_when_the_processor_shuts_down_mid_evaluation(
    route_spans: Any, rotel_sink: RotelSink, gated: GatedJudge
) -> None:
    processor = pipeline(route_spans, rotel_sink, gated, bounds=BoundsOptions(shutdown_timeout=1.0))
    handle(QUESTION)
    assert gated.started.wait(WAIT)
    processor.shutdown()
    spans = arrived(rotel_sink, UNIT, RETRIEVAL)
    assert spans[UNIT].attributes[semconv.EVAL_STATUS] == EvalStatus.PENDING
    assert eval_keys(spans[RETRIEVAL]) == set()
