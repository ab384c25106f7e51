"""Per-call overhead of @rag + @retrieval + @generation against hand-written tracing.

Both variants create the same three spans with the same attributes (5 passages of
500 characters, the documents and output messages in the chosen conventions, the
question and answer on the unit span) on one SDK TracerProvider with a
BatchSpanProcessor and a discarding exporter; evaluation is off. The two run in
one process as many short batches of ``--batch`` calls, one of each per pair,
the order alternating from pair to pair so neither always runs first; each pair
gives a ratio, and the figure is the median of those ratios with its
interquartile range. Machine noise then hits both variants of a pair alike, and
a burst of it spoils a few pairs, not a round. The calling thread's CPU time per
call is measured beside wall time, as the figure other processes on a shared
machine disturb least. For each convention setting it also prints the bytes of
text captured per request, to show what writing content under both conventions
costs.

    python bench/overhead.py [--calls 20000] [--rounds 7] [--batch 200]
                             [--conventions genai openinference both]

Each variant makes ``calls × rounds`` calls; the exporter is flushed between rounds.
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
from ragpulse.capture import ContentPolicy, set_policy


class Discard(SpanExporter):
    """Drops spans, remembering the text bytes of the last ones for the size column."""

    def __init__(self) -> None:
        self.last: Sequence[ReadableSpan] = ()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.last = spans
        return SpanExportResult.SUCCESS


exporter = Discard()
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=100_000))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("hand-written")

PASSAGES = [(f"passage {i} " + "lorem ipsum dolor sit amet " * 20)[:500] for i in range(5)]
ANSWER = "The answer, composed from the passages. " * 3
QUESTION = "What does the passage say?"
SETTINGS: dict[str, tuple[str, ...]] = {
    "genai": ("genai",),
    "openinference": ("openinference",),
    "both": ("genai", "openinference"),
}


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
def handwritten_for(conventions: tuple[str, ...]) -> Callable[[str], str]:
    """Hand-written OpenTelemetry that sets exactly what ragpulse sets under ``conventions``."""
    genai = "genai" in conventions
    oi = "openinference" in conventions

    def handwritten(question: str) -> str:
        with tracer.start_as_current_span("bench") as root:
            root.set_attribute(semconv.RAG_UNIT, True)
            root.set_attribute(semconv.RAG_NAME, "bench")
            root.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, "CHAIN")
            with tracer.start_as_current_span("retrieval search") as span:
                span.set_attribute(semconv.GEN_AI_OPERATION_NAME, "retrieval")
                span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, "RETRIEVER")
                if genai:
                    span.set_attribute(semconv.GEN_AI_RETRIEVAL_QUERY_TEXT, question)
                if oi:
                    span.set_attribute(semconv.OI_INPUT_VALUE, question)
                docs = PASSAGES
                if genai:
                    span.set_attribute(
                        semconv.GEN_AI_RETRIEVAL_DOCUMENTS,
                        json.dumps([{"content": d} for d in docs]),
                    )
                if oi:
                    for i, d in enumerate(docs):
                        span.set_attribute(f"retrieval.documents.{i}.document.content", d)
            with tracer.start_as_current_span("chat bench-model") as span:
                span.set_attribute(semconv.GEN_AI_OPERATION_NAME, "chat")
                span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, "LLM")
                span.set_attribute(semconv.GEN_AI_REQUEST_MODEL, "bench-model")
                answer = ANSWER
                if genai:
                    message = {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": answer}],
                        "finish_reason": "stop",
                    }
                    span.set_attribute(semconv.GEN_AI_OUTPUT_MESSAGES, json.dumps([message]))
                if oi:
                    span.set_attribute(semconv.OI_LLM_MODEL_NAME, "bench-model")
                    span.set_attribute("llm.output_messages.0.message.role", "assistant")
                    span.set_attribute("llm.output_messages.0.message.content", answer)
            attributes: dict[str, str | int | bool] = {
                semconv.RAG_QUESTION: question,
                semconv.RAG_ANSWER: answer,
                semconv.RAG_CONTEXTS_COUNT: len(docs),
                semconv.RAG_HAS_REFERENCE: False,
            }
            if oi:
                attributes[semconv.OI_INPUT_VALUE] = question
                attributes[semconv.OI_OUTPUT_VALUE] = answer
            root.set_attributes(attributes)
            return answer

    return handwritten


def per_call_us(fn: Callable[[str], str], calls: int) -> tuple[float, float]:
    """Wall-clock and calling-thread CPU microseconds per call.

    The CPU time of the calling thread is what the request pays; unlike wall
    time it does not count other processes on a shared machine, nor the
    exporter's thread.
    """
    start, cpu = time.perf_counter(), time.thread_time()
    for _ in range(calls):
        fn(QUESTION)
    wall = (time.perf_counter() - start) / calls * 1e6
    return wall, (time.thread_time() - cpu) / calls * 1e6


def median_iqr(values: Sequence[float]) -> tuple[float, float, float]:
    """The median of ``values`` and its first and third quartiles."""
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return median, q1, q3


def captured_bytes(fn: Callable[[str], str]) -> int:
    """Bytes of text attributes one request's three spans carry."""
    provider.force_flush()
    fn(QUESTION)
    provider.force_flush()
    return sum(
        len(value.encode())
        for span in exporter.last
        for value in (span.attributes or {}).values()
        if isinstance(value, str)
    )


