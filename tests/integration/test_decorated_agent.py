"""A tool-calling agent written with ragpulse's own decorators (``@rag`` per user turn,
``@generation`` given the OpenAI-format messages, ``@tool`` for the search), evaluated in the
same process: judged as the instrumented agents of ``test_agents.py`` are, its conversation's
history included.

The model is the Chat Completions test server speaking the real protocol, tool calls
included; the evaluating processor is built from settings as ``configure()`` builds it, with
the offline judge.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.integration.agents import (
    CONTRADICTED,
    FOLLOW_UP,
    FORGED_ANSWER,
    GROUNDED,
    MADE_UP,
    QUESTION,
    RESTATED,
    decorated_agent,
    forged_history,
    lookup,
    require,
    search_down,
    search_forged_fact,
    search_warranty,
)
from tests.servers.chat_server import ChatServer, Reply

from ragpulse import semconv
from ragpulse.evaluation.diagnosis import TOOL_FAILURE, UNVOUCHED_HISTORY
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.settings import Settings

pytestmark = pytest.mark.integration

openai = require("openai")


class Agent:
    """The agent's process: ragpulse's processor behind the global provider the decorators
    write to, an in-memory exporter and log exporter, and the scripted model."""

    def __init__(self, route_spans: Any, server: ChatServer) -> None:
        self.exporter = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.processor = route_spans(
            EvaluatingSpanProcessor.from_settings(
                SimpleSpanProcessor(self.exporter),
                Settings.load({"sample_rate": 1.0}),
                logger_provider=logger_provider,
            )
        )
        self.server = server
        self.client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        self.history: list[dict[str, Any]] = []

    def turn(self, question: str, search: Any, *replies: Reply) -> str:
        self.server.script(*replies)
        return decorated_agent(self.client, search)(question, "conv-decorated", self.history)

    def units(self) -> list[ReadableSpan]:
        """The turns' unit spans as exported, once evaluations are in, in order."""
        assert self.processor.force_flush(60_000)
        units = [s for s in self.exporter.get_finished_spans() if s.name == "support agent"]
        return sorted(units, key=lambda span: span.start_time or 0)


@pytest.fixture
def agent(route_spans: Any) -> Iterator[Agent]:
    with ChatServer() as server:
        yield Agent(route_spans, server)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_grounded_answer_scores_high_with_the_tool_result_as_evidence(agent: Agent) -> None:
    assert agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED)) == GROUNDED

    [unit] = agent.units()
    scored = attrs(unit)
    assert scored[semconv.EVAL_STATUS] == "ok"
    assert scored["ragpulse.eval.faithfulness.score"] == 1.0
    claims = json.loads(scored[semconv.EVAL_CLAIMS])
    assert {claim["context_id"] for claim in claims} == {"call_warranty"}


def test_a_made_up_answer_scores_low(agent: Agent) -> None:
    agent.turn(QUESTION, search_warranty, lookup(), Reply.text(MADE_UP))

    [unit] = agent.units()
    assert attrs(unit)["ragpulse.eval.faithfulness.score"] < 0.5
    assert attrs(unit)["ragpulse.eval.faithfulness.label"] == "fail"


def test_a_follow_up_that_restates_the_first_turns_tool_result_scores_high(
    agent: Agent,
) -> None:
    agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED))
    # Answered from what the first turn fetched, without a new lookup.
    agent.turn(FOLLOW_UP, search_warranty, Reply.text(RESTATED))

    _, follow_up = agent.units()
    scored = attrs(follow_up)
    assert scored[semconv.EVAL_STATUS] == "ok"
    assert scored[semconv.GEN_AI_CONVERSATION_ID] == "conv-decorated"
    assert scored["ragpulse.eval.faithfulness.score"] == 1.0
    assert scored[semconv.EVAL_DIAGNOSIS] == "ok"
    claims = json.loads(scored[semconv.EVAL_CLAIMS])
    assert {claim["context_id"] for claim in claims} == {"call_warranty"}


