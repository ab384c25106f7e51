"""A recursion the interpreter allows undecorated is allowed decorated: the decorators keep
one frame per level on the stack beside the function's own (``bench/decorated_recursion.py``
measures it), so 400 levels fit under the default recursion limit of 1,000 with room for
the application's own frames below them."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse

DEPTH = 400


HEADROOM = 900
"""Frames a test may use under the limit: the default limit of 1,000, less what an
application's own frames below the recursion take (the test runner's, here)."""


def stack_depth() -> int:
    frame: Any = sys._getframe(1)
    depth = 0
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


@pytest.fixture
def default_recursion_limit() -> Iterator[None]:
    """``HEADROOM`` frames above the test's own, however deep the runner's stack is."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(stack_depth() + HEADROOM)
    yield
    sys.setrecursionlimit(before)


def levels(exporter: InMemorySpanExporter) -> list[Any]:
    # @rag names its span "level", @retrieval "retrieval level".
    return [s for s in exporter.get_finished_spans() if s.name.endswith("level")]


def assert_one_span_per_level_each_the_parent_of_the_next(exporter: InMemorySpanExporter) -> None:
    spans = levels(exporter)
    assert len(spans) == DEPTH + 1
    by_id = {s.context.span_id: s for s in spans}
    roots = [s for s in spans if s.parent is None or s.parent.span_id not in by_id]
    assert len(roots) == 1
    chain, span = 1, roots[0]
    children = {s.parent.span_id: s for s in spans if s.parent is not None}
    while span.context.span_id in children:
        span, chain = children[span.context.span_id], chain + 1
    assert chain == DEPTH + 1


def sync_countdown(decorate: Callable[[Any], Any]) -> Callable[[int], str]:
    def countdown(n: int) -> str:
        return "liftoff" if n == 0 else countdown(n - 1) + "."

    countdown = decorate(countdown)
    return countdown


@pytest.mark.usefixtures("default_recursion_limit")
def test_a_400_deep_recursion_of_a_decorated_function_returns_what_undecorated_returns(
    exporter: InMemorySpanExporter,
) -> None:
    expected = sync_countdown(lambda f: f)(DEPTH)
    assert sync_countdown(ragpulse.retrieval(name="level"))(DEPTH) == expected
    assert_one_span_per_level_each_the_parent_of_the_next(exporter)


@pytest.mark.usefixtures("default_recursion_limit")
def test_a_400_deep_recursion_of_a_decorated_rag_function_records_every_level(
    exporter: InMemorySpanExporter,
) -> None:
    expected = sync_countdown(lambda f: f)(DEPTH)
    assert sync_countdown(ragpulse.rag(name="level"))(DEPTH) == expected
    assert_one_span_per_level_each_the_parent_of_the_next(exporter)


def async_countdown(decorate: Callable[[Any], Any]) -> Callable[[int], Any]:
    async def countdown(n: int) -> str:
        return "liftoff" if n == 0 else await countdown(n - 1) + "."

    countdown = decorate(countdown)
    return countdown


@pytest.mark.usefixtures("default_recursion_limit")
async def test_a_400_deep_recursion_of_a_decorated_coroutine_returns_what_undecorated_returns(
    exporter: InMemorySpanExporter,
) -> None:
    expected = await async_countdown(lambda f: f)(DEPTH)
    assert await async_countdown(ragpulse.retrieval(name="level"))(DEPTH) == expected
    assert_one_span_per_level_each_the_parent_of_the_next(exporter)


def generator_countdown(decorate: Callable[[Any], Any]) -> Callable[[int], Iterator[str]]:
    def countdown(n: int) -> Iterator[str]:
        if n == 0:
            yield "liftoff"
        else:
            yield from countdown(n - 1)
            yield "."

    countdown = decorate(countdown)
    return countdown


@pytest.mark.usefixtures("default_recursion_limit")
def test_a_400_deep_recursion_of_a_decorated_generator_yields_what_undecorated_yields(
    exporter: InMemorySpanExporter,
) -> None:
    expected = list(generator_countdown(lambda f: f)(DEPTH))
    assert list(generator_countdown(ragpulse.retrieval(name="level"))(DEPTH)) == expected
    assert_one_span_per_level_each_the_parent_of_the_next(exporter)


def async_generator_countdown(
    decorate: Callable[[Any], Any],
) -> Callable[[int], AsyncIterator[str]]:
    async def countdown(n: int) -> AsyncIterator[str]:
        if n == 0:
            yield "liftoff"
        else:
            async for item in countdown(n - 1):
                yield item
            yield "."

    countdown = decorate(countdown)
    return countdown


@pytest.mark.usefixtures("default_recursion_limit")
async def test_a_400_deep_recursion_of_a_decorated_async_generator_yields_what_undecorated_yields(
    exporter: InMemorySpanExporter,
) -> None:
    expected = [item async for item in async_generator_countdown(lambda f: f)(DEPTH)]
    decorated = async_generator_countdown(ragpulse.retrieval(name="level"))
    assert [item async for item in decorated(DEPTH)] == expected
    assert_one_span_per_level_each_the_parent_of_the_next(exporter)
