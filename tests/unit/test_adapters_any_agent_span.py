"""The adapters read any agent span: tool spans, tool messages and tool calls of every shape.

As ``test_adapters_any_span.py``, with the keys the agent readers look for: OpenInference
TOOL spans and ``tool_call_id`` messages, GenAI ``execute_tool`` spans and
``tool_call_response`` parts, MCP ``tools/call``, OpenLLMetry's ``gen_ai.prompt.N.tool_*``,
finish reasons and the ``ragpulse.tool.evidence`` mark, with values of every shape, error
statuses and spans without times. Message lists carry assistant answers followed by user
turns, so a trace may hold several final answers. Each seeded trace is read without the
last guard of ``read_trace`` catching anything, every record it gives is bounded and
targets a span of its own in the trace, and the evaluating processor forwards every one of
its spans.
"""

from __future__ import annotations

import json
import random
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags
from tests.unit.test_adapters_any_span import _RESOURCE, _TEXTS, _json, _value
from tests.unit.test_processor_any_trace import Recording

from ragpulse.adapters import is_buffered, is_evidence_span, read_trace, span_facts
from ragpulse.adapters._agent import MAX_HISTORY_CHARS
from ragpulse.adapters._tools import MAX_RESULT_CHARS
from ragpulse.judges.lexical import LexicalJudge
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.sampling import EvalSampler
from ragpulse.settings.options import BoundsOptions

TRACES = 1000
_INDEXES = ("0", "1", "2", "01", "²", "x", "9" * 40)
_KINDS: dict[str, tuple[Any, ...]] = {
    "openinference.span.kind": ("TOOL", "LLM", "AGENT", "RETRIEVER"),
    "gen_ai.operation.name": ("execute_tool", "chat", "invoke_agent"),
    "mcp.method.name": ("tools/call", "tools/list"),
    "traceloop.span.kind": ("tool", "workflow"),
    "gen_ai.response.finish_reasons": (("tool_calls",), ("stop",), ("tool_call", 3)),
    "ragpulse.tool.evidence": (False, True, "no"),
}
_ANSWERS = ("a fact", "The Eiffel Tower opened to the public on 31 March 1889.", "", "x" * 3000)
"""An assistant's earlier answers in a history: some are other calls' outputs."""
_RESULTS = (
    '{"isError": true}', '{"content": [{"type": "text", "text": "a fact"}], "isError": false}',
    '{"error": "down"}', "[]", "{}", "null", '""', '[{"content": "a fact"}, 3]', "a fact",
    "x" * (MAX_RESULT_CHARS + 5),
)  # fmt: skip


def _key(rng: random.Random) -> str:
    i, m = rng.choice(_INDEXES), rng.choice(_INDEXES)
    return rng.choice(
        (
            *_KINDS,
            "tool.name", "tool_call.id", "output.value", "input.value", "gen_ai.tool.name",
            "gen_ai.tool.call.id", "gen_ai.tool.call.result", "jsonrpc.request.id", "error.type",
            "traceloop.entity.name", "traceloop.entity.output", "gen_ai.input.messages",
            "gen_ai.output.messages", "gen_ai.tool.definitions", "gen_ai.conversation.id",
            "session.id", f"llm.tools.{i}.tool.json_schema",
            f"llm.input_messages.{i}.message.role", f"llm.input_messages.{i}.message.content",
            f"llm.input_messages.{i}.message.tool_call_id", f"llm.input_messages.{i}.message.name",
            f"llm.input_messages.{i}.message.tool_calls.{m}.tool_call.id",
            f"llm.input_messages.{i}.message.tool_calls.{m}.tool_call.function.name",
            f"llm.output_messages.{i}.message.content",
            f"llm.output_messages.{i}.message.tool_calls.{m}.tool_call.id",
            f"gen_ai.prompt.{i}.role", f"gen_ai.prompt.{i}.content",
            f"gen_ai.prompt.{i}.tool_call_id", f"gen_ai.prompt.{i}.tool_calls.{m}.name",
            f"gen_ai.completion.{i}.content", f"gen_ai.completion.{i}.finish_reason",
        )
    )  # fmt: skip


def _messages(rng: random.Random) -> str:
    """A message list with tool calls and responses, sometimes malformed."""
    messages: list[Any] = []
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.3:
            messages.append(
                {"role": "user", "parts": [{"type": "text", "content": rng.choice(_TEXTS)}]}
            )
        elif roll < 0.5:
            messages.append(
                {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": rng.choice(("c1", 3, None)),
                            "name": rng.choice(("s", None)),
                        }
                    ],
                }
            )
        elif roll < 0.75:
            messages.append(
                {
                    "role": "tool",
                    "parts": [
                        {
                            "type": "tool_call_response",
                            "id": rng.choice(("c1", "ghost", [1])),
                            "response": rng.choice((*_RESULTS, 5, None, ["a", 1])),
                        }
                    ],
                }
            )
        elif roll < 0.85:
            messages.append(
                {"role": "assistant", "parts": [{"type": "text", "content": rng.choice(_ANSWERS)}]}
            )
        elif roll < 0.92:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": rng.choice(("c1", None)),
                    "content": rng.choice(_RESULTS),
                }
            )
        else:
            messages.append(rng.choice((None, 3, "text", [], {"parts": 7})))
    text = json.dumps(messages)
    return text[: rng.randint(0, len(text))] if rng.random() < 0.1 else text  # fmt: skip


