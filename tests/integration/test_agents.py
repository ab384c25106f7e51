"""A tool-calling agent traced by OpenInference, OpenLLMetry and the OpenTelemetry GenAI
instrumentation, evaluated in the same process: the tool's result is the evidence, the
agent's final answer the unit.

The agent (``tests/integration/agents.py``) is the loop a user writes with the ``openai``
SDK and one ``search_docs`` tool, against the Chat Completions test server speaking the
real protocol, tool calls included. The evaluating processor is built from settings as
``configure()`` builds it, with the offline judge.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.integration.agents import (
    GENAI_MODES,
    GROUNDED,
    MADE_UP,
    QUESTION,
    WARRANTY,
    WATER,
    WATER_QUESTION,
    Instrumentation,
    instrumented,
    lookup,
    require,
    run_session,
    run_turn,
    search_both,
    search_down,
    search_warranty,
)
from tests.servers.chat_server import ChatServer, Reply, ToolCall

from ragpulse import errors, semconv
from ragpulse.capture import ContentPolicy, get_policy, set_policy
from ragpulse.evaluation.diagnosis import TOOL_FAILURE
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.settings import Settings

pytestmark = pytest.mark.integration


openai = require("openai")
require("openinference.instrumentation.openai")
require("opentelemetry.instrumentation.openai")
require("opentelemetry.instrumentation.openai_v2")

INSTRUMENTATIONS = ("openinference", "openllmetry", "openllmetry-events", *GENAI_MODES)
"""OpenLLMetry with its messages on the span and as log events (``use_attributes=False``), and
the GenAI instrumentation in each of its content modes: its messages on the span (``genai``,
SPAN_ONLY), as legacy per-message log events (``genai-events``), on one operation details event
(``genai-event_only``), or both (``genai-span_and_event``)."""


class Agent:
    """The agent's process: an instrumented provider, ragpulse's processor in front of an
    in-memory exporter, and the scripted model."""

    def __init__(self, which: str, server: ChatServer, **settings: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.logs = InMemoryLogExporter()
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.processor = EvaluatingSpanProcessor.from_settings(
            SimpleSpanProcessor(self.exporter),
            Settings.load({"sample_rate": 1.0, **settings}),
            logger_provider=self.logger_provider,
        )
        # What configure() does with the logger provider it builds or joins.
        self.logger_provider.add_log_record_processor(self.processor.content_events)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)
        self.server = server
        self.client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        self.which = which
        self.history: list[dict[str, Any]] = []
        self.instrumentation: Instrumentation | None = None

    def turn(self, question: str, search: Any, *replies: Reply, **options: Any) -> str:
        assert self.instrumentation is not None
        self.server.script(*replies)
        return run_turn(
            self.client, self.provider, self.instrumentation, self.history, question, search,
            **options,
        )  # fmt: skip

    def session(
        self, questions: list[str], search: Any, *replies: Reply, **options: Any
    ) -> list[str]:
        """Several user turns under one root span, the conversation carried along."""
        assert self.instrumentation is not None
        self.server.script(*replies)
        return run_session(
            self.client, self.provider, self.instrumentation,
            [(question, search) for question in questions], **options,
        )  # fmt: skip

    def units(self) -> list[ReadableSpan]:
        """The agent turns' root spans as exported, once evaluations are in."""
        assert self.processor.force_flush(60_000)
        return [s for s in self.exporter.get_finished_spans() if s.name == "agent turn"]

    def close(self) -> None:
        self.processor.shutdown()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture(params=INSTRUMENTATIONS)
def agent(request: pytest.FixtureRequest, server: ChatServer) -> Iterator[Agent]:
    agent = Agent(request.param, server)
    with instrumented(request.param, agent.provider, agent.logger_provider) as instrumentation:
        agent.instrumentation = instrumentation
        yield agent
    agent.close()


def search_nothing(query: str) -> str:
    return "[]"


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def claims(span: ReadableSpan) -> list[dict[str, Any]]:
    return json.loads(str(attrs(span)[semconv.EVAL_CLAIMS]))


def test_a_grounded_answer_scores_high_with_the_tool_result_as_cited_evidence(
    agent: Agent,
) -> None:
    answer = agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED))

    [unit] = agent.units()
    scored = attrs(unit)
    assert answer == GROUNDED
    assert scored[semconv.EVAL_STATUS] == "ok"
    assert scored["ragpulse.eval.faithfulness.score"] == 1.0
    assert scored["ragpulse.eval.groundedness.score"] == 1.0
    # The evidence is the tool's result, named by its call id.
    assert {c["context_id"] for c in claims(unit)} == {"call_warranty"}


