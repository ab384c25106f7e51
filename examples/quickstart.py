"""The README's decorator example, offline: scores land on the spans in ragpulse-traces.jsonl."""

import asyncio

import ragpulse

DOCS = {
    "refund": "Refunds are issued within 14 days of purchase to the original payment method.",
    "shipping": "Standard shipping takes 3 to 5 business days within the EU.",
}
gold = {"How long do refunds take?": "Refunds are issued within 14 days."}

handle_ = ragpulse.configure(service_name="support-bot")  # OTEL_* env respected


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return [text for key, text in DOCS.items() if key in query.lower() or "refund" in key]


@ragpulse.generation(model="gpt-4o-mini")
async def answer(question: str, docs: list[str]) -> str:
    return docs[0].split(" to the original")[0] + "."  # an extractive stand-in for a model


@ragpulse.rag(reference=lambda question: gold.get(question))
async def handle(question: str) -> str:
    docs = search(question)
    return await answer(question, docs)


print(asyncio.run(handle("How long do refunds take?")))
handle_.force_flush()
handle_.shutdown()
