"""A small RAG app set up with ``ragpulse.configure()``, run as its own process by the tests.

argv[1] is the mode: ``fresh`` (ragpulse builds the providers), ``twice`` (configure() called
again after a first call) or ``joined`` (the app set up OpenTelemetry itself first, exporting
to OTLP/HTTP at argv[2]).
"""

from __future__ import annotations

import sys

import ragpulse
from ragpulse.settings.options import BoundsOptions

CONTEXTS = [
    "The Larkspur L2 router costs $129 and was released in March 2024.",
    "Support is open from 9am to 5pm on weekdays.",
]


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": f"doc-{i}", "content": text} for i, text in enumerate(CONTEXTS)]


@ragpulse.generation(model="extractive")
def write(question: str, docs: list[dict[str, str]]) -> str:
    if "support" in question.lower():
        return "Support is open from 9am to 5pm on weekdays."
    return "The Larkspur L2 router costs $199. It glows in the dark."


@ragpulse.rag(name="support-bot")
def handle(question: str) -> str:
    return write(question, search(question))


def main() -> None:
    mode = sys.argv[1]
    if mode == "joined":
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": "own-setup"}))
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=sys.argv[2] + "/v1/traces"))
        )
        trace.set_tracer_provider(provider)
    if mode == "twice":
        # A second configure() (a notebook cell run again) replaces the evaluation settings.
        ragpulse.configure(service_name="configured-app", thresholds={"groundedness": 0.0})
    handle_ = ragpulse.configure(
        service_name="configured-app", bounds=BoundsOptions(hold_timeout=10.0)
    )
    print("mode", mode, "joined", handle_.joined, "files", dict(handle_.output_files), flush=True)
    handle("When is support open?")
    handle("How much is the L2 router?")
    handle_.force_flush()
    handle_.shutdown()
    if mode == "joined":
        from opentelemetry import trace

        trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
