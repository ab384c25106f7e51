"""The agent traces of ``test_agents.py`` sent to ``ragpulse serve`` over OTLP: the app has
no ragpulse in it, only its instrumentation and an OTLP exporter; serve reads the agent's
tool results as evidence and writes the scores onto the agent turn's root span."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from tests.integration.agents import (
    GENAI_MODES,
    GROUNDED,
    MADE_UP,
    QUESTION,
    WATER_QUESTION,
    instrumented,
    lookup,
    require,
    run_session,
    run_turn,
    search_both,
    search_down,
    search_warranty,
)
from tests.servers.chat_server import ChatServer, Reply

from ragpulse import errors, semconv
from ragpulse.evaluation.diagnosis import TOOL_FAILURE
from servers.serve_process import ExportedSpan, ServeProcess

pytestmark = pytest.mark.integration


openai = require("openai")
require("openinference.instrumentation.openai")
require("opentelemetry.instrumentation.openai")
require("opentelemetry.instrumentation.openai_v2")


INSTRUMENTATIONS = ["openinference", "openllmetry", "openllmetry-events", *GENAI_MODES]
"""As in process: the GenAI instrumentation in each of its content modes, its log events
sent to serve's OTLP logs intake beside its spans."""


def _app(serve: ServeProcess) -> tuple[TracerProvider, LoggerProvider]:
    """The app's providers: spans and log records to serve over OTLP/HTTP, as they end."""
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces"))
    )
    logs = LoggerProvider()
    logs.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{serve.http_endpoint}/v1/logs"))
    )
    return provider, logs


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with ServeProcess(tmp_path_factory.mktemp("serve"), "--sample-rate", "1") as serve:
        yield serve


@pytest.mark.parametrize("which", INSTRUMENTATIONS)
def test_agent_turns_sent_to_serve_are_judged_on_their_tool_results(
    which: str, serve: ServeProcess, tmp_path: Path
) -> None:
    provider, logs = _app(serve)
    conversation = f"serve-{which}"
    turns = [
        ("grounded", search_warranty, (lookup(), Reply.text(GROUNDED))),
        ("made_up", search_warranty, (lookup(), Reply.text(MADE_UP))),
        ("failed", search_down, (lookup(), Reply.text(MADE_UP))),
        ("no_evidence", search_warranty, (Reply.text(MADE_UP),)),
    ]
    if which == "openllmetry-events":
        # Its events record no tools offered: an answer without a tool call is no agent's.
        turns.pop()
    with ChatServer() as server, instrumented(which, provider, logs) as instrumentation:
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        for _, search, replies in turns:
            server.script(*replies)
            history: list[dict[str, Any]] = []
            run_turn(
                client, provider, instrumentation, history, QUESTION, search,
                conversation=conversation,
            )  # fmt: skip
    logs.shutdown()
    provider.shutdown()

    def units(spans: list[ExportedSpan]) -> list[ExportedSpan]:
        return [
            s
            for s in spans
            if s.name == "agent turn"
            and s.attributes.get(semconv.GEN_AI_CONVERSATION_ID) == conversation
            and s.attributes.get(semconv.EVAL_STATUS)
        ]

    spans = serve.wait_for_spans(lambda spans: len(units(spans)) == len(turns))
    by_start = sorted(units(spans), key=lambda s: s.start)
    grounded, made_up, failed, *rest = (s.attributes for s in by_start)

    assert grounded[semconv.EVAL_STATUS] == "ok"
    assert grounded["ragpulse.eval.faithfulness.score"] == 1.0
    cited = {c["context_id"] for c in json.loads(grounded[semconv.EVAL_CLAIMS])}
    assert cited == {"call_warranty"}
    assert made_up["ragpulse.eval.faithfulness.score"] < 0.5
    assert failed[semconv.EVAL_DIAGNOSIS] == TOOL_FAILURE
    for no_evidence in rest:
        assert no_evidence[semconv.EVAL_STATUS] == "skipped"
        assert no_evidence[semconv.EVAL_ERROR_TYPE] == errors.NO_EVIDENCE


@pytest.mark.parametrize("which", INSTRUMENTATIONS)
def test_two_user_turns_under_one_root_sent_to_serve_are_two_units(
    which: str, serve: ServeProcess
) -> None:
    provider, logs = _app(serve)
    conversation = f"serve-session-{which}"
    made_up = "Yes, water damage is covered by a 5-year warranty."
    with ChatServer() as server, instrumented(which, provider, logs) as instrumentation:
        server.script(
            lookup(),
            Reply.text(GROUNDED),
            lookup("call_water", "X200 water damage"),
            Reply.text(made_up),
        )
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        run_session(
            client, provider, instrumentation,
            [(QUESTION, search_both), (WATER_QUESTION, search_both)],
            conversation=conversation,
        )  # fmt: skip
    logs.shutdown()
    provider.shutdown()

    def scored(spans: list[ExportedSpan]) -> list[ExportedSpan]:
        roots = {s.trace_id for s in spans if s.name == "agent session"}
        return [
            s
            for s in spans
            if s.trace_id in roots
            and s.attributes.get(semconv.GEN_AI_CONVERSATION_ID) == conversation
            and s.attributes.get(semconv.EVAL_STATUS)
        ]

    spans = serve.wait_for_spans(lambda spans: len(scored(spans)) == 2)
    [root] = [s for s in scored(spans) if s.name == "agent session"]
    [first] = [s for s in scored(spans) if s is not root]
    # The first answer on the model call that gave it, the second on the root, as in process.
    assert first.parent_span_id == root.span_id
    assert first.attributes["ragpulse.eval.faithfulness.score"] == 1.0
    cited = {c["context_id"] for c in json.loads(first.attributes[semconv.EVAL_CLAIMS])}
    assert cited == {"call_warranty"}
    assert root.attributes["ragpulse.eval.faithfulness.score"] < 0.5
    # Every span of the session once, the scores on the spans themselves (no carrier).
    session = [s for s in spans if s.trace_id == root.trace_id]
    assert len({s.span_id for s in session}) == len(session)
    assert all(s.name != "ragpulse.evaluation" for s in session)
