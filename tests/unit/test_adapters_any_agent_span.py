"""The adapters read any agent span: tool spans, tool messages and tool calls of every shape.

As ``test_adapters_any_span.py``, with the keys the agent readers look for: OpenInference
TOOL spans and ``tool_call_id`` messages, GenAI ``execute_tool`` spans and
``tool_call_response`` parts, MCP ``tools/call``, OpenLLMetry's ``gen_ai.prompt.N.tool_*``,
finish reasons and the ``ragpulse.tool.evidence`` mark, with values of every shape, error
statuses and spans without times. Each seeded trace is read without the last guard of
``read_trace`` catching anything, the record it gives is bounded, and the evaluating
processor forwards every one of its spans.
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
        elif roll < 0.9:
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


def _trace(seed: int) -> list[ReadableSpan]:
    rng = random.Random(seed)
    trace_id = rng.randint(1, 2**128 - 1)
    root = _span(rng, trace_id, 1, None)
    parent = SpanContext(trace_id, 1, False, TraceFlags(1))
    parts = [_span(rng, trace_id, 2 + i, parent) for i in range(rng.randint(0, 6))]
    return [root, *parts]


def test_no_agent_span_makes_an_adapter_fail() -> None:
    failed = []
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
        elif reading.record is not None:
            for context in reading.record.contexts:
                assert context.text.strip(), seed
                assert len(context.text) <= max(MAX_RESULT_CHARS, MAX_HISTORY_CHARS), seed
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
