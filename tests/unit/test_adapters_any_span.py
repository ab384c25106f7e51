"""The adapters read any span: no attribute or event value makes them fail.

``read_trace`` runs on the request's thread for every trace an instrumentation wrote, and
what an instrumentation writes is not ours to choose. Spans are built from a seeded random
mix of the keys the OpenInference, GenAI and OpenLLMetry readers look for, with values of
every shape a span can hold: the wrong type (ints past a float's range or Python's int
digits, nan, bools, bytes, lists, tuples of mixed types, key-value lists as OTLP sends
them), JSON that is malformed or nested far past the recursion limit, list indexes that are
not ASCII digits, odd Unicode, spans without a context, duplicated spans and events with
odd attributes. Each trace must be read without the last guard of ``read_trace`` catching
anything: what cannot be read is skipped and counted where it is read. The seeds are fixed,
so a failure names a trace that can be replayed.
"""

from __future__ import annotations

import json
import random
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse.adapters import (
    detect_convention,
    is_buffered,
    is_retrieval,
    read_trace,
    span_facts,
)

TRACES = 1500
# One resource for all: a span built without one makes its own, with the SDK's detectors.
_RESOURCE = Resource({"service.name": "shop"})
_TEXTS = (
    "", " ", "\n", "The Eiffel Tower opened to the public on 31 March 1889.", "When did it open?",
    "\ud800", "a\x00b", "İ", "ﬁ", "²", "١", "🙂", "\u200b", "nan", "inf", "1e999", "null", "true",
    "{", "[", "]", '"', "{'text': 'a passage kept as a Python literal'}", "x" * 3000,
)  # fmt: skip
_NUMBERS = (0, -1, 2**63, 10**400, 10**5000, 0.5, float("nan"), float("inf"), -0.0, True, False)
_JSON_KEYS = (
    "role", "content", "parts", "type", "text", "messages", "choices", "message", "kwargs",
    "data", "id", "score", "document", "page_content", "answer", "question", "input", "inputs",
    "outputs", "output", "args", "result",
)  # fmt: skip
_DEEP = (
    "[" * 10_000,
    '{"kwargs":' * 5_000,
    '[{"role": "user", "content": ' + '{"kwargs": ' * 900 + '"q"' + "}" * 900 + "}]",
    '[{"content": "a passage", "score": 1' + "0" * 400 + "}]",
)
_INDEXES = ("0", "1", "3", "01", "²", "١", "-1", "x", "", "9" * 5000)
_KINDS = {
    "openinference.span.kind": ("RETRIEVER", "LLM", "CHAIN"),
    "input.mime_type": ("application/json", "text/plain"),
    "output.mime_type": ("application/json",),
    "gen_ai.operation.name": ("retrieval", "chat", "text_completion"),
    "llm.request.type": ("chat", "completion"),
    "traceloop.span.kind": ("workflow",),
    "ragpulse.eval.unit": (True,),
}
_EVENTS = (
    "db.query.result",
    "gen_ai.client.inference.operation.details",
    "gen_ai.content.prompt",
    "gen_ai.content.completion",
    "exception",
)
_EVENT_KEYS = (
    "db.query.result.document", "db.query.result.id", "db.query.result.score",
    "db.query.result.metadata", "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.prompt", "gen_ai.completion",
)  # fmt: skip


def _key(rng: random.Random) -> str:
    i, m = rng.choice(_INDEXES), rng.choice(_INDEXES)
    return rng.choice(
        (
            *_KINDS,
            "input.value", "output.value", "gen_ai.retrieval.documents",
            "gen_ai.retrieval.query.text", "gen_ai.input.messages", "gen_ai.output.messages",
            "traceloop.entity.input", "traceloop.entity.output", "db.query.text",
            "ragpulse.input.question", "ragpulse.output.answer", "ragpulse.contexts.unreadable",
            f"retrieval.documents.{i}.document.content", f"retrieval.documents.{i}.document.id",
            f"retrieval.documents.{i}.document.score", f"llm.input_messages.{i}.message.role",
            f"llm.input_messages.{i}.message.content",
            f"llm.input_messages.{i}.message.contents.{m}.message_content.text",
            f"llm.output_messages.{i}.message.content", f"gen_ai.prompt.{i}.content",
            f"gen_ai.prompt.{i}.role", f"gen_ai.completion.{i}.content",
        )
    )  # fmt: skip


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    if depth > 4 or rng.random() < 0.35:
        return rng.choice((rng.choice(_TEXTS), 3, 1.5, None, True, "user", "assistant", 10**30))
    if rng.random() < 0.6:
        return {
            rng.choice(_JSON_KEYS): _json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))
        }
    return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def _json(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return rng.choice(_DEEP)
    text = json.dumps(_json_value(rng), ensure_ascii=rng.random() < 0.5)
    return text[: rng.randint(0, len(text))] if rng.random() < 0.2 else text


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.3:
        return _json(rng)
    if roll < 0.5:
        return "".join(rng.choice(_TEXTS) for _ in range(rng.randint(0, 3)))
    if roll < 0.65:
        return rng.choice(_NUMBERS)
    if roll < 0.72:
        return rng.choice((b"", b"\xff\xfe", b"[1]", None))
    if depth < 2 and roll < 0.85:
        return tuple(_value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    if depth < 2 and roll < 0.92:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(_JSON_KEYS): _value(rng, depth + 1) for _ in range(rng.randint(0, 2))}


def _span(
    rng: random.Random, trace_id: int, span_id: int, parent: SpanContext | None
) -> ReadableSpan:
    attributes: dict[str, Any] = {}
    for _ in range(rng.randint(0, 10)):
        key = _key(rng)
        attributes[key] = (
            rng.choice(_KINDS[key]) if key in _KINDS and rng.random() < 0.7 else _value(rng)
        )
    events = [
        Event(
            rng.choice(_EVENTS),
            {rng.choice(_EVENT_KEYS): _value(rng) for _ in range(rng.randint(0, 4))},
        )
        for _ in range(rng.choice((0, 0, 1, 3)))
    ]
    context = SpanContext(trace_id, span_id, False, TraceFlags(1)) if rng.random() > 0.03 else None
    start = rng.choice((None, 0, rng.randint(1, 10**9)))
    return ReadableSpan(
        name=rng.choice(("root", "retrieve", "chat")),
        context=context,
        parent=parent,
        resource=_RESOURCE,
        attributes=attributes,
        events=events,
        start_time=start,
        end_time=start,
    )


def _trace(seed: int) -> list[ReadableSpan]:
    rng = random.Random(seed)
    trace_id = rng.randint(1, 2**128 - 1)
    root = _span(rng, trace_id, 1, None)
    parent = SpanContext(trace_id, 1, False, TraceFlags(1))
    parts = [_span(rng, trace_id, 2 + i, parent) for i in range(rng.randint(0, 4))]
    if parts and rng.random() < 0.1:
        parts.append(parts[0])
    return [root, *parts]


def test_no_span_makes_an_adapter_fail() -> None:
    failed = []
    for seed in range(TRACES):
        root, *parts = _trace(seed)
        for span in (root, *parts):
            detect_convention(span)
            is_buffered(span)
            is_retrieval(span)
            span_facts(span)
            span_facts(span, unit=True)
        reading = read_trace(root, parts)
        unreadable = [issue for issue in reading.issues if issue.startswith("unreadable trace")]
        if unreadable:
            failed.append((seed, unreadable[0]))
        elif reading.record is not None:
            assert all(context.text.strip() for context in reading.record.contexts), seed
    assert not failed, f"{len(failed)} of {TRACES} traces failed; first: {failed[:3]}"
