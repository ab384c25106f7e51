"""An app that set up OpenTelemetry itself and adds only ragpulse's span processor.

The evaluating processor wraps the app's own exporting processor, so the spans it
already exports arrive with the scores on them. Offline: spans go to the console
unless OTEL_EXPORTER_OTLP_ENDPOINT is set.
"""

import os

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

import ragpulse
from ragpulse.settings.options import BoundsOptions

exporter = OTLPSpanExporter() if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") else None
provider = TracerProvider(resource=Resource.create({"service.name": "existing-app"}))
provider.add_span_processor(
    ragpulse.EvaluatingSpanProcessor(
        BatchSpanProcessor(exporter or ConsoleSpanExporter()),
        judge=ragpulse.judges.LexicalJudge(),
        sampler=ragpulse.EvalSampler(rate=1.0),
        bounds=BoundsOptions(hold_timeout=10.0),
    )
)
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("existing-app")


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": "kb-7", "content": "The API rate limit is 600 requests per minute per key."}]


@ragpulse.rag
def handle(question: str) -> str:
    with tracer.start_as_current_span("business-logic"):  # the app's own spans are untouched
        docs = search(question)
    ragpulse.record_answer("The API allows 600 requests per minute per key.")
    return docs[0]["content"]


handle("What is the API rate limit?")
provider.force_flush()
provider.shutdown()
