"""Per-call overhead of @rag + @retrieval + @generation against hand-written tracing.

Both variants create the same three spans with the same attributes (5 passages of
500 characters, GenAI documents JSON, output messages) on one SDK TracerProvider
with a BatchSpanProcessor and a discarding exporter; evaluation is off. Runs are
interleaved in one process so machine noise hits both alike; the ratio is what counts.

    python bench/overhead.py [--calls 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from rich.console import Console
from rich.table import Table

import ragpulse
from ragpulse import semconv


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(Discard(), max_queue_size=100_000))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("hand-written")

PASSAGES = [(f"passage {i} " + "lorem ipsum dolor sit amet " * 20)[:500] for i in range(5)]
ANSWER = "The answer, composed from the passages. " * 3


# --- ragpulse --------------------------------------------------------------------------
@ragpulse.retrieval
def search(query: str) -> list[str]:
    return PASSAGES


@ragpulse.generation(model="bench-model")
def write(question: str, docs: list[str]) -> str:
    return ANSWER


@ragpulse.rag(name="bench")
def handle(question: str) -> str:
    return write(question, search(question))


# --- the same spans by hand --------------------------------------------------------------
def handwritten(question: str) -> str:
    with tracer.start_as_current_span("bench") as root:
        root.set_attribute(semconv.RAG_UNIT, True)
        root.set_attribute(semconv.RAG_NAME, "bench")
        root.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, "CHAIN")
        with tracer.start_as_current_span("retrieval search") as span:
            span.set_attribute(semconv.GEN_AI_OPERATION_NAME, "retrieval")
            span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, "RETRIEVER")
            span.set_attribute(semconv.GEN_AI_RETRIEVAL_QUERY_TEXT, question)
            docs = PASSAGES
            span.set_attribute(
                semconv.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps([{"content": d} for d in docs])
            )
        with tracer.start_as_current_span("chat bench-model") as span:
            span.set_attribute(semconv.GEN_AI_OPERATION_NAME, "chat")
            span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, "LLM")
            span.set_attribute(semconv.GEN_AI_REQUEST_MODEL, "bench-model")
            answer = ANSWER
            message = {"role": "assistant", "parts": [{"type": "text", "content": answer}]}
            span.set_attribute(semconv.GEN_AI_OUTPUT_MESSAGES, json.dumps([message]))
        root.set_attributes(
            {
                semconv.RAG_QUESTION: question,
                semconv.OI_INPUT_VALUE: question,
                semconv.RAG_ANSWER: answer,
                semconv.OI_OUTPUT_VALUE: answer,
                semconv.RAG_CONTEXTS_COUNT: len(docs),
                semconv.RAG_HAS_REFERENCE: False,
            }
        )
        return answer


def per_call_us(fn: Callable[[str], str], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn("What does the passage say?")
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    per_call_us(handle, 2000)
    per_call_us(handwritten, 2000)
    ours: list[float] = []
    base: list[float] = []
    for _ in range(args.rounds):
        base.append(per_call_us(handwritten, args.calls))
        ours.append(per_call_us(handle, args.calls))
        provider.force_flush()
    ratio = statistics.median(o / b for o, b in zip(ours, base, strict=True))
    table = Table(title="Per-call overhead, evaluation off (median of rounds)")
    table.add_column("variant")
    table.add_column("µs per call", justify="right")
    table.add_row("hand-written start_as_current_span", f"{statistics.median(base):.1f}")
    table.add_row("@rag + @retrieval + @generation", f"{statistics.median(ours):.1f}")
    table.add_row("ratio (target ≤ 1.30)", f"{ratio:.2f}")
    Console().print(table)
    provider.shutdown()
    print(
        f"RESULT ratio={ratio:.3f} ragpulse_us={statistics.median(ours):.1f} "
        f"handwritten_us={statistics.median(base):.1f} calls={args.calls} rounds={args.rounds}"
    )


if __name__ == "__main__":
    main()
