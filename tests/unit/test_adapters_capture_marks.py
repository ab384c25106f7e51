"""Out of process, a unit is judged only on complete evidence: what ragpulse's capture cut,
left out or could not read is never judged as if it were all there (``ragpulse serve``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import semconv
from ragpulse.adapters import read_trace
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.capture._record import handoff

PASSAGES = [f"Passage {i}: the Oak room seats {10 + i} people." for i in range(40)]


@pytest.fixture(autouse=True)
def _policy() -> Iterator[None]:
    yield
    set_policy(ContentPolicy())


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return PASSAGES


@ragpulse.rag(name="support-bot")
def handle(question: str) -> str:
    search(question)
    return "The Oak room seats 49 people."


def reading(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, object]:
    handle("How many people does the Oak room seat?")
    handoff.take(None)  # the in-process record is not used here: only what was exported
    spans = list(exporter.get_finished_spans())
    (unit,) = [s for s in spans if (s.attributes or {}).get(semconv.RAG_UNIT)]
    return unit, read_trace(unit, spans)


def test_unit_whose_documents_fit_the_caps_is_read_with_every_passage(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(max_documents=64))
    _, result = reading(exporter)
    record = result.record  # type: ignore[attr-defined]
    assert record is not None and len(record.contexts) == len(PASSAGES)


def test_unit_whose_documents_were_left_out_by_the_caps_is_not_judged(
    exporter: InMemorySpanExporter,
) -> None:
    # The supporting passage (the 40th) is beyond the cap: judging the rest would call
    # a supported answer a hallucination.
    set_policy(ContentPolicy(max_documents=8, conventions=("openinference",)))
    _, result = reading(exporter)
    assert result.record is None  # type: ignore[attr-defined]
    assert "capture caps" in " ".join(result.issues)  # type: ignore[attr-defined]


def test_unit_whose_documents_were_cut_in_bytes_is_not_judged(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(max_documents_bytes=512))
    _, result = reading(exporter)
    assert result.record is None  # type: ignore[attr-defined]