def test_an_answer_the_tool_result_contradicts_scores_low(agent: Agent) -> None:
    agent.turn(QUESTION, search_warranty, lookup(), Reply.text(MADE_UP))

    [unit] = agent.units()
    scored = attrs(unit)
    assert scored[semconv.EVAL_STATUS] == "ok"
    assert scored["ragpulse.eval.faithfulness.score"] < 0.5
    assert scored["ragpulse.eval.groundedness.score"] < 0.5
    assert scored["ragpulse.eval.groundedness.label"] == "fail"


def test_intermediate_text_beside_a_tool_call_is_not_judged(agent: Agent) -> None:
    step = Reply.calls(
        ToolCall("search_docs", {"query": "X200"}, id="call_1"),
        content="Let me look that up in the X200 manual, which promises a lifetime warranty.",
    )
    agent.turn(QUESTION, search_warranty, step, Reply.text(GROUNDED))

    [unit] = agent.units()
    assert attrs(unit)["ragpulse.eval.faithfulness.score"] == 1.0
    assert [c["text"] for c in claims(unit)] == [GROUNDED]


def test_parallel_tool_calls_are_one_unit_with_each_result_as_evidence(agent: Agent) -> None:
    results = {"X200 warranty": WARRANTY, "X200 water": WATER}
    calls = Reply.calls(
        ToolCall("search_docs", {"query": "X200 warranty"}, id="call_a"),
        ToolCall("search_docs", {"query": "X200 water"}, id="call_b"),
    )
    answer = f"{GROUNDED} {WATER}"
    agent.turn(QUESTION, results.__getitem__, calls, Reply.text(answer))

    [unit] = agent.units()
    assert attrs(unit)["ragpulse.eval.faithfulness.score"] == 1.0
    assert {c["context_id"] for c in claims(unit)} == {"call_a", "call_b"}


def test_a_second_turn_answers_from_the_first_turns_tool_result(agent: Agent) -> None:
    assert agent.instrumentation is not None
    agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED), conversation="conv-7")
    # The follow-up is answered from what the first turn fetched, without a new lookup.
    agent.turn(
        "And is it two years for parts and labour?",
        search_warranty,
        Reply.text("Yes, the 2-year limited warranty covers parts and labour."),
        conversation="conv-7",
    )

    first, second = agent.units()
    for unit in (first, second):
        assert attrs(unit)[semconv.GEN_AI_CONVERSATION_ID] == "conv-7"
        assert attrs(unit)[semconv.EVAL_STATUS] == "ok"
    assert attrs(second)["ragpulse.eval.faithfulness.score"] == 1.0
    events = [r.log_record for r in agent.logs.get_finished_logs()]
    judged = [e for e in events if e.event_name == semconv.GEN_AI_EVALUATION_RESULT_EVENT]
    assert judged
    assert {(e.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID) for e in judged} == {"conv-7"}


def test_two_user_turns_under_one_root_are_two_units_each_judged_on_its_own_answer(
    agent: Agent,
) -> None:
    made_up = "Yes, water damage is covered by a 5-year warranty."
    answers = agent.session(
        [QUESTION, WATER_QUESTION],
        search_both,
        lookup(),
        Reply.text(GROUNDED),
        lookup("call_water", "X200 water damage"),
        Reply.text(made_up),
        conversation="conv-9",
    )

    assert answers == [GROUNDED, made_up]
    assert agent.processor.force_flush(60_000)
    spans = agent.exporter.get_finished_spans()
    [root] = [s for s in spans if s.name == "agent session"]
    scored = [s for s in spans if semconv.EVAL_STATUS in attrs(s)]
    assert len(scored) == 2 and root in scored
    # The first answer is scored on the model call that gave it, under the root.
    [first] = [s for s in scored if s is not root]
    assert first.parent is not None and root.context is not None
    assert first.parent.span_id == root.context.span_id
    grounded, made = attrs(first), attrs(root)
    assert grounded["ragpulse.eval.faithfulness.score"] == 1.0
    assert {c["context_id"] for c in claims(first)} == {"call_warranty"}
    assert made["ragpulse.eval.faithfulness.score"] < 0.5
    assert made["ragpulse.eval.groundedness.label"] == "fail"
    assert grounded[semconv.GEN_AI_CONVERSATION_ID] == made[semconv.GEN_AI_CONVERSATION_ID]
    # One evaluation event per answer, each on its own span.
    events = [r.log_record for r in agent.logs.get_finished_logs()]
    judged = {e.span_id for e in events if e.event_name == semconv.GEN_AI_EVALUATION_RESULT_EVENT}
    assert judged == {first.context.span_id, root.context.span_id}  # type: ignore[union-attr]


def test_an_answer_after_the_tool_failed_is_diagnosed_tool_failure(agent: Agent) -> None:
    agent.turn(QUESTION, search_down, lookup(), Reply.text(MADE_UP))

    [unit] = agent.units()
    scored = attrs(unit)
    assert scored[semconv.EVAL_STATUS] == "ok"
    assert scored[semconv.EVAL_DIAGNOSIS] == TOOL_FAILURE
    assert "search_docs" in str(scored[semconv.EVAL_DIAGNOSIS_EXPLANATION])


