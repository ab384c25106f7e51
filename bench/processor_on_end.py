"""What ``EvaluatingSpanProcessor`` adds to every span that ends, on the request's thread.

One TracerProvider records the requests; behind it, in alternating rounds, is
either a processor that drops spans or ``EvaluatingSpanProcessor`` in front of
that same kind of processor. A request is a server span with two children (a database call and an
HTTP call, the spans of a service that is not a RAG unit). ``--rate`` sets the
sampler for the second scenario, a decorated ``@rag`` request (unit, retrieval
and generation spans): 0.0 measures the decision alone, nothing held or judged.
Rounds are interleaved so machine noise hits both alike; the figure is the
calling thread's CPU time per request, the median over rounds, and the ratio.

    python bench/processor_on_end.py [--requests 5000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from rich.console import Console
from rich.table import Table

import ragpulse
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler


class Drop(SpanProcessor):
    """Receives every span and keeps none: the cost of a processor that does nothing."""

    def on_end(self, span: ReadableSpan) -> None:
        return None


class Router(SpanProcessor):
    """Hands each span to the processor being measured (the provider keeps one)."""

    def __init__(self) -> None:
        self.target: SpanProcessor = Drop()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.target.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self.target.on_end(span)


def service_request(tracer: trace.Tracer) -> None:
    with tracer.start_as_current_span("GET /orders/{id}", kind=trace.SpanKind.SERVER) as span:
        span.set_attribute("http.route", "/orders/{id}")
        with tracer.start_as_current_span("SELECT orders", attributes={"db.system": "postgresql"}):
            pass
        with tracer.start_as_current_span("GET", kind=trace.SpanKind.CLIENT) as call:
            call.set_attribute("http.request.method", "GET")


@ragpulse.retrieval
def search(question: str) -> list[str]:
    return ["Support is open from 9am to 5pm on weekdays."]


@ragpulse.generation(model="extractive")
def write(question: str, passages: list[str]) -> str:
    return passages[0]


@ragpulse.rag(name="support-bot")
def rag_request(question: str) -> str:
    return write(question, search(question))


def cpu_per_call(call: Callable[[], None], count: int) -> float:
    started = time.thread_time()
    for _ in range(count):
        call()
    return (time.thread_time() - started) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--rate", type=float, default=0.0, help="sample rate for @rag units")
    args = parser.parse_args()

    provider = TracerProvider()
    router = Router()
    provider.add_span_processor(router)
    trace.set_tracer_provider(provider)  # the decorators' tracer follows the global one
    plain = Drop()
    processor = EvaluatingSpanProcessor(Drop(), sampler=EvalSampler(rate=args.rate))
    tracer = provider.get_tracer("app")

    scenarios: dict[str, Callable[[], None]] = {
        "service request (3 spans)": lambda: service_request(tracer),
        "@rag request, not sampled (3 spans)": lambda: rag_request("When is support open?"),
    }
    results: dict[str, tuple[float, float]] = {}
    for name, call in scenarios.items():
        base: list[float] = []
        ours: list[float] = []
        for _ in range(args.rounds):
            router.target = plain
            base.append(cpu_per_call(call, args.requests))
            router.target = processor
            ours.append(cpu_per_call(call, args.requests))
        results[name] = (statistics.median(base), statistics.median(ours))
    processor.shutdown()

    table = Table(title="CPU per request on the calling thread (median of rounds)")
    for column in ("request", "plain processor", "EvaluatingSpanProcessor", "ratio", "added"):
        table.add_column(column, justify="right" if column != "request" else "left")
    for name, (base_s, ours_s) in results.items():
        table.add_row(
            name,
            f"{base_s * 1e6:.1f} µs",
            f"{ours_s * 1e6:.1f} µs",
            f"{ours_s / base_s:.3f}",
            f"{(ours_s - base_s) * 1e6:.1f} µs",
        )
    Console().print(table)
    (service_base, service_ours), (rag_base, rag_ours) = results.values()
    print(
        "RESULT "
        f"service_ratio={service_ours / service_base:.3f} "
        f"service_added_us={(service_ours - service_base) * 1e6:.2f} "
        f"rag_unsampled_ratio={rag_ours / rag_base:.3f} "
        f"rag_unsampled_added_us={(rag_ours - rag_base) * 1e6:.2f}"
    )


if __name__ == "__main__":
    main()
