"""A hand-written tool-calling agent (the ``openai`` SDK, one ``search_docs`` function tool)
and the three instrumentations it is traced with, for the agent integration tests.

The agent is the loop a user writes: ask the model with the tool offered; while it asks
for tools, run them (each in a tool span where the instrumentation has one) and hand the
results back as ``tool`` messages; its last answer goes to the user. The chat server
scripts the model's turns, tool calls included, over the real protocol.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode
from tests.servers.chat_server import Reply, ToolCall

from ragpulse import semconv

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the product documentation.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}
WARRANTY = "The X200 comes with a 2-year limited warranty that covers parts and labour."
WATER = "The limited warranty does not cover water damage."
GROUNDED = "The X200 comes with a 2-year limited warranty."
MADE_UP = "The X200 comes with a lifetime warranty."
"""Made up against the tool's "2-year limited warranty": the issue's own example, an unbounded
extent where the evidence bounds it (the offline judge's ``extent`` rule)."""
QUESTION = "What warranty does the X200 have?"


class ToolFailed(RuntimeError):
    """The search backend is down."""


Search = Callable[[str], str]


@dataclass
class Instrumentation:
    """One third-party instrumentation of the ``openai`` client, and how its users trace a
    tool call and name a conversation."""

    name: str
    instrument: Callable[[TracerProvider, LoggerProvider], Callable[[], None]]
    conversation_key: str
    tool_span: Callable[[TracerProvider, str, str, Search, str], str] | None = None
    root: dict[str, str] = field(default_factory=dict)
    """Attributes of the agent's root span, as the convention's users write them."""
    env: dict[str, str | None] = field(default_factory=dict)
    """The variables that choose where its content goes (``None``: unset)."""


def _openinference(provider: TracerProvider, logs: LoggerProvider) -> Callable[[], None]:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor.uninstrument


def _openinference_tool(
    provider: TracerProvider, name: str, call_id: str, search: Search, query: str
) -> str:
    """A TOOL span as OpenInference's spec writes one: ``tool.name``, ``output.value``."""
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span(
        name, record_exception=False, set_status_on_exception=False
    ) as span:
        span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OI_KIND_TOOL)
        span.set_attribute(semconv.OI_TOOL_NAME, name)
        span.set_attribute(semconv.OI_INPUT_VALUE, json.dumps({"query": query}))
        try:
            result = search(query)
        except ToolFailed as exc:
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
        span.set_attribute(semconv.OI_OUTPUT_VALUE, result)
        return result


def _wrapped_methods() -> set[tuple[type, str]]:
    """The methods of the ``openai`` client's resource classes that a wrapper replaced."""
    import importlib
    import pkgutil

    import openai.resources

    found: set[tuple[type, str]] = set()
    for info in pkgutil.walk_packages(openai.resources.__path__, "openai.resources."):
        module = importlib.import_module(info.name)
        for owner in vars(module).values():
            if isinstance(owner, type) and owner.__module__ == info.name:
                for name, value in vars(owner).items():
                    # A wrapt proxy, whichever copy of wrapt made it (not a plain function,
                    # nor the static and class methods that also expose __wrapped__).
                    if "Wrapper" in type(value).__name__ and hasattr(value, "__wrapped__"):
                        found.add((owner, name))
    return found


def _openllmetry(
    provider: TracerProvider, logs: LoggerProvider, *, events: bool = False
) -> Callable[[], None]:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.instrumentation.openai.shared.config import Config

    before = _wrapped_methods()
    # use_attributes=False: its messages as log events (gen_ai.*.message, gen_ai.choice).
    instrumentor = OpenAIInstrumentor(use_attributes=not events)
    instrumentor.instrument(tracer_provider=provider, logger_provider=logs)

    def uninstrument() -> None:
        instrumentor.uninstrument()
        # Its uninstrument leaves the chat methods wrapped (their wrapper suppresses other
        # instrumentations' spans): restore what it wrapped, so the next test starts clean.
        for owner, name in _wrapped_methods() - before:
            setattr(owner, name, getattr(owner, name).__wrapped__)
        Config.use_legacy_attributes = True  # a process-wide setting: back to its default

    return uninstrument


def _genai(provider: TracerProvider, logs: LoggerProvider) -> Callable[[], None]:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.util.genai import handler

    def forget_handler() -> None:
        # util-genai keeps one handler per process, bound to the first tracer provider it
        # was given: a later test's provider would never see the model's spans.
        if hasattr(handler.get_telemetry_handler, "_default_handler"):
            delattr(handler.get_telemetry_handler, "_default_handler")

    forget_handler()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider, logger_provider=logs)

    def uninstrument() -> None:
        instrumentor.uninstrument()
        forget_handler()

    return uninstrument


def _genai_tool(
    provider: TracerProvider, name: str, call_id: str, search: Search, query: str
) -> str:
    """An ``execute_tool`` span made by opentelemetry-util-genai's handler (which writes the
    tool's name and call id, not its result: the result is read from the next chat call)."""
    from opentelemetry.util.genai.handler import TelemetryHandler

    handler = TelemetryHandler(tracer_provider=provider)
    with handler.tool(name, tool_call_id=call_id, arguments={"query": query}) as invocation:
        result = search(query)
        invocation.tool_result = result
        return result


_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
_LATEST = "gen_ai_latest_experimental"
GENAI_MODES: dict[str, dict[str, str | None]] = {
    # What its README shows first: every message a log event, nothing on the span.
    "genai-events": {_CAPTURE: "true", _OPT_IN: None},
    "genai": {_CAPTURE: "SPAN_ONLY", _OPT_IN: _LATEST},
    "genai-event_only": {_CAPTURE: "EVENT_ONLY", _OPT_IN: _LATEST},
    "genai-span_and_event": {_CAPTURE: "SPAN_AND_EVENT", _OPT_IN: _LATEST},
}
"""The GenAI instrumentation in each of its content modes, by the name the tests use."""


