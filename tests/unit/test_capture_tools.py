"""``@ragpulse.tool``: an agent's tool calls as GenAI ``execute_tool`` spans whose results
are the evidence of the enclosing ``@rag`` unit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ragpulse
from ragpulse import errors, semconv
from ragpulse.adapters import ToolPolicy, unjudged_reason
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.capture._record import MAX_TOOL_RESULTS, handoff
from ragpulse.capture._roles import set_tool_roles
from ragpulse.evaluation.types import Context, RagRecord

WARRANTY = "The X200 comes with a 2-year limited warranty."


pytestmark = pytest.mark.usefixtures("capture_records")


def spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


def tool_span(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in spans(exporter) if s.name == f"execute_tool {name}"]
    assert len(found) == 1, [s.name for s in spans(exporter)]
    return found[0]


def unit_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    found = [s for s in spans(exporter) if (s.attributes or {}).get(semconv.RAG_UNIT)]
    assert len(found) == 1
    return found[0]


def record_of(exporter: InMemorySpanExporter) -> RagRecord:
    record = handoff.take(unit_span(exporter).context)
    assert record is not None
    return record


@ragpulse.tool
def search_docs(query: str, tool_call_id: str | None = None) -> str:
    return WARRANTY


@ragpulse.tool(evidence=False)
def calculator(expression: str) -> str:
    return "391"


def test_tool_span_follows_the_genai_execute_tool_convention(
    exporter: InMemorySpanExporter,
) -> None:
    assert search_docs("warranty", tool_call_id="call_1") == WARRANTY
    attributes = dict(tool_span(exporter, "search_docs").attributes or {})
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert attributes[semconv.GEN_AI_TOOL_NAME] == "search_docs"
    assert attributes[semconv.GEN_AI_TOOL_CALL_ID] == "call_1"
    assert attributes[semconv.GEN_AI_TOOL_CALL_RESULT] == WARRANTY
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "TOOL"
    assert attributes[semconv.RAG_TOOL_EVIDENCE] is True
    assert attributes[semconv.RAG_TOOL_OUTCOME] == "ok"


def test_call_id_is_left_out_when_not_given(exporter: InMemorySpanExporter) -> None:
    search_docs("warranty")
    assert semconv.GEN_AI_TOOL_CALL_ID not in (tool_span(exporter, "search_docs").attributes or {})


def test_tool_result_is_a_context_of_the_enclosing_unit_with_its_tool_and_span(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag
    def agent(question: str) -> str:
        search_docs(question, tool_call_id="call_7")
        return "It has a 2-year limited warranty."

    agent("What warranty does the X200 have?")
    record = record_of(exporter)
    assert list(record.contexts) == [Context(WARRANTY, "call_7", tool="search_docs")]
    span_id = tool_span(exporter, "search_docs").context.span_id  # type: ignore[union-attr]
    assert record.sources == ((span_id, 0, 0, 1),)
    assert record.failed_tools == ()
    assert (unit_span(exporter).attributes or {})[semconv.RAG_TOOL_CALLS] == 1


def test_tool_spans_are_children_of_the_unit(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag
    def agent(question: str) -> str:
        search_docs(question)
        return "answer"

    agent("q")
    unit = unit_span(exporter)
    child = tool_span(exporter, "search_docs")
    assert child.parent is not None and child.parent.span_id == unit.context.span_id  # type: ignore[union-attr]


def test_retrieved_passages_and_tool_results_are_contexts_in_call_order(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.retrieval
    def retrieve(query: str) -> list[str]:
        return ["Passage one.", "Passage two."]

    @ragpulse.rag
    def agent(question: str) -> str:
        retrieve(question)
        search_docs(question)
        return "answer"

    agent("q")
    record = record_of(exporter)
    assert [(c.text, c.tool) for c in record.contexts] == [
        ("Passage one.", None),
        ("Passage two.", None),
        (WARRANTY, "search_docs"),
    ]
    retrieval_id = next(s for s in spans(exporter) if s.name.startswith("retrieval")).context
    tool_id = tool_span(exporter, "search_docs").context
    assert record.sources == (
        (retrieval_id.span_id, 0, 0, 2),  # type: ignore[union-attr]
        (tool_id.span_id, 0, 2, 1),  # type: ignore[union-attr]
    )


def test_acting_tool_result_is_not_evidence(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag
    def agent(question: str) -> str:
        search_docs(question)
        calculator("17*23")
        return "answer"

    agent("q")
    record = record_of(exporter)
    assert [c.tool for c in record.contexts] == ["search_docs"]
    assert (tool_span(exporter, "calculator").attributes or {})[semconv.RAG_TOOL_EVIDENCE] is False
    assert (unit_span(exporter).attributes or {})[semconv.RAG_TOOL_CALLS] == 2


def test_action_tools_setting_marks_a_tool_by_name(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool
    def book_table(when: str) -> str:
        return "Booked for 8pm."

    set_tool_roles(ToolPolicy(action=("book_*",)))

    @ragpulse.rag
    def agent(question: str) -> str:
        book_table("8pm")
        search_docs(question)
        return "answer"

    agent("q")
    assert [c.tool for c in record_of(exporter).contexts] == ["search_docs"]
    assert (tool_span(exporter, "book_table").attributes or {})[semconv.RAG_TOOL_EVIDENCE] is False


def test_explicit_evidence_wins_over_the_action_tools_setting(
    exporter: InMemorySpanExporter,
) -> None:
    set_tool_roles(ToolPolicy(action=("*",)))

    @ragpulse.tool(evidence=True)
    def lookup(key: str) -> str:
        return "value"

    @ragpulse.rag
    def agent(question: str) -> str:
        lookup("k")
        return "answer"

    agent("q")
    assert [c.tool for c in record_of(exporter).contexts] == ["lookup"]


def test_tool_roles_action_glob_wins_and_unmatched_tools_act() -> None:
    roles = ToolPolicy(evidence=("search_*", "web.*"), action=("search_admin",))
    assert roles.is_evidence("search_docs")
    assert roles.is_evidence("web.fetch")
    assert not roles.is_evidence("search_admin")
    assert not roles.is_evidence("calculator")
    assert ToolPolicy().is_evidence("anything")


def test_agent_answer_after_acting_tools_only_is_handed_on_to_be_skipped_no_evidence(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag
    def agent(question: str) -> str:
        calculator("17*23")
        return "17 times 23 is 391."

    agent("What is 17*23?")
    record = record_of(exporter)
    # An agent's record: the worker skips it, and coverage counts it, as a trace-read one's.
    assert record.attributes[semconv.RAG_ADAPTER_AGENT] is True
    assert record.contexts == () and record.failed_tools == ()
    reason = unjudged_reason(record)
    assert reason is not None and reason[0] == errors.NO_EVIDENCE


def test_agent_answer_with_tool_evidence_is_judged(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag
    def agent(question: str) -> str:
        search_docs(question)
        calculator("17*23")
        return "answer"

    agent("q")
    assert unjudged_reason(record_of(exporter)) is None


def test_unit_without_tool_calls_or_contexts_is_judged_as_before(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag
    def plain(question: str) -> str:
        return "answer"

    plain("q")
    record = record_of(exporter)
    assert record.contexts == ()
    assert semconv.RAG_ADAPTER_AGENT not in record.attributes
    assert unjudged_reason(record) is None


class ToolBroke(RuntimeError):
    pass


@ragpulse.tool
def broken_search(query: str) -> str:
    raise ToolBroke("index offline")


def test_raising_tool_reaches_the_caller_unchanged_and_fills_failed_tools(
    exporter: InMemorySpanExporter,
) -> None:
    caught: list[BaseException] = []

    @ragpulse.rag
    def agent(question: str) -> str:
        try:
            broken_search(question)
        except ToolBroke as exc:
            caught.append(exc)
        return "The X200 has a lifetime warranty."

    agent("What warranty?")
    assert len(caught) == 1 and str(caught[0]) == "index offline"
    span = tool_span(exporter, "broken_search")
    assert span.status.status_code is StatusCode.ERROR
    event = next(e for e in span.events if e.name == "exception")
    assert (event.attributes or {})[semconv.EXCEPTION_TYPE].endswith("ToolBroke")
    assert (span.attributes or {})[semconv.RAG_TOOL_OUTCOME] == "error"
    record = record_of(exporter)
    assert record.failed_tools == ("broken_search",)
    assert record.contexts == ()
    unit = unit_span(exporter).attributes or {}
    assert list(unit[semconv.RAG_TOOLS_FAILED]) == ["broken_search"]
    assert semconv.EVAL_STATUS not in unit  # judged, to be diagnosed tool_failure


def test_raising_tool_outside_a_unit_still_raises(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(ToolBroke):
        broken_search("q")
    assert (tool_span(exporter, "broken_search").attributes or {})[
        semconv.RAG_TOOL_OUTCOME
    ] == "error"


@pytest.mark.parametrize("empty", [None, "", "   ", [], {}, "[]"])
def test_tool_that_returns_nothing_fills_failed_tools(
    exporter: InMemorySpanExporter, empty: Any
) -> None:
    @ragpulse.tool
    def find(query: str) -> Any:
        return empty

    @ragpulse.rag
    def agent(question: str) -> str:
        assert find(question) is empty
        return "answer"

    agent("q")
    record = record_of(exporter)
    assert record.failed_tools == ("find",)
    assert record.contexts == ()
    assert (tool_span(exporter, "find").attributes or {})[semconv.RAG_TOOL_OUTCOME] == "empty"


def test_error_result_is_a_failed_tool_and_its_span_an_error_without_a_result(
    exporter: InMemorySpanExporter,
) -> None:
    result = {"content": [{"type": "text", "text": "rate limited"}], "isError": True}

    @ragpulse.tool
    def mcp_search(query: str) -> dict[str, Any]:
        return result

    @ragpulse.rag
    def agent(question: str) -> str:
        assert mcp_search(question) is result
        return "answer"

    agent("q")
    assert record_of(exporter).failed_tools == ("mcp_search",)
    attributes = tool_span(exporter, "mcp_search").attributes or {}
    assert attributes[semconv.RAG_TOOL_OUTCOME] == "error"
    # The conventions: the result only on success, error.type on failure.
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in attributes
    assert attributes[semconv.ERROR_TYPE] == "tool_error_result"
    assert tool_span(exporter, "mcp_search").status.status_code is StatusCode.ERROR


def test_error_result_still_shows_in_openinference_output_value(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(conventions=("genai", "openinference")))

    @ragpulse.tool
    def mcp_search(query: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "rate limited"}], "isError": True}

    mcp_search("q")
    attributes = tool_span(exporter, "mcp_search").attributes or {}
    assert attributes[semconv.OI_OUTPUT_VALUE] == "rate limited"
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in attributes


def test_raising_tool_span_carries_the_error_type(exporter: InMemorySpanExporter) -> None:
    with contextlib.suppress(ToolBroke):
        broken_search("q")
    attributes = tool_span(exporter, "broken_search").attributes or {}
    assert attributes[semconv.ERROR_TYPE].endswith("ToolBroke")


def test_failed_tool_is_named_once_however_often_it_fails(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag
    def agent(question: str) -> str:
        for _ in range(3):
            with contextlib.suppress(ToolBroke):
                broken_search(question)
        search_docs(question)
        return "answer"

    agent("q")
    record = record_of(exporter)
    assert record.failed_tools == ("broken_search",)
    assert [c.tool for c in record.contexts] == ["search_docs"]


def test_structured_result_is_read_as_json_and_returned_unchanged(
    exporter: InMemorySpanExporter,
) -> None:
    product = {"name": "X200", "warranty_years": 2, "regions": ["EU", "US"]}

    @ragpulse.tool
    def get_product(sku: str) -> dict[str, Any]:
        return product

    @ragpulse.rag
    def agent(question: str) -> str:
        assert get_product("x200") is product
        return "answer"

    agent("q")
    text = record_of(exporter).contexts[0].text
    assert '"warranty_years": 2' in text and '"EU"' in text


def test_mcp_style_result_object_is_read_from_its_text_parts(
    exporter: InMemorySpanExporter,
) -> None:
    class TextContent:
        def __init__(self, text: str) -> None:
            self.type = "text"
            self.text = text

    class CallToolResult:
        def __init__(self) -> None:
            self.content = [TextContent("Part one."), TextContent("Part two.")]
            self.isError = False

    @ragpulse.tool
    def remote(query: str) -> CallToolResult:
        return CallToolResult()

    @ragpulse.rag
    def agent(question: str) -> str:
        remote(question)
        return "answer"

    agent("q")
    assert record_of(exporter).contexts[0].text == "Part one.\nPart two."


def test_async_tool(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool
    async def fetch(query: str) -> str:
        await asyncio.sleep(0)
        return WARRANTY

    @ragpulse.rag
    async def agent(question: str) -> str:
        results = await asyncio.gather(fetch("a"), fetch("b"))
        assert results == [WARRANTY, WARRANTY]
        return "answer"

    asyncio.run(agent("q"))
    record = record_of(exporter)
    assert [c.text for c in record.contexts] == [WARRANTY, WARRANTY]
    assert len(record.sources) == 2


def test_async_tool_that_raises_reaches_the_caller(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool
    async def fetch(query: str) -> str:
        raise ToolBroke("down")

    @ragpulse.rag
    async def agent(question: str) -> str:
        with pytest.raises(ToolBroke):
            await fetch(question)
        return "answer"

    asyncio.run(agent("q"))
    assert record_of(exporter).failed_tools == ("fetch",)


def test_generator_tool_result_is_the_joined_stream(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool
    def stream(query: str) -> Iterator[str]:
        yield "The X200 comes with "
        yield "a 2-year limited warranty."

    @ragpulse.rag
    def agent(question: str) -> str:
        assert list(stream(question)) == ["The X200 comes with ", "a 2-year limited warranty."]
        return "answer"

    agent("q")
    assert record_of(exporter).contexts[0].text == WARRANTY


def test_generator_tool_that_raises_midway_is_failed(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool
    def stream(query: str) -> Iterator[str]:
        yield "partial"
        raise ToolBroke("cut off")

    @ragpulse.rag
    def agent(question: str) -> str:
        got = []
        with pytest.raises(ToolBroke):
            for chunk in stream(question):
                got.append(chunk)
        assert got == ["partial"]
        return "answer"

    agent("q")
    record = record_of(exporter)
    assert record.failed_tools == ("stream",)
    assert record.contexts == ()


def test_async_generator_tool(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool
    async def stream(query: str) -> AsyncIterator[str]:
        yield "a 2-year "
        yield "limited warranty"

    @ragpulse.rag
    async def agent(question: str) -> str:
        chunks = [chunk async for chunk in stream(question)]
        assert chunks == ["a 2-year ", "limited warranty"]
        return "answer"

    asyncio.run(agent("q"))
    assert record_of(exporter).contexts[0].text == "a 2-year limited warranty"


def test_one_shot_iterator_result_is_handed_back_with_every_item(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.tool
    def rows(query: str) -> Iterator[str]:
        return iter(["row one", "row two"])

    @ragpulse.rag
    def agent(question: str) -> str:
        assert list(rows(question)) == ["row one", "row two"]
        return "answer"

    agent("q")
    assert record_of(exporter).contexts[0].text == "row onerow two"


def test_tool_method_keeps_its_instance(exporter: InMemorySpanExporter) -> None:
    class Toolbox:
        prefix = "Result: "

        @ragpulse.tool(name="lookup")
        def lookup(self, key: str) -> str:
            return self.prefix + key

    @ragpulse.rag
    def agent(question: str) -> str:
        assert Toolbox().lookup("x") == "Result: x"
        return "answer"

    agent("q")
    assert record_of(exporter).contexts[0] == Context("Result: x", None, tool="lookup")


def test_call_id_from_a_callable(exporter: InMemorySpanExporter) -> None:
    @ragpulse.tool(call_id_arg=lambda call, **_: call["id"])
    def run_call(call: dict[str, str]) -> str:
        return "done: " + call["id"]

    @ragpulse.rag
    def agent(question: str) -> str:
        run_call({"id": "call_9"})
        return "answer"

    agent("q")
    assert record_of(exporter).contexts[0].id == "call_9"


def test_result_from_picks_the_evidence_out_of_a_richer_result(
    exporter: InMemorySpanExporter,
) -> None:
    response = {"status": 200, "body": WARRANTY}

    @ragpulse.tool(result_from="body")
    def http_get(url: str) -> dict[str, Any]:
        return response

    @ragpulse.rag
    def agent(question: str) -> str:
        assert http_get("https://example.test") is response
        return "answer"

    agent("q")
    assert record_of(exporter).contexts[0].text == WARRANTY


def test_result_without_content_capture_leaves_no_text(exporter: InMemorySpanExporter) -> None:
    set_policy(ContentPolicy(capture_content=False))

    @ragpulse.rag
    def agent(question: str) -> str:
        search_docs(question)
        return "answer"

    agent("q")
    attributes = tool_span(exporter, "search_docs").attributes or {}
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in attributes
    assert attributes["ragpulse.tool.call.result.length"] == len(WARRANTY)
    # The evaluator still sees the raw text.
    assert record_of(exporter).contexts[0].text == WARRANTY


def test_result_on_the_span_is_redacted_and_capped(exporter: InMemorySpanExporter) -> None:
    set_policy(ContentPolicy(redact=lambda t: t.replace("X200", "[product]"), max_text_bytes=64))
    long = WARRANTY + " " + "More detail. " * 50

    @ragpulse.tool
    def details(query: str) -> str:
        return long

    @ragpulse.rag
    def agent(question: str) -> str:
        details(question)
        return "answer"

    agent("q")
    exported = (tool_span(exporter, "details").attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT]
    assert isinstance(exported, str)
    assert "X200" not in exported and len(exported.encode()) <= 64
    assert record_of(exporter).contexts[0].text == long


def test_openinference_convention_writes_output_value_and_tool_name(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(conventions=("openinference",)))
    search_docs("q")
    attributes = tool_span(exporter, "search_docs").attributes or {}
    assert attributes[semconv.OI_OUTPUT_VALUE] == WARRANTY
    assert attributes[semconv.OI_TOOL_NAME] == "search_docs"
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in attributes


def test_unreadable_result_is_returned_and_the_unit_is_not_judged(
    exporter: InMemorySpanExporter,
) -> None:
    class Hostile:
        @property
        def text(self) -> str:
            raise RuntimeError("no text")

    hostile = Hostile()

    @ragpulse.tool
    def odd(query: str) -> Hostile:
        return hostile

    @ragpulse.rag
    def agent(question: str) -> str:
        assert odd(question) is hostile
        return "answer"

    agent("q")
    unit = unit_span(exporter)
    assert (unit.attributes or {})[semconv.EVAL_ERROR_TYPE] == errors.UNREADABLE_INPUT
    assert handoff.take(unit.context) is None


def test_many_tool_calls_are_bounded_and_the_unit_is_too_large(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag
    def agent(question: str) -> str:
        for i in range(MAX_TOOL_RESULTS + 5):
            search_docs(question, tool_call_id=f"call_{i}")
        return "answer"

    agent("q")
    attributes = unit_span(exporter).attributes or {}
    assert attributes[semconv.RAG_TOOL_CALLS] == MAX_TOOL_RESULTS + 5
    assert attributes[semconv.EVAL_ERROR_TYPE] == errors.TOO_LARGE


def test_conversation_id_parameter_goes_onto_the_unit_and_the_record(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag
    def turn(question: str, conversation_id: str) -> str:
        search_docs(question)
        return "answer"

    turn("q", conversation_id="conv-42")
    assert (unit_span(exporter).attributes or {})[semconv.GEN_AI_CONVERSATION_ID] == "conv-42"
    assert record_of(exporter).conversation_id == "conv-42"


def test_conversation_arg_names_another_parameter(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag(conversation_arg="chat")
    def turn(question: str, chat: int) -> str:
        return "answer"

    turn("q", 7)
    assert record_of(exporter).conversation_id == "7"
