"""The README's quickstart, offline: prints each request's scores as they are written on its span.

The scores also land on the ``@rag`` span in ``ragpulse-traces.jsonl`` (no OTLP endpoint set),
or at ``OTEL_EXPORTER_OTLP_ENDPOINT`` when one is.
"""

import asyncio

import ragpulse
from ragpulse import Evaluation, RagRecord

gold = {"How long do refunds take?": "Refunds are issued within 14 days."}


def show(record: RagRecord, evaluation: Evaluation) -> None:
    scores = {name: evaluation.score(name) for name in evaluation.metrics}
    print(f"{record.question!r}: {evaluation.status.value} {scores}")


handle_ = ragpulse.configure(service_name="support-bot", on_evaluation=show)  # OTEL_* respected


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return ["Refunds are issued within 14 days of purchase to the original payment method."]


@ragpulse.generation(model="gpt-4o-mini")
async def answer(question: str, docs: list[str]) -> str:
    return "Refunds are issued within 14 days of purchase."


@ragpulse.rag(reference=lambda question: gold.get(question))
async def handle(question: str) -> str:
    docs = search(question)
    return await answer(question, docs)


print(asyncio.run(handle("How long do refunds take?")))
handle_.force_flush()  # waits for the evaluation; the scores print before it returns
handle_.shutdown()
