"""Shared fixtures: one global TracerProvider whose processor each test chooses,
and the real servers (rotel, Phoenix) from tests/servers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from servers.fixtures import phoenix_server, rotel_binary, rotel_sink, rotel_to_phoenix
from servers.phoenix import STARTUP_TIMEOUT_S

__all__ = ["phoenix_server", "rotel_binary", "rotel_sink", "rotel_to_phoenix"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that may start the session's Phoenix gets the time that start may take as well.

    pytest-timeout counts fixture setup in the test's own timeout (``timeout`` in
    pyproject.toml), and Phoenix's start alone can take minutes on a busy machine.
    """
    for item in items:
        if "phoenix_server" not in getattr(item, "fixturenames", ()):
            continue
        marker = item.get_closest_marker("timeout")
        if marker is not None and marker.args:
            own = float(marker.args[0])
        else:
            own = float(item.config.getini("timeout") or 0)
        # Prepended: pytest-timeout reads the first timeout marker it finds.
        item.add_marker(pytest.mark.timeout(STARTUP_TIMEOUT_S + own), append=False)


class RoutingProcessor(SpanProcessor):
    """Sends spans to whichever processor the running test installed.

    OpenTelemetry lets a process set its global TracerProvider once; the
    decorators follow that global. Tests share one provider and swap what is
    behind it.
    """

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.target is not None:
            self.target.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.target is not None:
            self.target.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.target.force_flush(timeout_millis) if self.target is not None else True

    def shutdown(self) -> None:
        return None


_ROUTER = RoutingProcessor()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(_ROUTER)
trace.set_tracer_provider(_PROVIDER)


@pytest.fixture
def capture_records() -> Iterator[None]:
    """The decorators hand their records over (as when a processor takes them), under the
    default content policy and tool roles, restored after the test."""
    from ragpulse.capture import ContentPolicy, set_policy
    from ragpulse.capture._record import handoff
    from ragpulse.capture._roles import EVERY_TOOL, set_tool_roles

    handoff.add_consumer()
    set_policy(ContentPolicy())
    set_tool_roles(EVERY_TOOL)
    yield
    handoff.remove_consumer()
    set_policy(ContentPolicy())
    set_tool_roles(EVERY_TOOL)


@pytest.fixture
def route_spans() -> Iterator[Any]:
    """Install a processor behind the global provider for one test."""

    def install(processor: SpanProcessor) -> SpanProcessor:
        _ROUTER.target = processor
        return processor

    yield install
    if _ROUTER.target is not None:
        _ROUTER.target.shutdown()
    _ROUTER.target = None


@pytest.fixture
def exporter(route_spans: Any) -> InMemorySpanExporter:
    """Finished spans of this test, exported synchronously and in memory."""
    memory = InMemorySpanExporter()
    route_spans(SimpleSpanProcessor(memory))
    return memory


def in_ci() -> bool:
    """CI sets CI=true: there, tests that need a server must run, never skip."""
    return bool(os.environ.get("CI"))
