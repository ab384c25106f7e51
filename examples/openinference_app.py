"""An app instrumented only by OpenInference (no ragpulse decorators), evaluated by ragpulse.

ragpulse reads the trace's OpenInference spans (a RETRIEVER span with
``retrieval.documents.N.document.content``, the LLM span the OpenAI instrumentor
writes) into a record when the trace's root span ends, and writes the scores onto
that root span. It talks to any OpenAI-compatible server; offline, point it at a
local one (vLLM, Ollama, llama.cpp):

    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 python examples/openinference_app.py
"""

from __future__ import annotations

import json
import os

from openai import OpenAI
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry import trace

import ragpulse

DOCUMENTS = [
    "The Eiffel Tower opened to the public on 31 March 1889.",
    "It was built for the 1889 World's Fair in Paris.",
]

handle = ragpulse.configure(service_name="openinference-app")
OpenAIInstrumentor().instrument()
tracer = trace.get_tracer("openinference-app")
client = OpenAI(
    base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
    api_key=os.environ.get("OPENAI_API_KEY", "local"),
)


def retrieve(question: str) -> list[str]:
    # Written the way OpenInference's retriever instrumentations write it.
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", question)
        for i, text in enumerate(DOCUMENTS):
            span.set_attribute(f"retrieval.documents.{i}.document.id", f"doc-{i}")
            span.set_attribute(f"retrieval.documents.{i}.document.content", text)
        return DOCUMENTS


def answer(question: str) -> str:
    with tracer.start_as_current_span("rag-request") as root:
        root.set_attribute("openinference.span.kind", "CHAIN")
        root.set_attribute("input.value", question)
        docs = retrieve(question)
        reply = client.chat.completions.create(
            model=os.environ.get("OPENAI_MODEL", "local-model"),
            messages=[
                {"role": "system", "content": "Answer from the context only."},
                {"role": "user", "content": "Context:\n" + "\n".join(docs) + f"\n\n{question}"},
            ],
        )
        text = reply.choices[0].message.content or ""
        root.set_attribute("output.value", text)
        return text


if __name__ == "__main__":
    print(json.dumps({"answer": answer("When did the Eiffel Tower open?")}))
    handle.force_flush()
    handle.shutdown()
