"""``@ragpulse.tool`` records the call's arguments, bound by parameter name, as the GenAI
``execute_tool`` span (``gen_ai.tool.call.arguments``) and an OpenInference TOOL span
(``input.value``) write them, under the content policy; arguments without a JSON form never
change the call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.unit.test_capture_tools import WARRANTY, tool_span

import ragpulse
from ragpulse import semconv
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.capture._content import hmac_sha256

ARGUMENTS = semconv.GEN_AI_TOOL_CALL_ARGUMENTS


@pytest.fixture(autouse=True)
def _policy() -> Iterator[None]:
    set_policy(ContentPolicy())
    yield
    set_policy(ContentPolicy())


@ragpulse.tool
def search(query: str, limit: int = 5, *, language: str = "en") -> str:
    return WARRANTY


def arguments(exporter: InMemorySpanExporter, name: str) -> Any:
    attributes = dict(tool_span(exporter, name).attributes or {})
    return json.loads(str(attributes[ARGUMENTS]))


def test_positional_and_keyword_arguments_are_bound_by_parameter_name(
    exporter: InMemorySpanExporter,
) -> None:
    assert search("X200 warranty", 3, language="de") == WARRANTY

    assert arguments(exporter, "search") == {
        "query": "X200 warranty",
        "limit": 3,
        "language": "de",
    }


def test_only_the_arguments_passed_are_recorded(exporter: InMemorySpanExporter) -> None:
    search(query="X200 warranty")

    assert arguments(exporter, "search") == {"query": "X200 warranty"}


def test_star_args_are_a_list_under_their_name_and_star_kwargs_keep_their_names(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.tool
    def lookup(first: str, *more: str, **filters: Any) -> str:
        return WARRANTY

    lookup("a", "b", "c", product="X200", year=2024)

    assert arguments(exporter, "lookup") == {
        "first": "a",
        "more": ["b", "c"],
        "product": "X200",
        "year": 2024,
    }


def test_a_methods_self_and_a_classmethods_cls_are_left_out(
    exporter: InMemorySpanExporter,
) -> None:
    class Catalogue:
        @ragpulse.tool
        def find(self, sku: str) -> str:
            return WARRANTY

        @ragpulse.tool
        @classmethod
        def find_all(cls, sku: str, *, limit: int = 1) -> str:
            return WARRANTY

    assert Catalogue().find("X200") == WARRANTY
    assert Catalogue.find_all("X200", limit=2) == WARRANTY

    assert arguments(exporter, "find") == {"sku": "X200"}
    assert arguments(exporter, "find_all") == {"sku": "X200", "limit": 2}


def test_async_generator_and_async_generator_tools_record_their_arguments(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.tool
    async def fetch(url: str) -> str:
        return WARRANTY

    @ragpulse.tool
    def stream(query: str) -> Iterator[str]:
        yield WARRANTY

    @ragpulse.tool
    async def astream(query: str) -> AsyncIterator[str]:
        yield WARRANTY

    async def consume() -> list[str]:
        return [chunk async for chunk in astream(query="async stream")]

    assert asyncio.run(fetch("https://docs.example/x200")) == WARRANTY
    assert list(stream("stream")) == [WARRANTY]
    assert asyncio.run(consume()) == [WARRANTY]

    assert arguments(exporter, "fetch") == {"url": "https://docs.example/x200"}
    assert arguments(exporter, "stream") == {"query": "stream"}
    assert arguments(exporter, "astream") == {"query": "async stream"}


def test_openinference_writes_input_value_as_json(exporter: InMemorySpanExporter) -> None:
    set_policy(ContentPolicy(conventions=("openinference",)))
    search("X200 warranty")

    attributes = dict(tool_span(exporter, "search").attributes or {})
    assert json.loads(str(attributes[semconv.OI_INPUT_VALUE])) == {"query": "X200 warranty"}
    assert attributes[semconv.OI_INPUT_MIME_TYPE] == "application/json"
    assert ARGUMENTS not in attributes


def test_both_conventions_write_both_keys(exporter: InMemorySpanExporter) -> None:
    set_policy(ContentPolicy(conventions=("genai", "openinference")))
    search("X200 warranty")

    attributes = dict(tool_span(exporter, "search").attributes or {})
    assert attributes[ARGUMENTS] == attributes[semconv.OI_INPUT_VALUE]


def test_without_content_capture_only_the_length_and_keyed_hash_leave(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(capture_content=False, hash_key="k"))
    search("private question about my order 1234")

    attributes = dict(tool_span(exporter, "search").attributes or {})
    text = json.dumps({"query": "private question about my order 1234"})
    assert ARGUMENTS not in attributes
    assert attributes[semconv.withheld(ARGUMENTS, semconv.SUFFIX_LENGTH)] == len(text)
    assert attributes[semconv.withheld(ARGUMENTS, semconv.SUFFIX_HMAC_SHA256)] == hmac_sha256(
        b"k", text
    )
    assert not any("1234" in str(value) for value in attributes.values())


def test_without_content_capture_openinference_writes_no_input_value_or_mime_type(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(capture_content=False, conventions=("openinference",)))
    search("private")

    attributes = dict(tool_span(exporter, "search").attributes or {})
    assert semconv.OI_INPUT_VALUE not in attributes
    assert semconv.OI_INPUT_MIME_TYPE not in attributes
    assert attributes[semconv.withheld(semconv.OI_INPUT_VALUE, semconv.SUFFIX_LENGTH)] > 0


def test_arguments_are_redacted_and_capped(exporter: InMemorySpanExporter) -> None:
    set_policy(ContentPolicy(redact=lambda t: t.replace("secret", "[x]"), max_text_bytes=128))
    search("secret " + "y" * 1000)

    attributes = dict(tool_span(exporter, "search").attributes or {})
    exported = str(attributes[ARGUMENTS])
    assert "secret" not in exported and "[x]" in exported
    assert len(exported.encode()) <= 128
    assert ARGUMENTS in list(attributes[semconv.RAG_CAPTURE_TRUNCATED])  # type: ignore[arg-type]


class Opaque:
    def __repr__(self) -> str:
        return "Opaque(7)"


class Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def __str__(self) -> str:
        raise RuntimeError("no str")


def test_arguments_without_a_json_form_never_change_the_call(
    exporter: InMemorySpanExporter,
) -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    opaque, hostile = Opaque(), Hostile()
    seen: list[tuple[Any, ...]] = []

    @ragpulse.tool
    def take(obj: Any, raw: bytes, loop: list[Any], bad: Any, keyed: dict[Any, Any]) -> str:
        seen.append((obj, raw, loop, bad, keyed))
        return WARRANTY

    keyed = {(1, 2): "tuple key", hostile: "hostile key"}
    result = take(opaque, b"caf\xc3\xa9 \xff", cyclic, hostile, keyed)

    assert result == WARRANTY
    assert seen == [(opaque, b"caf\xc3\xa9 \xff", cyclic, hostile, keyed)]
    recorded = arguments(exporter, "take")
    assert recorded["obj"] == "Opaque(7)"
    assert recorded["raw"] == "café \ufffd"
    assert recorded["loop"] == [1, "[cycle]"]
    assert "unreadable" in recorded["bad"]
    assert recorded["keyed"]["(1, 2)"] == "tuple key"
    attributes = dict(tool_span(exporter, "take").attributes or {})
    assert attributes[semconv.GEN_AI_TOOL_CALL_RESULT] == WARRANTY


def test_a_huge_argument_is_read_within_the_bounds(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool
    def bulk(rows: list[int]) -> str:
        return WARRANTY

    rows = list(range(1_000_000))
    assert bulk(rows) == WARRANTY

    attributes = dict(tool_span(exporter, "bulk").attributes or {})
    assert len(str(attributes[ARGUMENTS]).encode()) <= ContentPolicy().max_text_bytes
    assert len(rows) == 1_000_000
