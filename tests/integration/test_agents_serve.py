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
    CONTRADICTED,
    FOLLOW_UP,
    FORGED_ANSWER,
    GENAI_MODES,
    GROUNDED,
    MADE_UP,
    QUESTION,
    RESTATED,
    WARRANTY,
    WATER_QUESTION,
    decorated_agent,
    forged_history,
    instrumented,
    lookup,
    require,
    run_session,
    run_turn,
    search_both,
    search_down,
    search_forged_fact,
    search_warranty,
)
from tests.servers.chat_server import ChatServer, Reply
from tests.unit.test_semconv_names import DEFINED, WRITTEN_EXCEPTIONS

from ragpulse import errors, semconv
from ragpulse.evaluation.diagnosis import TOOL_FAILURE, UNVOUCHED_HISTORY
from servers.serve_process import (
    ExportedSpan,
    ServeProcess,
    log_records,
    otlp_documents,
    read_spans,
)

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


def test_decorated_agent_turns_sent_to_serve_are_judged_on_their_tool_results_and_history(
    serve: ServeProcess, route_spans: Any
) -> None:
    # The app has ragpulse's decorators and an OTLP exporter, no evaluating processor.
    route_spans(SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")))
    conversations = {
        "grounded": [(QUESTION, search_warranty, (lookup(), Reply.text(GROUNDED)))],
        "made_up": [(QUESTION, search_warranty, (lookup(), Reply.text(MADE_UP)))],
        "failed": [(QUESTION, search_down, (lookup(), Reply.text(MADE_UP)))],
        "restated": [
            (QUESTION, search_warranty, (lookup(), Reply.text(GROUNDED))),
            (FOLLOW_UP, search_warranty, (Reply.text(RESTATED),)),
        ],
        "contradicted": [
            (QUESTION, search_warranty, (lookup(), Reply.text(GROUNDED))),
            (FOLLOW_UP, search_warranty, (Reply.text(CONTRADICTED),)),
        ],
        # A history result no @tool returned (the client wrote it), and the same one returned.
        "forged": [(DAMAGE_FOLLOW_UP, search_warranty, (Reply.text(FORGED_ANSWER),))],
        "vouched": [
            (QUESTION, search_forged_fact, (lookup(), Reply.text(FORGED_ANSWER))),
            (DAMAGE_FOLLOW_UP, search_warranty, (Reply.text(FORGED_ANSWER),)),
        ],
    }
    with ChatServer() as server:
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        for name, turns in conversations.items():
            history: list[dict[str, Any]] = forged_history() if name == "forged" else []
            for question, search, replies in turns:
                server.script(*replies)
                decorated_agent(client, search)(question, f"serve-decorated-{name}", history)
    expected = sum(len(turns) for turns in conversations.values())

    def units(spans: list[ExportedSpan]) -> dict[str, list[ExportedSpan]]:
        found: dict[str, list[ExportedSpan]] = {}
        for span in spans:
            conversation = str(span.attributes.get(semconv.GEN_AI_CONVERSATION_ID, ""))
            if span.name == "support agent" and span.attributes.get(semconv.EVAL_STATUS):
                found.setdefault(conversation.removeprefix("serve-decorated-"), []).append(span)
        return {name: sorted(found[name], key=lambda s: s.start) for name in found}

    spans = serve.wait_for_spans(lambda spans: sum(map(len, units(spans).values())) == expected)
    scored = {name: [s.attributes for s in found] for name, found in units(spans).items()}
    [grounded], [made_up], [failed] = scored["grounded"], scored["made_up"], scored["failed"]
    assert grounded["ragpulse.eval.faithfulness.score"] == 1.0
    cited = {c["context_id"] for c in json.loads(grounded[semconv.EVAL_CLAIMS])}
    assert cited == {"call_warranty"}
    assert made_up["ragpulse.eval.faithfulness.score"] < 0.5
    assert failed[semconv.EVAL_DIAGNOSIS] == TOOL_FAILURE
    # The follow-ups are judged on the first turn's tool result, carried in their history.
    restated, contradicted = scored["restated"][1], scored["contradicted"][1]
    assert restated["ragpulse.eval.faithfulness.score"] == 1.0
    assert contradicted["ragpulse.eval.faithfulness.score"] < 0.5
    assert contradicted[semconv.EVAL_DIAGNOSIS] == "generation_drift"
    [forged] = scored["forged"]
    assert forged["ragpulse.eval.faithfulness.score"] == 0.0
    assert forged[semconv.EVAL_DIAGNOSIS] == UNVOUCHED_HISTORY
    assert scored["vouched"][1]["ragpulse.eval.faithfulness.score"] == 1.0


@pytest.mark.parametrize("content", [True, False], ids=["content", "no-content"])
def test_every_gen_ai_name_serve_writes_is_defined_by_the_conventions(
    content: bool, route_spans: Any, tmp_path: Path
) -> None:
    # Serve's own content policy (the app exports its texts, or there is nothing to judge).
    env = {} if content else {"RAGPULSE_CAPTURE_CONTENT": "false"}
    turns = [
        (QUESTION, search_warranty, (lookup(), Reply.text(GROUNDED))),
        (FOLLOW_UP, search_warranty, (Reply.text(RESTATED),)),
        (QUESTION, search_down, (lookup(), Reply.text(MADE_UP))),
    ]
    with ServeProcess(tmp_path, "--sample-rate", "1", env=env) as serve:
        exporter = HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces")
        route_spans(SimpleSpanProcessor(exporter))
        with ChatServer() as server:
            client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
            history: list[dict[str, Any]] = []
            for question, search, replies in turns:
                server.script(*replies)
                decorated_agent(client, search)(question, "serve-names", history)

        def scored(spans: list[ExportedSpan]) -> int:
            return sum(
                1
                for span in spans
                if span.name == "support agent" and span.attributes.get(semconv.EVAL_STATUS)
            )

        serve.wait_for_spans(lambda spans: scored(spans) == len(turns))
    # Stopped: its log events and metrics are written out.

    written: dict[str, str] = {}
    for span in read_spans(serve.output_file):
        for key in span.attributes:
            written.setdefault(key, f"attribute of span {span.name!r}")
        for event in span.events:
            written.setdefault(event.get("name", ""), "span event name")
    for record in log_records(tmp_path / "serve-logs.jsonl"):
        written.setdefault(record.get("eventName", ""), "log event name")
        for attribute in record.get("attributes", []):
            written.setdefault(attribute["key"], "attribute of a log event")
    for document in otlp_documents(tmp_path / "serve-metrics.jsonl"):
        for resource in document.get("resourceMetrics", []):
            for scope in resource.get("scopeMetrics", []):
                for metric in scope.get("metrics", []):
                    written.setdefault(metric["name"], "metric name")
                    for kind in ("histogram", "sum", "gauge"):
                        for point in metric.get(kind, {}).get("dataPoints", []):
                            for attribute in point.get("attributes", []):
                                written.setdefault(attribute["key"], f"point of {metric['name']}")
    outside = {
        name: where
        for name, where in written.items()
        if name.startswith("gen_ai.") and name not in DEFINED and name not in WRITTEN_EXCEPTIONS
    }
    assert outside == {}
    assert semconv.GEN_AI_EVALUATION_RESULT_EVENT in written
    assert semconv.EVALUATION_SCORE_METRIC in written


DAMAGE_FOLLOW_UP = "And does it cover accidental damage?"


def _send_turns(
    serve: ServeProcess,
    which: str,
    conversation: str,
    turns: list[tuple[str, list[dict[str, Any]], Any, tuple[Reply, ...]]],
) -> list[dict[str, Any]]:
    """Send each turn (question, the history the client sends, the tool, the model's replies)
    as its own trace; the scored root spans' attributes, in the order sent."""
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces"))
    )
    with ChatServer() as server, instrumented(which, provider) as instrumentation:
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        history: list[dict[str, Any]] = []
        for question, sent, search, replies in turns:
            server.script(*replies)
            history.extend(sent)
            run_turn(
                client, provider, instrumentation, history, question, search,
                conversation=conversation,
            )  # fmt: skip
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
    return [s.attributes for s in sorted(units(spans), key=lambda s: s.start)]


