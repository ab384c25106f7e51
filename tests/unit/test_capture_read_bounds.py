"""What a decorated call hands over is read no further than what can leave: a huge argument,
100,000 keyword arguments, a huge non-ASCII answer or 100,000 empty contexts are cut to the
bounds with their markers, and the call's arguments and return value are untouched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import errors, semconv
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.capture._content import cap_bytes
from ragpulse.capture._record import handoff
from ragpulse.capture._text import CONTEXT_CHARGE, CUT_MARKER, MAX_RECORD_CHARS, read_contexts

MAX_TEXT_BYTES = 4096
ARGUMENTS = semconv.GEN_AI_TOOL_CALL_ARGUMENTS


@pytest.fixture(autouse=True)
def _policy() -> Iterator[None]:
    handoff.add_consumer()
    set_policy(ContentPolicy(max_text_bytes=MAX_TEXT_BYTES))
    yield
    handoff.remove_consumer()
    set_policy(ContentPolicy())


def span_named(exporter: InMemorySpanExporter, prefix: str) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]
    return span


def attribute(span: ReadableSpan, key: str) -> str:
    return str(dict(span.attributes or {})[key])


def test_a_huge_argument_is_recorded_cut_and_handed_to_the_function_as_it_was(
    exporter: InMemorySpanExporter,
) -> None:
    huge = "x" * 40_000_000
    seen: list[str] = []

    @ragpulse.tool
    def search(query: str) -> str:
        seen.append(query)
        return "found"

    assert search(huge) == "found"

    assert seen[0] is huge
    recorded = attribute(span_named(exporter, "execute_tool search"), ARGUMENTS)
    assert len(recorded.encode()) <= MAX_TEXT_BYTES
    assert recorded.startswith('{"query": "xxx')
    assert "…[" in recorded  # the cut marker, or the byte cap's


def test_a_hundred_thousand_keyword_arguments_are_recorded_cut_and_all_passed(
    exporter: InMemorySpanExporter,
) -> None:
    given = {f"k{i}": i for i in range(100_000)}
    received: list[int] = []

    @ragpulse.tool
    def lookup(**filters: Any) -> str:
        received.append(len(filters))
        return "found"

    assert lookup(**given) == "found"

    assert received == [100_000]
    recorded = attribute(span_named(exporter, "execute_tool lookup"), ARGUMENTS)
    assert len(recorded.encode()) <= MAX_TEXT_BYTES
    assert recorded.endswith((CUT_MARKER, "bytes]", "}"))
    assert "…[" in recorded
    assert recorded.startswith('{"k0": 0, "k1": 1')


def test_a_small_argument_mapping_is_recorded_whole(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool
    def search(query: str, limit: int = 5) -> str:
        return "found"

    search("X200 warranty", limit=3)

    recorded = attribute(span_named(exporter, "execute_tool search"), ARGUMENTS)
    assert json.loads(recorded) == {"query": "X200 warranty", "limit": 3}


def test_a_huge_non_ascii_answer_is_exported_cut_and_not_judged(
    exporter: InMemorySpanExporter,
) -> None:
    huge = "é" * 50_000_000

    @ragpulse.generation
    def generate(question: str) -> str:
        return huge

    @ragpulse.rag(name="huge answer")
    def answer(question: str) -> str:
        ragpulse.record_contexts(["The X200 has a 2-year warranty."])
        return generate(question)

    assert answer("q") is huge

    unit = span_named(exporter, "huge answer")
    exported = attribute(unit, semconv.RAG_ANSWER)
    assert len(exported.encode()) <= MAX_TEXT_BYTES
    assert exported.startswith("éé") and exported.endswith("characters]")
    assert dict(unit.attributes or {})[semconv.EVAL_ERROR_TYPE] == errors.TOO_LARGE


def test_a_cut_text_too_long_to_read_counts_the_characters_cut() -> None:
    text = "é" * 100_000

    cut = cap_bytes(text, 1000)

    assert len(cut.encode()) <= 1000
    kept = cut.split("…")[0]
    assert cut.endswith(f"[truncated {len(text) - len(kept)} characters]")


def test_a_short_non_ascii_text_is_cut_counting_bytes() -> None:
    cut = cap_bytes("é" * 1000, 1000)
    assert len(cut.encode()) <= 1000
    assert cut.endswith("bytes]")


def test_empty_contexts_are_read_no_further_than_the_records_budget() -> None:
    read = read_contexts([""] * 100_000)

    assert len(read.items) == MAX_RECORD_CHARS // CONTEXT_CHARGE + 1
    assert read.omitted == 100_000 - len(read.items)


def test_empty_objects_are_read_no_further_than_the_records_budget() -> None:
    read = read_contexts([{"text": ""} for _ in range(100_000)], budget=160_000)

    assert len(read.items) == 160_000 // CONTEXT_CHARGE + 1
    assert read.omitted > 0


def test_a_request_with_a_hundred_thousand_empty_contexts_is_not_judged(
    exporter: InMemorySpanExporter,
) -> None:
    empty = [""] * 100_000

    @ragpulse.retrieval
    def search(query: str) -> list[str]:
        return empty

    @ragpulse.rag(name="empty contexts")
    def answer(question: str) -> str:
        search(question)
        return "No idea."

    assert answer("q") == "No idea."
    unit = span_named(exporter, "empty contexts")
    assert dict(unit.attributes or {})[semconv.EVAL_ERROR_TYPE] == errors.TOO_LARGE
