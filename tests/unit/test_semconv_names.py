"""Every ``gen_ai.*`` name ragpulse writes is one the OpenTelemetry semantic conventions define.

The names are collected from what ragpulse actually writes: spans, span events, log events
and metric points of decorated requests (a RAG request and a tool-calling agent's turns, a
tool that fails, with content capture on and off, in both content conventions) evaluated by
the real processor, and of a third-party agent trace read by the adapters. Each must be
defined by the ``opentelemetry-semantic-conventions`` package installed with the SDK, or be
one of the few names the specification's text defines and the package does not yet
(``docs/conventions.md`` lists them, each with the text that defines it). What is ragpulse's
own lives under ``ragpulse.*``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import opentelemetry.semconv
import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragpulse
from ragpulse import semconv
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.settings import Settings

CONVENTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "conventions.md"
WARRANTY = "The X200 comes with a 2-year limited warranty that covers parts and labour."


def _defined_by_the_package() -> set[str]:
    """Every name the installed semantic-conventions package defines: its attributes and
    metrics, stable and incubating."""
    names: set[str] = set()
    for folder in ("attributes", "metrics", "_incubating.attributes", "_incubating.metrics"):
        # Namespace packages: their modules are listed from their folders.
        package = importlib.import_module(f"{opentelemetry.semconv.__name__}.{folder}")
        for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            names.update(
                value
                for key, value in vars(module).items()
                if key.isupper() and isinstance(value, str) and "." in value
            )
    return names


DEFINED = _defined_by_the_package()


def _documented_exceptions() -> dict[str, bool]:
    """The names of ``docs/conventions.md``'s table of what the specification defines and the
    package does not yet, each with whether ragpulse writes it (or only reads it)."""
    text = CONVENTIONS_PAGE.read_text(encoding="utf-8")
    section = text.split("## Defined by the specification, not yet by the package", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(gen_ai\.[^`]+)` \| [^|]+ \| (yes|no)\b", section, flags=re.M)
    return {name: written == "yes" for name, written in rows}


DOCUMENTED = _documented_exceptions()
EXCEPTIONS = set(DOCUMENTED)
"""Names the specification's text defines and the package does not yet."""
WRITTEN_EXCEPTIONS = {name for name, written in DOCUMENTED.items() if written}
"""Those of them ragpulse writes (the others it only reads from other instrumentations)."""


@pytest.fixture(autouse=True)
def _default_policy() -> Iterator[None]:
    yield
    set_policy(ContentPolicy())


class _Telemetry:
    """A processor built as configure() builds it, with in-memory spans, logs and metrics."""

    def __init__(self, route_spans: Any) -> None:
        self.spans = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.metrics = InMemoryMetricReader()
        self.processor = route_spans(
            EvaluatingSpanProcessor.from_settings(
                SimpleSpanProcessor(self.spans),
                Settings.load({"sample_rate": 1.0}),
                meter_provider=MeterProvider(metric_readers=[self.metrics]),
                logger_provider=logger_provider,
            )
        )

    def names(self) -> dict[str, str]:
        """Every name written, with where it was seen."""
        assert self.processor.force_flush(60_000)
        found: dict[str, str] = {}
        for span in self.spans.get_finished_spans():
            _span_names(span, found)
        for record in self.logs.get_finished_logs():
            log = record.log_record
            if log.event_name:
                found.setdefault(log.event_name, "log event name")
            for key in log.attributes or {}:
                found.setdefault(key, f"attribute of log event {log.event_name}")
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, "metric name")
                    for point in metric.data.data_points:
                        for key in point.attributes or {}:
                            found.setdefault(key, f"point attribute of {metric.name}")
        return found


def _span_names(span: ReadableSpan, found: dict[str, str]) -> None:
    for key in span.attributes or {}:
        found.setdefault(key, f"attribute of span {span.name!r}")
    for event in span.events:
        found.setdefault(event.name, "span event name")
        for key in event.attributes or {}:
            found.setdefault(key, f"attribute of span event {event.name}")


@ragpulse.retrieval
def _search(query: str) -> list[dict[str, Any]]:
    return [{"id": "warranty", "score": 0.9, "content": WARRANTY}]


@ragpulse.tool
def _search_docs(query: str, tool_call_id: str | None = None) -> str:
    return WARRANTY


@ragpulse.tool
def _rate_limited(query: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "rate limited"}], "isError": True}


@ragpulse.tool
def _broken(query: str) -> str:
    raise RuntimeError("index offline")


@ragpulse.generation(model="test-model", system="openai")
def _chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "choices": [
            {
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": messages[-1]["answer"]},
            }
        ],
    }