def test_an_answer_after_the_tool_returned_nothing_is_diagnosed_tool_failure(
    agent: Agent,
) -> None:
    agent.turn(QUESTION, search_nothing, lookup(), Reply.text(MADE_UP))

    [unit] = agent.units()
    assert attrs(unit)[semconv.EVAL_DIAGNOSIS] == TOOL_FAILURE


# OpenLLMetry's events mode records neither the tools offered nor anything else that says a
# call is an agent's: an answer given without calling a tool reads as a plain chat (no unit).
@pytest.mark.parametrize(
    "agent", [name for name in INSTRUMENTATIONS if name != "openllmetry-events"], indirect=True
)
def test_an_agent_answer_without_any_evidence_is_skipped_no_evidence_and_counted(
    agent: Agent,
) -> None:
    # The model answers at once: tools were offered, none was called.
    agent.turn(QUESTION, search_warranty, Reply.text(MADE_UP))

    [unit] = agent.units()
    scored = attrs(unit)
    assert scored[semconv.EVAL_STATUS] == "skipped"
    assert scored[semconv.EVAL_ERROR_TYPE] == errors.NO_EVIDENCE
    # Asked for and not judged: coverage shows it.
    assert agent.processor.coverage.value() == 0.0
    assert agent.processor.coverage.main_reason() == errors.NO_EVIDENCE


def test_an_action_tool_is_not_evidence(server: ChatServer) -> None:
    agent = Agent("openinference", server, action_tools=("search_*",))
    with instrumented("openinference", agent.provider) as instrumentation:
        agent.instrumentation = instrumentation
        agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED))
        [unit] = agent.units()
    agent.close()
    assert attrs(unit)[semconv.EVAL_ERROR_TYPE] == errors.NO_EVIDENCE


@pytest.mark.parametrize(("answer", "grounded"), [(GROUNDED, True), (MADE_UP, False)])
def test_a_langgraph_react_agent_under_openinference_is_judged_on_its_tool_result(
    server: ChatServer, answer: str, grounded: bool
) -> None:
    langchain = require("openinference.instrumentation.langchain")
    tools = require("langchain_core.tools")
    chat_models = require("langchain_openai")
    prebuilt = require("langgraph.prebuilt")

    @tools.tool
    def search_docs(query: str) -> str:
        """Search the product documentation."""
        return WARRANTY

    agent = Agent("openinference", server)
    instrumentor = langchain.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=agent.provider)
    try:
        server.script(lookup(), Reply.text(answer))
        model = chat_models.ChatOpenAI(
            base_url=server.url, api_key="test", model="ragpulse-test-model", max_retries=0
        )
        graph = prebuilt.create_react_agent(model, [search_docs])
        result = graph.invoke({"messages": [("user", QUESTION)]})
        assert agent.processor.force_flush(60_000)
    finally:
        instrumentor.uninstrument()
        agent.close()

    assert result["messages"][-1].content == answer
    [unit] = [s for s in agent.exporter.get_finished_spans() if s.parent is None]
    scored = attrs(unit)
    assert scored[semconv.EVAL_STATUS] == "ok"
    [claim] = claims(unit)
    assert claim["context_index"] == 0
    assert WARRANTY[claim["start"] : claim["end"]]
    if grounded:
        assert scored["ragpulse.eval.faithfulness.score"] == 1.0
    else:
        assert scored["ragpulse.eval.faithfulness.score"] < 0.5


@pytest.mark.parametrize("which", ["genai-events", "genai-event_only"])
def test_content_read_from_log_events_obeys_the_content_policy(
    server: ChatServer, which: str
) -> None:
    before = get_policy()
    set_policy(ContentPolicy(capture_content=False, hash_key="deployment-secret"))  # as configure()
    try:
        agent = Agent(which, server)
        with instrumented(which, agent.provider, agent.logger_provider) as instrumentation:
            agent.instrumentation = instrumentation
            agent.turn(QUESTION, search_warranty, lookup(), Reply.text(GROUNDED))
            [unit] = agent.units()
        agent.close()
    finally:
        set_policy(before)

    # Judged on the events' content, in the process...
    assert attrs(unit)["ragpulse.eval.faithfulness.score"] == 1.0
    # ...and none of it leaves in what ragpulse writes: the unit span and its result events.
    events = [r.log_record for r in agent.logs.get_finished_logs()]
    judged = [e for e in events if e.event_name == semconv.GEN_AI_EVALUATION_RESULT_EVENT]
    assert judged
    written = json.dumps([attrs(unit), *(dict(e.attributes or {}) for e in judged)], default=str)
    assert "limited warranty" not in written, written
