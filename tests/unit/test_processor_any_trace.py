"""``EvaluatingSpanProcessor.on_end`` takes any span: it never raises and forwards every one.

The processor sits in the application's span pipeline, so a span it cannot make sense of
must still reach the exporter, once, and cost the request nothing. Traces are built from a
seeded random mix of what OpenInference, GenAI and OpenLLMetry instrumentations write (a
root, retrieval and LLM spans, flattened documents and messages, result events), each with
a few values replaced by a shape no instrumentation should write: the wrong type, numbers
past a float's range, malformed or deeply nested JSON, odd list indexes, odd Unicode, a
missing context, the same span ended twice. They go through a processor evaluating every
trace with the offline judge. No ``on_end`` may raise or log an internal error, and every
span must be forwarded exactly once (a unit with its scores, or pending with a carrier span
after it). The seeds are fixed, so a failure names a trace that can be replayed.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging.resilient import ResilientJudge
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler

TRACES = 1000
WAIT = 60.0  # upper bound of the final flush: slowness only sends units on pending
CARRIER = "ragpulse.evaluation"
_RESOURCE = Resource({"service.name": "shop"})
_QUESTIONS = ("When did the Eiffel Tower open?", "What are the support hours?")
_PASSAGES = (
    "The Eiffel Tower opened to the public on 31 March 1889.",
    "It was built for the 1889 World's Fair in Paris.",
    "Support is open from 9am to 5pm on weekdays.",
)
_ODD = (
    "", " ", "\ud800", "²", "١", "İ", "🙂", "nan", "1e999", "{", "[", "[" * 10_000,
    '{"kwargs":' * 2_000, '[{"content": "c", "score": 1' + "0" * 400 + "}]", '[{"role": 5}]',
    0, -1, 10**400, 10**5000, float("nan"), float("inf"), True, b"\xff", None, ("a", 1, None),
    ["chat"], {"name": "chat"}, ("chat", {"n": 1}),
)  # fmt: skip
_ODD_KEYS = (
    "retrieval.documents.².document.content", "retrieval.documents.1.document.content",
    "retrieval.documents.0.document.score", "retrieval.documents.0.document.id",
    "llm.input_messages.١.message.content", "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content", "gen_ai.operation.name", "llm.request.type",
    "openinference.span.kind", "input.value", "output.value", "input.mime_type",
    "gen_ai.retrieval.documents", "gen_ai.input.messages", "gen_ai.output.messages",
    "traceloop.entity.input", "traceloop.entity.output", "ragpulse.eval.unit",
)  # fmt: skip


class Recording(SpanProcessor):
    """A downstream that keeps what it is given, in order."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _retrieval(rng: random.Random, question: str) -> tuple[dict[str, Any], list[Event]]:
    documents = rng.sample(_PASSAGES, rng.randint(1, 3))
    convention = rng.choice(("openinference", "genai", "openllmetry"))
    if convention == "openinference":
        attributes: dict[str, Any] = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": question,
        }
        for i, text in enumerate(documents):
            attributes[f"retrieval.documents.{i}.document.content"] = text
            attributes[f"retrieval.documents.{i}.document.id"] = f"d{i}"
        return attributes, []
    if convention == "genai":
        listed = [{"id": i, "score": 0.5, "content": text} for i, text in enumerate(documents)]
        return {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": question,
            "gen_ai.retrieval.documents": json.dumps(listed),
        }, []
    events = [
        Event("db.query.result", {"db.query.result.document": text, "db.query.result.id": i})
        for i, text in enumerate(documents)
    ]
    return {"db.system": "chroma"}, events


def _llm(rng: random.Random, question: str) -> dict[str, Any]:
    answer = rng.choice(_PASSAGES)
    convention = rng.choice(("openinference", "genai", "openllmetry"))
    if convention == "openinference":
        return {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": question,
            "llm.output_messages.0.message.content": answer,
        }
    if convention == "genai":
        return {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": question}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": answer}]),
        }
    return {
        "llm.request.type": "chat",
        "gen_ai.prompt.0.content": question,
        "gen_ai.completion.0.content": answer,
    }


def _odd(rng: random.Random, attributes: dict[str, Any]) -> dict[str, Any]:
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        if attributes and rng.random() < 0.5:
            attributes[rng.choice(list(attributes))] = rng.choice(_ODD)
        else:
            attributes[rng.choice(_ODD_KEYS)] = rng.choice(_ODD)
    return attributes


def _span(
    rng: random.Random,
    context: SpanContext | None,
    parent: SpanContext | None,
    attributes: dict[str, Any],
    events: list[Event],
) -> ReadableSpan:
    if rng.random() < 0.1:
        events = [*events, Event(rng.choice(("db.query.result", "gen_ai.content.prompt")), {})]
    start = rng.randint(0, 10**6)
    return ReadableSpan(
        name="span",
        context=context,
        parent=parent,
        resource=_RESOURCE,
        attributes=_odd(rng, attributes),
        events=events,
        start_time=start,
        end_time=start + 1000,
    )


def _trace(seed: int) -> list[ReadableSpan]:
    """The spans of one trace in the order they end: the parts, then the root."""
    rng = random.Random(seed)
    trace_id = rng.randint(1, 2**128 - 1)
    question = rng.choice(_QUESTIONS)
    root_context = SpanContext(trace_id, 1, False, TraceFlags(1))
    root = rng.choice(
        (
            {},
            {"openinference.span.kind": "CHAIN", "input.value": question},
            {"traceloop.span.kind": "workflow", "traceloop.entity.input": question},
        )
    )
    parts = []
    for span_id in range(2, 2 + rng.randint(1, 4)):
        context = SpanContext(trace_id, span_id, False, TraceFlags(1))
        if rng.random() < 0.03:
            context = None  # type: ignore[assignment]
        if rng.random() < 0.5:
            attributes, events = _retrieval(rng, question)
        else:
            attributes, events = _llm(rng, question), []
        parts.append(_span(rng, context, root_context, attributes, events))
    if rng.random() < 0.05:
        parts.append(parts[0])
    return [*parts, _span(rng, root_context, None, root, [])]


def _key(span: ReadableSpan) -> tuple[int, int] | int:
    context = span.context
    return (context.trace_id, context.span_id) if context is not None else id(span)


@pytest.fixture
def judge() -> Iterator[ResilientJudge]:
    judge = ResilientJudge(LexicalJudge(), isolate_cpu_bound=False)
    yield judge
    judge.close()


def test_no_trace_makes_on_end_raise_or_lose_a_span(
    judge: ResilientJudge, caplog: pytest.LogCaptureFixture
) -> None:
    downstream = Recording()
    processor = EvaluatingSpanProcessor(downstream, judge=judge, sampler=EvalSampler(rate=1.0))
    ended: list[ReadableSpan] = []
    failed = []
    with caplog.at_level(logging.ERROR, logger="ragpulse"):
        for seed in range(TRACES):
            for span in _trace(seed):
                ended.append(span)
                try:
                    processor.on_end(span)
                except Exception as exc:
                    failed.append((seed, repr(exc)))
        processor.force_flush(int(WAIT * 1000))
        processor.shutdown()

    assert not failed, f"on_end raised for {len(failed)} spans; first: {failed[:3]}"
    assert not [record.getMessage() for record in caplog.records if record.exc_info]
    forwarded = Counter(_key(span) for span in downstream.spans if span.name != CARRIER)
    assert forwarded == Counter(_key(span) for span in ended)