@ragpulse.rag(name="support")
def _rag(question: str, conversation_id: str) -> str:
    _search(question)
    return str(_chat([{"role": "user", "content": question, "answer": WARRANTY}]))


@ragpulse.rag(name="agent")
def _agent(question: str, conversation_id: str, history: list[dict[str, Any]]) -> str:
    _search_docs(question, tool_call_id="call_1")
    _rate_limited(question)
    with contextlib.suppress(RuntimeError):
        _broken(question)
    history += [
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "function": {"name": "search_docs", "arguments": '{"q": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": WARRANTY},
    ]
    answer = _chat([*history, {"role": "user", "content": "", "answer": "2 years."}])
    ragpulse.record_answer("The X200 comes with a 2-year limited warranty.")
    return str(answer)


def _run_everything() -> None:
    for question in ("What warranty does the X200 have?", "And for parts?"):
        _rag(question, "conv-1")
        _agent(question, "conv-2", [])


def _genai_agent_trace(provider: TracerProvider) -> None:
    """A third-party agent's trace in the GenAI conventions, read by the adapters."""
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span(
        "invoke_agent support",
        attributes={
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_INVOKE_WORKFLOW,
            semconv.GEN_AI_CONVERSATION_ID: "conv-3",
        },
    ):
        with tracer.start_as_current_span(
            "execute_tool search_docs",
            attributes={
                semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_EXECUTE_TOOL,
                semconv.GEN_AI_TOOL_NAME: "search_docs",
                semconv.GEN_AI_TOOL_CALL_ID: "call_9",
                semconv.GEN_AI_TOOL_CALL_RESULT: WARRANTY,
            },
        ):
            pass
        output = [{"role": "assistant", "parts": [{"type": "text", "content": "2 years."}]}]
        with tracer.start_as_current_span(
            "chat model",
            attributes={
                semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_CHAT,
                semconv.GEN_AI_RESPONSE_ID: "chatcmpl-9",
                semconv.GEN_AI_INPUT_MESSAGES: json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "Warranty?"}]}]
                ),
                semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(output),
            },
        ):
            pass


@pytest.mark.parametrize(
    "policy",
    [
        ContentPolicy(),
        ContentPolicy(capture_content=False, hash_key="k"),
        ContentPolicy(conventions=("genai", "openinference")),
        ContentPolicy(capture_content=False, conventions=("genai", "openinference")),
    ],
    ids=["content", "no-content", "both-conventions", "both-no-content"],
)
def test_every_gen_ai_name_ragpulse_writes_is_defined_by_the_conventions(
    route_spans: Any, policy: ContentPolicy
) -> None:
    set_policy(policy)
    telemetry = _Telemetry(route_spans)
    _run_everything()
    provider = TracerProvider()
    provider.add_span_processor(telemetry.processor)
    _genai_agent_trace(provider)

    written = telemetry.names()
    outside = {
        name: where
        for name, where in written.items()
        if name.startswith("gen_ai.") and name not in DEFINED and name not in WRITTEN_EXCEPTIONS
    }
    assert outside == {}
    # What was run wrote what this test is about.
    assert semconv.GEN_AI_EVALUATION_RESULT_EVENT in written
    assert semconv.GEN_AI_RESPONSE_ID in written
    assert semconv.EVALUATION_SCORE_METRIC in written


def test_without_content_a_withheld_text_is_named_under_ragpulse(route_spans: Any) -> None:
    set_policy(ContentPolicy(capture_content=False, hash_key="k"))
    telemetry = _Telemetry(route_spans)
    _run_everything()

    written = telemetry.names()
    for name in (
        "ragpulse.input.messages.length",
        "ragpulse.output.messages.length",
        "ragpulse.output.messages.hmac_sha256",
        "ragpulse.tool.call.result.length",
        "ragpulse.tool.call.arguments.length",
    ):
        assert name in written
    assert not any(
        name.endswith((semconv.SUFFIX_LENGTH, semconv.SUFFIX_HMAC_SHA256))
        and not name.startswith("ragpulse.")
        for name in written
    )


def test_each_documented_exception_is_one_the_package_does_not_define_yet() -> None:
    # When the package catches up, the name leaves the list.
    assert EXCEPTIONS
    assert EXCEPTIONS.isdisjoint(DEFINED)


def test_every_gen_ai_constant_of_semconv_is_defined_or_a_documented_exception() -> None:
    """The names ragpulse reads from other instrumentations too: a name in ``semconv`` that
    the conventions do not know is a typo or a name of ragpulse's own in their namespace."""
    names = {
        value
        for key, value in vars(semconv).items()
        if key.isupper()
        and not key.startswith("_")
        and isinstance(value, str)
        and value.startswith("gen_ai.")
    }
    assert sorted(names - DEFINED - EXCEPTIONS) == []