def _span(
    rng: random.Random, trace_id: int, span_id: int, parent: SpanContext | None
) -> ReadableSpan:
    attributes: dict[str, Any] = {}
    for _ in range(rng.randint(0, 12)):
        key = _key(rng)
        if key in _KINDS and rng.random() < 0.8:
            attributes[key] = rng.choice(_KINDS[key])
        elif key in ("gen_ai.input.messages", "gen_ai.output.messages") and rng.random() < 0.7:
            attributes[key] = _messages(rng)
        elif key.endswith(("result", "output.value", "message.content")) and rng.random() < 0.6:
            attributes[key] = rng.choice(_RESULTS)
        else:
            attributes[key] = _value(rng) if rng.random() < 0.5 else _json(rng)
    context = SpanContext(trace_id, span_id, False, TraceFlags(1)) if rng.random() > 0.03 else None
    start = rng.choice((None, 0, rng.randint(1, 10**9)))
    end = None if start is None else start + rng.choice((0, 10, 10**6))
    return ReadableSpan(
        name=rng.choice(("agent", "execute_tool search", "chat")),
        context=context,
        parent=parent,
        resource=_RESOURCE,
        attributes=attributes,
        status=Status(rng.choice((StatusCode.UNSET, StatusCode.ERROR, StatusCode.OK))),
        start_time=start,
        end_time=end,
    )


def _conversation(
    rng: random.Random, trace_id: int, first_id: int, parent: SpanContext
) -> list[ReadableSpan]:
    """Chat calls of several user turns under one root, each given the history so far
    (sometimes without the earlier answer, or with a bad message), answering from
    ``_ANSWERS``; times random, sometimes missing."""
    history: list[Any] = []
    calls = []
    for turn in range(rng.randint(2, 4)):
        history.append({"role": "user", "parts": [{"type": "text", "content": f"q{turn}"}]})
        if rng.random() < 0.3:
            history.append(rng.choice((None, {"role": "tool", "parts": 3}, "text")))
        answer = rng.choice(_ANSWERS)
        output = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(history),
            "gen_ai.output.messages": json.dumps(output),
        }
        start = rng.choice((None, 0, 10 * turn, rng.randint(1, 10**9)))
        calls.append(
            ReadableSpan(
                name="chat",
                context=SpanContext(trace_id, first_id + turn, False, TraceFlags(1))
                if rng.random() > 0.05
                else None,
                parent=parent,
                resource=_RESOURCE,
                attributes=attributes,
                start_time=start,
                end_time=None if start is None else start + rng.choice((0, 5)),
            )
        )
        if rng.random() < 0.8:
            history.append(output[0])
    return calls


def _trace(seed: int) -> list[ReadableSpan]:
    rng = random.Random(seed)
    trace_id = rng.randint(1, 2**128 - 1)
    root = _span(rng, trace_id, 1, None)
    parent = SpanContext(trace_id, 1, False, TraceFlags(1))
    parts = [_span(rng, trace_id, 2 + i, parent) for i in range(rng.randint(0, 6))]
    if rng.random() < 0.3:
        parts += _conversation(rng, trace_id, 2 + len(parts), parent)
    return [root, *parts]


def test_no_agent_span_makes_an_adapter_fail() -> None:
    failed = []
    several = 0
    for seed in range(TRACES):
        root, *parts = _trace(seed)
        for span in (root, *parts):
            is_buffered(span)
            is_evidence_span(span)
            span_facts(span)
            span_facts(span, unit=True)
        reading = read_trace(root, parts)
        unreadable = [issue for issue in reading.issues if issue.startswith("unreadable trace")]
        if unreadable:
            failed.append((seed, unreadable[0]))
            continue
        if reading.record is not None:
            assert reading.records[-1] is reading.record, seed
        targets = [record.span_context.span_id for record in reading.records if record.span_context]
        # Only the root's record may lack a span context (the root lacks one).
        assert len(targets) == len(set(targets)) >= len(reading.records) - 1, seed
        spans = {span.context.span_id for span in (root, *parts) if span.context is not None}
        assert set(targets) <= spans, seed
        several += len(reading.records) > 1
        for record in reading.records:
            for context in record.contexts:
                assert context.text.strip(), seed
                assert len(context.text) <= max(MAX_RESULT_CHARS, MAX_HISTORY_CHARS), seed
    assert several, "no seeded trace held more than one final answer"
    assert not failed, f"{len(failed)} of {TRACES} traces failed; first: {failed[:3]}"


def test_the_processor_forwards_every_span_of_any_agent_trace() -> None:
    downstream = Recording()
    processor = EvaluatingSpanProcessor(
        downstream,
        judge=LexicalJudge(),
        sampler=EvalSampler(rate=1.0),
        bounds=BoundsOptions(hold_timeout=30.0),
    )
    sent: list[ReadableSpan] = []
    try:
        for seed in range(200):
            root, *parts = _trace(seed)
            for span in (*parts, root):
                processor.on_end(span)
                sent.append(span)
        assert processor.force_flush(60_000)
    finally:
        processor.shutdown()
    # Each once, the scored ones rebuilt with the same ids.
    assert len(downstream.spans) == len(sent)
    assert sorted(_keys(downstream.spans)) == sorted(_keys(sent))


def _keys(spans: list[ReadableSpan]) -> list[tuple[int, int]]:
    return [(s.context.trace_id, s.context.span_id) for s in spans if s.context is not None]
