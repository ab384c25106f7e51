"""What capturing a huge retrieval costs the request, and how big the span gets.

A retriever returns N passages (default 100,000), in two cases: long passages
(38 bytes each: the read stops at the record's character budget) and short ones
(a few characters each: every one of them is read). Three ways to call it,
interleaved in one process on one SDK TracerProvider with a BatchSpanProcessor
and a discarding exporter, a processor wanting records (as an evaluating one
does):

- ``bare``: the undecorated function (the floor);
- ``by hand``: a hand-written span that writes every passage into
  ``gen_ai.retrieval.documents`` JSON, as capture did before its byte caps;
- ``ragpulse``: ``@retrieval`` inside ``@rag``, with the default content policy.

It prints, per case, milliseconds per request (median of rounds), the captured
bytes of the retrieval span, and the ratio of ragpulse's added time to the
hand-written one's.

    python bench/capture_size.py [--passages 100000] [--rounds 7] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from rich.console import Console
from rich.table import Table

import ragpulse
from ragpulse import semconv
from ragpulse.capture._record import handoff


class Keep(SpanExporter):
    """Drops spans, keeping the last batch to measure its attributes."""

    def __init__(self) -> None:
        self.last: Sequence[ReadableSpan] = ()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.last = spans
        return SpanExportResult.SUCCESS


exporter = Keep()
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=10_000))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("hand-written")
passages: list[str] = []


def bare(question: str) -> list[str]:
    return passages


def by_hand(question: str) -> list[str]:
    with tracer.start_as_current_span("retrieval by hand") as span:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_RETRIEVAL)
        span.set_attribute(semconv.GEN_AI_RETRIEVAL_QUERY_TEXT, question)
        span.set_attribute(
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS,
            json.dumps([{"content": p} for p in passages], ensure_ascii=False),
        )
        return passages


@ragpulse.retrieval
def search(question: str) -> list[str]:
    return passages


@ragpulse.rag(name="bench-size")
def handle(question: str) -> list[str]:
    docs = search(question)
    ragpulse.record_answer("Refunds are issued within 14 days.")
    return docs


def per_request_ms(fn: Callable[[str], list[str]], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn("How long do refunds take?")
    return (time.perf_counter() - start) / repeat * 1e3


def retrieval_bytes(fn: Callable[[str], list[str]]) -> int:
    provider.force_flush()
    exporter.last = ()
    fn("How long do refunds take?")
    provider.force_flush()
    return max(
        (
            sum(len(v.encode()) for v in (s.attributes or {}).values() if isinstance(v, str))
            for s in exporter.last
            if s.name.startswith("retrieval")
        ),
        default=0,
    )


@dataclass(frozen=True)
class Case:
    name: str
    median_ms: dict[str, float]
    sizes: dict[str, int]

    @property
    def added_ours(self) -> float:
        return self.median_ms["ragpulse"] - self.median_ms["bare"]

    @property
    def added_hand(self) -> float:
        return self.median_ms["by hand"] - self.median_ms["bare"]


VARIANTS: dict[str, Callable[[str], list[str]]] = {
    "bare": bare,
    "by hand": by_hand,
    "ragpulse": handle,
}


def measure(name: str, texts: list[str], rounds: int, repeat: int) -> Case:
    """Each variant's median time per request with ``texts`` retrieved, interleaved."""
    passages[:] = texts
    for fn in VARIANTS.values():
        per_request_ms(fn, 1)
    times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for _ in range(rounds):
        for variant, fn in VARIANTS.items():
            times[variant].append(per_request_ms(fn, repeat))
            provider.force_flush()
    median = {variant: statistics.median(values) for variant, values in times.items()}
    sizes = {variant: retrieval_bytes(fn) for variant, fn in VARIANTS.items()}
    return Case(name, median, sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    handoff.add_consumer()  # as an evaluating processor does: records are built
    long_texts = [f"passage {i:06d} about refunds and returns" for i in range(args.passages)]
    short_texts = [f"p{i % 1000}" for i in range(args.passages)]
    cases = [
        measure("long", long_texts, args.rounds, args.repeat),
        measure("short", short_texts, args.rounds, args.repeat),
    ]
    handoff.remove_consumer()
    provider.shutdown()
    console = Console()
    for case in cases:
        title = f"One request retrieving {args.passages:,} {case.name} passages"
        table = Table(title=f"{title} (median of rounds)")
        table.add_column("variant")
        table.add_column("ms per request", justify="right")
        table.add_column("retrieval span text bytes", justify="right")
        for variant in VARIANTS:
            table.add_row(variant, f"{case.median_ms[variant]:.2f}", f"{case.sizes[variant]:,}")
        console.print(table)
    long, short = cases
    print(
        f"RESULT passages={args.passages} ragpulse_added_ms={long.added_ours:.2f} "
        f"hand_added_ms={long.added_hand:.2f} "
        f"ratio_vs_hand={long.added_ours / long.added_hand:.3f} "
        f"ragpulse_bytes={long.sizes['ragpulse']} hand_bytes={long.sizes['by hand']} "
        f"short_ragpulse_added_ms={short.added_ours:.2f} "
        f"short_hand_added_ms={short.added_hand:.2f} "
        f"short_ratio_vs_hand={short.added_ours / short.added_hand:.3f}"
    )


if __name__ == "__main__":
    main()
