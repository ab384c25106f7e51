"""An app instrumented only by OpenInference (no ragpulse decorators), evaluated by ragpulse.

ragpulse reads the trace's OpenInference spans (a RETRIEVER span with
``retrieval.documents.N.document.content``, the LLM span the OpenAI instrumentor
writes) into a record when the trace's root span ends, and writes the scores onto
that root span.

    python examples/openinference_app.py        # offline: an in-process stand-in model
    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 python examples/openinference_app.py   # vLLM, Ollama…

Without ``OPENAI_BASE_URL`` the real ``openai`` client and its OpenInference
instrumentation run unchanged, but the HTTP exchange is answered in-process by a
transport that speaks the Chat Completions protocol and replies with the first
retrieved passage, so the example needs no server and no key.
"""

from __future__ import annotations

import json
import os

import httpx
from openai import OpenAI
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry import trace

import ragpulse

DOCUMENTS = [
    "The Eiffel Tower opened to the public on 31 March 1889.",
    "It was built for the 1889 World's Fair in Paris.",
]


def offline_model(request: httpx.Request) -> httpx.Response:
    """A Chat Completions reply as a server would send it: the context's first line, verbatim."""
    body = json.loads(request.content)
    context = body["messages"][-1]["content"].split("Context:\n", 1)[-1]
    text = context.splitlines()[0]
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-offline",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        },
    )


handle = ragpulse.configure(service_name="openinference-app")
OpenAIInstrumentor().instrument()
tracer = trace.get_tracer("openinference-app")
base_url = os.environ.get("OPENAI_BASE_URL")
client = OpenAI(
    base_url=base_url or "http://offline.invalid/v1",
    api_key=os.environ.get("OPENAI_API_KEY", "local"),
    http_client=None if base_url else httpx.Client(transport=httpx.MockTransport(offline_model)),
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
