"""How long reading an agent's trace takes, and what it holds, at the sizes of the bad-input
tests: 10,000 tool calls in one trace, a history of 1,000 turns.

Each case is timed against a baseline read in the same process: one retrieval span holding
as many documents (the same texts), the shape ragpulse read before agents. Memory is the
peak ``tracemalloc`` sees while reading. The processor case sends the 10,000 tool spans and
their root through ``EvaluatingSpanProcessor.on_end`` (the trace buffer keeps 256 and the
unit is skipped ``too_large``), against as many spans that no adapter reads.

    .venv/bin/python bench/agent_traces.py
"""

from __future__ import annotations

import itertools
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse.adapters import read_trace
from ragpulse.judges.lexical import LexicalJudge
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.sampling import EvalSampler
from ragpulse.settings.options import JudgeOptions

CALLS = 10_000
TURNS = 1_000
_ids = itertools.count(1)


def _span(name: str, attributes: dict[str, Any], trace_id: int, root: bool = False) -> ReadableSpan:
    parent = None if root else SpanContext(trace_id, 1, False, TraceFlags(1))
    span_id = 1 if root else next(_ids) + 1
    start = next(_ids) * 1000
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, False, TraceFlags(1)),
        parent=parent,
        attributes=attributes,
        start_time=start,
        end_time=start + 500,
    )


def _answer(trace_id: int) -> ReadableSpan:
    return _span(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "What warranty does the X200 have?",
            "llm.output_messages.0.message.content": "A 2-year limited warranty.",
        },
        trace_id,
    )


def tool_trace(trace_id: int) -> tuple[ReadableSpan, list[ReadableSpan]]:
    parts = [
        _span(
            "execute_tool search_docs",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_docs",
                "gen_ai.tool.call.id": f"call_{i}",
                "gen_ai.tool.call.result": f"Fact {i}: the X200 has a 2-year limited warranty.",
            },
            trace_id,
        )
        for i in range(CALLS)
    ]
    return _span("agent", {}, trace_id, root=True), [*parts, _answer(trace_id)]


def retrieval_trace(trace_id: int) -> tuple[ReadableSpan, list[ReadableSpan]]:
    documents = [
        {"id": f"d{i}", "content": f"Fact {i}: the X200 has a 2-year limited warranty."}
        for i in range(CALLS)
    ]
    retrieval = _span(
        "retrieval",
        {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps(documents)},
        trace_id,
    )
    return _span("rag", {}, trace_id, root=True), [retrieval, _answer(trace_id)]


def history_trace(trace_id: int) -> tuple[ReadableSpan, list[ReadableSpan]]:
    messages: list[dict[str, Any]] = []
    for turn in range(TURNS):
        messages += [
            {"role": "user", "parts": [{"type": "text", "content": f"Question {turn}?"}]},
            {"role": "assistant", "parts": [{"type": "tool_call", "id": f"c{turn}", "name": "s"}]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": f"c{turn}",
                                        "response": f"Fact {turn}. " * 20}]},
            {"role": "assistant", "parts": [{"type": "text", "content": f"Answer {turn}."}]},
        ]  # fmt: skip
    messages.append({"role": "user", "parts": [{"type": "text", "content": "And the next?"}]})
    chat = _span(
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Fact 999."}]}]
            ),
        },
        trace_id,
    )
    return _span("agent", {}, trace_id, root=True), [chat]


def measure(read: Callable[[], object], repeat: int = 3) -> tuple[float, float]:
    """Best wall time (ms) of ``repeat`` reads, and the peak MiB of one read."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        read()
        best = min(best, time.perf_counter() - started)
    tracemalloc.start()
    read()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best * 1000.0, peak / (1024 * 1024)


class _Drop(SpanProcessor):
    def __init__(self) -> None:
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.count += 1


def processor_on_end(spans: list[ReadableSpan]) -> tuple[float, int]:
    downstream = _Drop()
    processor = EvaluatingSpanProcessor(
        downstream,
        judge=LexicalJudge(),
        sampler=EvalSampler(rate=1.0),
        judging=JudgeOptions(concurrency=1),
    )
    started = time.perf_counter()
    for span in spans:
        processor.on_end(span)
    elapsed = time.perf_counter() - started
    processor.force_flush(60_000)
    processor.shutdown()
    return elapsed * 1000.0, downstream.count


def main() -> None:
    tools_root, tools = tool_trace(0xA1)
    rag_root, rag = retrieval_trace(0xA2)
    history_root, history = history_trace(0xA3)
    tool_ms, tool_mib = measure(lambda: read_trace(tools_root, tools))
    rag_ms, rag_mib = measure(lambda: read_trace(rag_root, rag))
    history_ms, history_mib = measure(lambda: read_trace(history_root, history))
    reading = read_trace(tools_root, tools)
    assert reading.record is not None
    plain = [_span("db", {"db.system": "postgresql"}, 0xA4) for _ in range(CALLS)] + [
        _span("agent", {}, 0xA4, root=True)
    ]
    agent_spans = [*tools, tools_root]
    agent_ms, forwarded = processor_on_end(agent_spans)
    plain_ms, _ = processor_on_end(plain)
    print(f"{'case':44} {'ms':>9} {'peak MiB':>9}")
    print(f"{'read 10,000 tool spans (one trace)':44} {tool_ms:9.1f} {tool_mib:9.1f}")
    print(f"{'read 1 retrieval span of 10,000 documents':44} {rag_ms:9.1f} {rag_mib:9.1f}")
    print(f"{'read a 1,000-turn history':44} {history_ms:9.1f} {history_mib:9.1f}")
    print(f"{'on_end 10,001 agent spans (buffer bound)':44} {agent_ms:9.1f}")
    print(f"{'on_end 10,001 spans no adapter reads':44} {plain_ms:9.1f}")
    print(f"contexts of the tool trace: {len(reading.record.contexts)}; spans forwarded: "
          f"{forwarded} of {len(agent_spans)}")  # fmt: skip
    print(
        f"RESULT tool_trace_ms={tool_ms:.1f} tool_trace_peak_mib={tool_mib:.1f} "
        f"tool_vs_documents={tool_ms / rag_ms:.2f} history_ms={history_ms:.1f} "
        f"history_peak_mib={history_mib:.1f} on_end_agent_vs_plain={agent_ms / plain_ms:.2f} "
        f"forwarded={forwarded} sent={len(agent_spans)}"
    )


if __name__ == "__main__":
    main()
