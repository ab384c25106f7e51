"""An async FastAPI service whose streaming answer is evaluated by ragpulse.

    uvicorn examples.fastapi_app:app --port 8000
    curl -N 'http://127.0.0.1:8000/ask?question=How+long+do+refunds+take%3F'

The decorated async generator keeps its span open until the response has streamed,
so the evaluated answer is the whole text the client received.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import StreamingResponse

import ragpulse

KNOWLEDGE = [
    "Refunds are issued within 14 days of purchase to the original payment method.",
    "Standard shipping takes 3 to 5 business days within the EU.",
    "Support is available by chat from 8am to 8pm CET on weekdays.",
]


@ragpulse.retrieval
async def search(query: str) -> list[str]:
    words = set(query.lower().split())
    return sorted(KNOWLEDGE, key=lambda doc: -len(words & set(doc.lower().split())))[:2]


@ragpulse.rag(name="ask")
async def answer_stream(question: str) -> AsyncIterator[str]:
    docs = await search(question)
    for word in docs[0].split(" "):
        await asyncio.sleep(0)  # a model streaming tokens
        yield word + " "


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    handle = ragpulse.configure(service_name="fastapi-support")
    yield
    handle.shutdown()


app = FastAPI(lifespan=lifespan)


@app.get("/ask")
async def ask(question: str) -> StreamingResponse:
    return StreamingResponse(answer_stream(question), media_type="text/plain")