@pytest.mark.parametrize("which", ["openinference", "genai"])
def test_a_forged_history_result_sent_to_serve_does_not_ground_a_made_up_answer(
    which: str, serve: ServeProcess
) -> None:
    forged = (DAMAGE_FOLLOW_UP, forged_history(), search_warranty, (Reply.text(FORGED_ANSWER),))

    [unit] = _send_turns(serve, which, f"serve-forged-{which}", [forged])

    assert unit["ragpulse.eval.faithfulness.score"] == 0.0
    assert unit[semconv.EVAL_DIAGNOSIS] == UNVOUCHED_HISTORY


@pytest.mark.parametrize("which", ["openinference", "genai"])
def test_a_history_result_serve_saw_a_tool_return_grounds_the_later_answer(
    which: str, serve: ServeProcess
) -> None:
    real = (QUESTION, [], search_forged_fact, (lookup(), Reply.text(FORGED_ANSWER)))
    follow_up = (DAMAGE_FOLLOW_UP, [], search_warranty, (Reply.text(FORGED_ANSWER),))

    _, second = _send_turns(serve, which, f"serve-vouched-{which}", [real, follow_up])

    assert second["ragpulse.eval.faithfulness.score"] == 1.0


def test_serve_trusting_history_counts_an_unvouched_result(tmp_path: Path) -> None:
    forged = (DAMAGE_FOLLOW_UP, forged_history(), search_warranty, (Reply.text(FORGED_ANSWER),))
    env = {"RAGPULSE_TRUST_HISTORY": "true"}
    with ServeProcess(tmp_path, "--sample-rate", "1", env=env) as trusting:
        [unit] = _send_turns(trusting, "openinference", "serve-trusted", [forged])

    assert unit["ragpulse.eval.faithfulness.score"] == 1.0


def test_an_agent_trace_of_ten_thousand_tool_spans_is_judged_by_serve_as_in_process(
    serve: ServeProcess,
) -> None:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(
            HttpSpanExporter(endpoint=f"{serve.http_endpoint}/v1/traces"),
            max_queue_size=20_000,
            max_export_batch_size=512,
        )
    )
    tracer = provider.get_tracer("agent")
    results = [f"Shelf {i} holds spare parts." for i in range(9_999)] + [WARRANTY]
    with tracer.start_as_current_span(
        "big agent turn", attributes={"openinference.span.kind": "AGENT"}
    ):
        for result in results:
            with tracer.start_as_current_span(
                "execute_tool search_docs",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search_docs",
                    "gen_ai.tool.call.result": result,
                },
            ):
                pass
        with tracer.start_as_current_span(
            "ChatCompletion",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": QUESTION,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": GROUNDED,
            },
        ):
            pass
    provider.shutdown()

    def scored(spans: list[ExportedSpan]) -> list[ExportedSpan]:
        return [
            s for s in spans if s.name == "big agent turn" and s.attributes.get(semconv.EVAL_STATUS)
        ]

    spans = serve.wait_for_spans(lambda spans: bool(scored(spans)))
    [unit] = scored(spans)
    assert unit.attributes[semconv.EVAL_STATUS] == "ok"
    assert unit.attributes["ragpulse.eval.faithfulness.score"] == 1.0
