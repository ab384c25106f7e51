"""What a decorated call hands over is read no further than what can leave: a huge argument
or 100,000 keyword arguments are cut to the bounds with their markers, and the call's
arguments and return value are untouched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import semconv
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.capture._record import handoff
from ragpulse.capture._text import CUT_MARKER

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