def _genai_mode(name: str, env: dict[str, str | None]) -> Instrumentation:
    # opentelemetry-instrumentation-openai-v2 records no tool definitions: the agent's
    # root is the convention's invoke_agent span (what util-genai's AgentInvocation writes).
    return Instrumentation(
        name,
        _genai,
        semconv.GEN_AI_CONVERSATION_ID,
        _genai_tool,
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_INVOKE_AGENT,
            "gen_ai.agent.name": "support",
        },
        env,
    )


INSTRUMENTATIONS = {
    "openinference": Instrumentation(
        "openinference", _openinference, semconv.OI_SESSION_ID, _openinference_tool
    ),
    "openllmetry": Instrumentation("openllmetry", _openllmetry, semconv.GEN_AI_CONVERSATION_ID),
    "openllmetry-events": Instrumentation(
        "openllmetry-events",
        functools.partial(_openllmetry, events=True),
        semconv.GEN_AI_CONVERSATION_ID,
    ),
    **{name: _genai_mode(name, env) for name, env in GENAI_MODES.items()},
}


def _read_semconv_opt_in() -> None:
    """Make OpenTelemetry read ``OTEL_SEMCONV_STABILITY_OPT_IN`` again: it reads it once per
    process, so whichever instrumented test ran first would decide for all the others."""
    from opentelemetry.instrumentation._semconv import (
        _OpenTelemetrySemanticConventionStability as stability,
    )

    with stability._lock:
        stability._initialized = False
    stability._initialize()


@contextlib.contextmanager
def instrumented(
    which: str, provider: TracerProvider, logs: LoggerProvider | None = None
) -> Iterator[Instrumentation]:
    """``which`` instrumenting the ``openai`` client on ``provider`` for the block, its log
    events (if it writes any) on ``logs``."""
    instrumentation = INSTRUMENTATIONS[which]
    env = instrumentation.env or GENAI_MODES["genai"]
    saved = {key: os.environ.get(key) for key in env}
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    _read_semconv_opt_in()
    uninstrument = instrumentation.instrument(provider, logs or LoggerProvider())
    try:
        yield instrumentation
    finally:
        uninstrument()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _read_semconv_opt_in()


def run_turn(
    client: Any,
    provider: TracerProvider,
    instrumentation: Instrumentation,
    history: list[dict[str, Any]],
    question: str,
    search: Search,
    *,
    conversation: str | None = None,
    max_steps: int = 4,
) -> str:
    """One user turn of the agent, under its own root span; ``history`` grows with it."""
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("agent turn", attributes=instrumentation.root) as root:
        if conversation is not None:
            root.set_attribute(instrumentation.conversation_key, conversation)
        return _answer(client, provider, instrumentation, history, question, search, max_steps)


def run_session(
    client: Any,
    provider: TracerProvider,
    instrumentation: Instrumentation,
    turns: list[tuple[str, Search]],
    *,
    conversation: str | None = None,
    max_steps: int = 4,
) -> list[str]:
    """Several user turns under one root span (``agent session``), the conversation carried
    from turn to turn, as a chat loop serving one user does; the answers, in order."""
    tracer = provider.get_tracer("agent")
    history: list[dict[str, Any]] = []
    with tracer.start_as_current_span("agent session", attributes=instrumentation.root) as root:
        if conversation is not None:
            root.set_attribute(instrumentation.conversation_key, conversation)
        return [
            _answer(client, provider, instrumentation, history, question, search, max_steps)
            for question, search in turns
        ]


def _answer(
    client: Any,
    provider: TracerProvider,
    instrumentation: Instrumentation,
    history: list[dict[str, Any]],
    question: str,
    search: Search,
    max_steps: int,
) -> str:
    """The agent's loop for one question: ask with the tool offered; while the model asks
    for tools, run them and hand their results back; its answer goes to the user."""
    history.append({"role": "user", "content": question})
    for _ in range(max_steps):
        response = client.chat.completions.create(
            model="ragpulse-test-model", messages=history, tools=[SEARCH_TOOL]
        )
        message = response.choices[0].message
        history.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return str(message.content)
        for call in message.tool_calls:
            query = json.loads(call.function.arguments).get("query", "")
            try:
                if instrumentation.tool_span is not None:
                    result = instrumentation.tool_span(
                        provider, call.function.name, call.id, search, query
                    )
                else:
                    result = search(query)
            except ToolFailed as exc:
                result = json.dumps({"error": str(exc)})
            history.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("the agent did not answer within its steps")


def require(module: str) -> Any:
    """Import ``module``; skip without it on a developer machine, fail in CI."""
    if os.environ.get("CI"):
        return __import__(module, fromlist=["_"])
    return pytest.importorskip(module)


def search_warranty(query: str) -> str:
    """The evidence tool: the product's warranty."""
    return WARRANTY


def search_down(query: str) -> str:
    """The evidence tool while its backend is down."""
    raise ToolFailed("search backend unavailable")


def lookup(call_id: str = "call_warranty", query: str = "X200 warranty") -> Reply:
    """The model's turn that calls the search tool."""
    return Reply.calls(ToolCall("search_docs", {"query": query}, id=call_id))


WATER_QUESTION = "Does the X200 warranty cover water damage?"


def search_both(query: str) -> str:
    """The evidence tool that knows the warranty and what it leaves out."""
    return WATER if "water" in query else WARRANTY