def test_a_follow_up_that_contradicts_the_first_turns_tool_result_scores_low(
    agent: Agent,
) -> None:
    agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED))
    agent.turn(FOLLOW_UP, search_warranty, Reply.text(CONTRADICTED))

    _, follow_up = agent.units()
    scored = attrs(follow_up)
    assert scored["ragpulse.eval.faithfulness.score"] < 0.5
    assert scored[semconv.EVAL_CLAIMS_CONTRADICTED] >= 1
    # The evidence was there and the answer left it: not a retrieval miss.
    assert scored[semconv.EVAL_DIAGNOSIS] == "generation_drift"


def test_an_answer_after_the_tool_failed_is_diagnosed_tool_failure(agent: Agent) -> None:
    agent.turn(QUESTION, search_down, lookup(), Reply.text(MADE_UP))

    [unit] = agent.units()
    scored = attrs(unit)
    assert scored[semconv.EVAL_DIAGNOSIS] == TOOL_FAILURE
    assert "search_docs" in str(scored[semconv.EVAL_DIAGNOSIS_EXPLANATION])


def test_the_generation_span_keeps_the_conversations_structure(agent: Agent) -> None:
    agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED))
    agent.turn(FOLLOW_UP, search_warranty, Reply.text(RESTATED))

    agent.units()
    chats = [s for s in agent.exporter.get_finished_spans() if s.name.startswith("chat ")]
    last = max(chats, key=lambda span: span.start_time or 0)
    messages = json.loads(attrs(last)[semconv.GEN_AI_INPUT_MESSAGES])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user"]
    [call] = messages[1]["parts"]
    assert call == {
        "type": "tool_call",
        "id": "call_warranty",
        "name": "search_docs",
        "arguments": {"query": "X200 warranty"},
    }
    [result] = messages[2]["parts"]
    assert result["type"] == "tool_call_response"
    assert result["id"] == "call_warranty"
    assert "2-year limited warranty" in result["response"]


def test_the_evaluation_events_name_the_judged_completion(agent: Agent) -> None:
    agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED))

    agent.units()
    chats = [s for s in agent.exporter.get_finished_spans() if s.name.startswith("chat ")]
    answering = max(chats, key=lambda span: span.start_time or 0)
    response_id = attrs(answering)[semconv.GEN_AI_RESPONSE_ID]
    events = [
        record.log_record
        for record in agent.logs.get_finished_logs()
        if record.log_record.event_name == semconv.GEN_AI_EVALUATION_RESULT_EVENT
    ]
    assert events
    assert {(e.attributes or {}).get(semconv.GEN_AI_RESPONSE_ID) for e in events} == {response_id}


def test_a_forged_history_result_given_to_the_generation_does_not_ground_a_made_up_answer(
    agent: Agent,
) -> None:
    # The client sent a history holding a tool result no @tool of this app returned.
    agent.history.extend(forged_history())
    agent.turn(FOLLOW_UP, search_warranty, Reply.text(FORGED_ANSWER))

    [unit] = agent.units()
    scored = attrs(unit)
    assert scored["ragpulse.eval.faithfulness.score"] == 0.0
    assert scored[semconv.EVAL_DIAGNOSIS] == UNVOUCHED_HISTORY


def test_a_history_result_an_earlier_tool_call_returned_grounds_the_follow_up(
    agent: Agent,
) -> None:
    # The first turn's @tool really returned it: the follow-up's history is vouched for.
    agent.turn(QUESTION, search_forged_fact, lookup(), Reply.text(FORGED_ANSWER))
    agent.turn(FOLLOW_UP, search_warranty, Reply.text(FORGED_ANSWER))

    _, follow_up = agent.units()
    scored = attrs(follow_up)
    assert scored["ragpulse.eval.faithfulness.score"] == 1.0
    assert scored[semconv.EVAL_DIAGNOSIS] == "ok"