def measure(setting: str, calls: int, rounds: int, batch: int) -> dict[str, float]:
    conventions = SETTINGS[setting]
    set_policy(ContentPolicy(conventions=conventions))
    handwritten = handwritten_for(conventions)
    per_call_us(handle, calls // 10)
    per_call_us(handwritten, calls // 10)
    provider.force_flush()
    ours: list[tuple[float, float]] = []
    base: list[tuple[float, float]] = []
    pairs = max(calls // batch, 1)
    for _ in range(rounds):
        for _ in range(pairs):
            if len(ours) % 2:  # every other pair runs ragpulse first
                ours.append(per_call_us(handle, batch))
                base.append(per_call_us(handwritten, batch))
            else:
                base.append(per_call_us(handwritten, batch))
                ours.append(per_call_us(handle, batch))
        provider.force_flush()
    ratio = median_iqr([o[0] / b[0] for o, b in zip(ours, base, strict=True)])
    cpu_ratio = median_iqr([o[1] / b[1] for o, b in zip(ours, base, strict=True)])
    return {
        "ratio": ratio[0],
        "cpu_ratio": cpu_ratio[0],
        "cpu_ratio_q1": cpu_ratio[1],
        "cpu_ratio_q3": cpu_ratio[2],
        "ours_us": statistics.median(o[0] for o in ours),
        "base_us": statistics.median(b[0] for b in base),
        "ours_cpu_us": statistics.median(o[1] for o in ours),
        "base_cpu_us": statistics.median(b[1] for b in base),
        "ours_bytes": captured_bytes(handle),
        "base_bytes": captured_bytes(handwritten),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=200, help="calls per variant in one pair")
    parser.add_argument(
        "--conventions", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS)
    )
    args = parser.parse_args()
    results = {
        setting: measure(setting, args.calls, args.rounds, args.batch)
        for setting in args.conventions
    }
    table = Table(title="Per-call overhead, evaluation off (median of interleaved batch pairs)")
    columns = (
        "conventions",
        "hand-written µs (cpu)",
        "ragpulse µs (cpu)",
        "wall ratio",
        "cpu ratio (target ≤ 1.05)",
        "cpu ratio IQR",
        "text bytes per request",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for setting, r in results.items():
        table.add_row(
            setting,
            f"{r['base_us']:.1f} ({r['base_cpu_us']:.1f})",
            f"{r['ours_us']:.1f} ({r['ours_cpu_us']:.1f})",
            f"{r['ratio']:.3f}",
            f"{r['cpu_ratio']:.3f}",
            f"{r['cpu_ratio_q1']:.3f}–{r['cpu_ratio_q3']:.3f}",
            f"{r['ours_bytes']:.0f} (by hand {r['base_bytes']:.0f})",
        )
    Console().print(table)
    provider.shutdown()
    fields = [f"calls={args.calls}", f"rounds={args.rounds}", f"batch={args.batch}"]
    for setting, r in results.items():
        fields += [
            f"ratio_{setting}={r['ratio']:.3f}",
            f"cpu_ratio_{setting}={r['cpu_ratio']:.3f}",
            f"cpu_ratio_q1_{setting}={r['cpu_ratio_q1']:.3f}",
            f"cpu_ratio_q3_{setting}={r['cpu_ratio_q3']:.3f}",
            f"ragpulse_us_{setting}={r['ours_us']:.1f}",
            f"handwritten_us_{setting}={r['base_us']:.1f}",
            f"bytes_{setting}={r['ours_bytes']:.0f}",
        ]
    genai = results.get("genai")
    both = results.get("both")
    if genai and both:
        fields.append(f"bytes_both_over_genai={both['ours_bytes'] / genai['ours_bytes']:.2f}")
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
