"""GenAI content written as log events (the GenAI instrumentation's legacy per-message events
and its operation details event) is read onto the span it describes: the record is the one
the span-attribute mode gives, in the trace buffer of the app's process and in serve's
assembler, within their bounds."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from opentelemetry._logs import LogRecord
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from ragpulse import semconv
from ragpulse.adapters import TraceBuffer, read_trace
from ragpulse.adapters._content_events import (
    ContentEvent,
    content_event,
    from_log_record,
    with_content,
)
from ragpulse.evaluation.types import RagRecord
from ragpulse.processor.log_intake import ContentEventIntake
from ragpulse.serve._assembly import EVENTS_LATE, TraceAssembler

TRACE_ID = 0xFEED
_ids = itertools.count(1)
_clock = itertools.count(1_000_000_000, 1_000_000)
QUESTION = "What warranty does the X200 have?"
WARRANTY = "The X200 comes with a 2-year limited warranty."
ANSWER = "It has a 2-year limited warranty."
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "search_docs", "arguments": '{"query": "X200"}'},
}


def span(name: str, attributes: dict[str, Any], parent: ReadableSpan | None = None) -> ReadableSpan:
    begin = next(_clock)
    return ReadableSpan(
        name=name,
        context=SpanContext(TRACE_ID, next(_ids), is_remote=False, trace_flags=TraceFlags(1)),
        parent=parent.context if parent is not None else None,
        attributes=attributes,
        start_time=begin,
        end_time=begin + 500_000,
    )


def agent_root() -> ReadableSpan:
    return span("agent", {"gen_ai.operation.name": "invoke_agent"})


def chat(root: ReadableSpan, finish: str) -> ReadableSpan:
    """A chat span as the GenAI instrumentation writes it with its content in events."""
    return span(
        "chat m",
        {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": (finish,)},
        root,
    )


def event(of: ReadableSpan, name: str, body: Any = None, **attributes: Any) -> ContentEvent:
    assert of.context is not None
    found = content_event(name, of.context.trace_id, of.context.span_id, body, attributes)
    assert found is not None
    return found


def legacy_turn(root: ReadableSpan) -> tuple[list[ReadableSpan], list[ContentEvent]]:
    """One tool-calling turn with its messages as legacy events: a step, then the answer."""
    step, answer = chat(root, "tool_calls"), chat(root, "stop")
    events = [
        event(step, "gen_ai.user.message", {"content": QUESTION}),
        event(
            step,
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "tool_calls": [TOOL_CALL]},
            },
        ),
        event(answer, "gen_ai.user.message", {"content": QUESTION}),
        event(answer, "gen_ai.assistant.message", {"tool_calls": [TOOL_CALL]}),
        event(answer, "gen_ai.tool.message", {"content": WARRANTY, "id": "call_1"}),
        event(
            answer,
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": ANSWER},
            },
        ),
    ]
    return [step, answer], events


def own(events: list[ContentEvent], of: ReadableSpan) -> list[ContentEvent]:
    """The events that describe ``of``."""
    assert of.context is not None
    return [e for e in events if e.span_id == of.context.span_id]


def record_of(root: ReadableSpan, parts: Sequence[ReadableSpan]) -> RagRecord:
    reading = read_trace(root, parts)
    assert reading.record is not None, reading.issues
    return reading.record


def test_legacy_message_events_give_the_record_its_question_tool_result_and_answer() -> None:
    root = agent_root()
    parts, events = legacy_turn(root)

    joined = [with_content(part, own(events, part)) for part in parts]
    record = record_of(root, joined)

    assert record.question == QUESTION
    assert record.answer == ANSWER
    assert [(c.text, c.id) for c in record.contexts] == [(WARRANTY, "call_1")]


def test_the_operation_details_event_gives_the_record_its_messages() -> None:
    root = agent_root()
    answer = chat(root, "stop")
    details = event(
        answer,
        semconv.GEN_AI_OPERATION_DETAILS_EVENT,
        **{
            "gen_ai.input.messages": (
                {"role": "user", "parts": ({"type": "text", "content": QUESTION},)},
                {
                    "role": "tool",
                    "parts": (
                        {"type": "tool_call_response", "id": "call_1", "response": WARRANTY},
                    ),
                },
            ),
            "gen_ai.output.messages": (
                {"role": "assistant", "parts": ({"type": "text", "content": ANSWER},)},
            ),
        },
    )

    record = record_of(root, [with_content(answer, [details])])

    assert (record.question, record.answer) == (QUESTION, ANSWER)
    assert [c.text for c in record.contexts] == [WARRANTY]


def test_messages_on_the_span_are_kept_over_those_of_its_event() -> None:
    on_span = json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}])
    answer = span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": on_span})
    details = event(
        answer,
        semconv.GEN_AI_OPERATION_DETAILS_EVENT,
        **{"gen_ai.input.messages": ({"role": "user", "parts": ()},)},
    )

    assert (
        dict(with_content(answer, [details]).attributes or {})["gen_ai.input.messages"] == on_span
    )


def test_events_without_content_are_not_kept() -> None:
    # Content capture off: the instrumentation still emits the events, bodies without text.
    assert content_event("gen_ai.user.message", TRACE_ID, 1, None, {}) is None
    assert content_event("gen_ai.tool.message", TRACE_ID, 1, {"id": "call_1"}, {}) is None
    no_text = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant"}}
    assert content_event("gen_ai.choice", TRACE_ID, 1, no_text, {}) is None
    assert content_event(semconv.GEN_AI_OPERATION_DETAILS_EVENT, TRACE_ID, 1, None, {}) is None


def test_records_that_are_no_content_event_or_tied_to_no_span_are_not_kept() -> None:
    assert content_event("gen_ai.evaluation.result", TRACE_ID, 1, None, {"x": 1}) is None
    assert content_event("gen_ai.user.message", 0, 0, {"content": QUESTION}, {}) is None


def test_a_span_read_with_its_events_is_a_copy_the_span_itself_unchanged() -> None:
    root = agent_root()
    [_, answer], events = legacy_turn(root)

    joined = with_content(answer, own(events, answer))

    assert joined is not answer
    assert "gen_ai.input.messages" in dict(joined.attributes or {})
    assert "gen_ai.input.messages" not in dict(answer.attributes or {})


# --- the trace buffer (the app's process) ------------------------------------------------


def test_the_buffer_gives_a_trace_s_spans_read_with_their_events() -> None:
    buffer = TraceBuffer()
    root = agent_root()
    parts, events = legacy_turn(root)
    for e in events:  # emitted before their spans end
        assert buffer.add_event(e)
    for part in parts:
        buffer.add(part)

    spans, refused = buffer.take(TRACE_ID)

    assert refused == 0
    assert record_of(root, spans).answer == ANSWER
    assert buffer.events == 0 and buffer.bytes == 0


def test_events_past_the_per_trace_bound_make_the_trace_read_in_part() -> None:
    buffer = TraceBuffer(max_events_per_trace=2)
    root = agent_root()
    _, events = legacy_turn(root)

    held = [buffer.add_event(e) for e in events]

    assert held == [True, True, False, False, False, False]
    assert buffer.take(TRACE_ID)[1] == 4
    assert buffer.events_dropped == {"bounds": 4}


def test_events_of_a_trace_already_taken_are_dropped_as_late() -> None:
    buffer = TraceBuffer()
    root = agent_root()
    _, events = legacy_turn(root)
    buffer.add_event(events[0])
    buffer.take(TRACE_ID)

    assert not buffer.add_event(events[1])
    assert buffer.events_dropped == {"late": 1}
    assert buffer.traces == 0


def test_events_of_an_evicted_trace_are_dropped_and_counted() -> None:
    buffer = TraceBuffer(max_traces=1)
    root = agent_root()
    _, events = legacy_turn(root)
    buffer.add_event(events[0])
    other = content_event("gen_ai.user.message", TRACE_ID + 1, 7, {"content": "hi"}, {})
    assert other is not None

    assert buffer.add_event(other)
    assert buffer.events_dropped == {"bounds": 1}
    assert buffer.events == 1


def test_the_intake_hands_over_content_events_and_ignores_other_records() -> None:
    handed: list[Any] = []
    provider = LoggerProvider()
    provider.add_log_record_processor(ContentEventIntake(handed.append))
    logger = provider.get_logger("genai")
    context = set_span_in_context(
        NonRecordingSpan(SpanContext(TRACE_ID, 5, is_remote=False, trace_flags=TraceFlags(1))),
        Context(),
    )

    logger.emit(
        LogRecord(event_name="gen_ai.user.message", body={"content": QUESTION}, context=context)
    )
    logger.emit(LogRecord(event_name="app.login", body={"content": "x"}, context=context))

    assert [record.event_name for record in handed] == ["gen_ai.user.message"]


def test_an_sdk_log_record_is_read_by_its_event_name_ids_and_body() -> None:
    context = set_span_in_context(
        NonRecordingSpan(SpanContext(TRACE_ID, 5, is_remote=False, trace_flags=TraceFlags(1))),
        Context(),
    )
    record = LogRecord(
        event_name="gen_ai.tool.message", body={"content": WARRANTY, "id": "c"}, context=context
    )

    found = from_log_record(record)

    assert found is not None
    assert (found.trace_id, found.span_id, found.content["content"]) == (TRACE_ID, 5, WARRANTY)


# --- serve's assembler -------------------------------------------------------------------


class _Released:
    def __init__(self) -> None:
        self.records: list[RagRecord] = []

    def __call__(self, unit: ReadableSpan, records: Sequence[RagRecord]) -> None:
        self.records.extend(records)


def _assembler(released: _Released, **options: Any) -> TraceAssembler:
    from opentelemetry.sdk.trace import SpanProcessor

    return TraceAssembler(SpanProcessor(), release=released, **options)


def test_serve_reads_events_that_arrive_before_their_spans() -> None:
    released = _Released()
    assembler = _assembler(released)
    root = agent_root()
    parts, events = legacy_turn(root)
    for e in events:
        assert assembler.add_event(e) is None
    for part in parts:
        assembler.add(part)
    assembler.add(root)

    [record] = released.records
    assert (record.question, record.answer) == (QUESTION, ANSWER)


def test_a_unit_waiting_for_its_answer_is_released_when_the_event_holding_it_arrives() -> None:
    released = _Released()
    assembler = _assembler(released)
    root = agent_root()
    parts, events = legacy_turn(root)
    for part in parts:
        assembler.add(part)
    assembler.add(root)
    assert released.records == []  # no answer yet: its span carries none

    for e in events:
        assembler.add_event(e)

    [record] = released.records
    assert record.answer == ANSWER
    assert [c.text for c in record.contexts] == [WARRANTY]


def test_serve_drops_events_that_come_after_their_units_left_as_late() -> None:
    released = _Released()
    assembler = _assembler(released)
    root = agent_root()
    parts, events = legacy_turn(root)
    for e in events[:-1]:
        assembler.add_event(e)
    for part in parts:
        assembler.add(part)
    assembler.add(root)
    assembler.drain()

    assert assembler.add_event(events[-1]) == EVENTS_LATE
    assert assembler.traces == 0


def test_serve_keeps_events_of_a_trace_that_expired_without_a_unit_for_its_next_entry() -> None:
    now = [0.0]
    assembler = _assembler(_Released(), timeout=2.0, clock=lambda: now[0])
    _, events = legacy_turn(agent_root())
    assembler.add_event(events[0])
    now[0] = 10.0
    assert assembler.expire() == 1  # the first event's entry timed out: no unit was waiting

    assert assembler.add_event(events[1]) is None


# --- serve's logs intake: OTLP protobuf --------------------------------------------------


def _otlp_request(*records: LogRecord) -> Any:
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor

    exporter = InMemoryLogExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("opentelemetry.instrumentation.openai_v2")
    for record in records:
        logger.emit(record)
    return encode_logs(exporter.get_finished_logs())


def _tied(span_id: int) -> Context:
    return set_span_in_context(
        NonRecordingSpan(
            SpanContext(TRACE_ID, span_id, is_remote=False, trace_flags=TraceFlags(1))
        ),
        Context(),
    )


def test_serve_reads_the_content_events_of_an_otlp_logs_request() -> None:
    from ragpulse.serve._log_content import content_events

    request = _otlp_request(
        LogRecord(
            event_name="gen_ai.tool.message",
            body={"content": WARRANTY, "id": "c"},
            context=_tied(5),
        ),
        LogRecord(
            event_name=semconv.GEN_AI_OPERATION_DETAILS_EVENT,
            attributes={
                "gen_ai.output.messages": (
                    {"role": "assistant", "parts": ({"type": "text", "content": ANSWER},)},
                )
            },
            context=_tied(6),
        ),
        LogRecord(event_name="app.login", body={"content": "x"}, context=_tied(7)),
    )

    tool, details = content_events(request, request.SerializeToString())

    assert (tool.trace_id, tool.span_id, tool.content["content"]) == (TRACE_ID, 5, WARRANTY)
    answer = with_content(span("chat m", {"gen_ai.operation.name": "chat"}), [details])
    assert ANSWER in str(dict(answer.attributes or {})["gen_ai.output.messages"])


def test_serve_does_not_walk_a_logs_request_without_genai_records() -> None:
    from ragpulse.serve._log_content import content_events

    request = _otlp_request(LogRecord(event_name="app.login", body="hello", context=_tied(5)))

    assert list(content_events(request, request.SerializeToString())) == []


def test_content_events_a_bound_refuses_are_counted_in_the_evaluator_metrics() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragpulse.processor import EvaluatingSpanProcessor

    reader = InMemoryMetricReader()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()),
        meter_provider=MeterProvider(metric_readers=[reader]),
        trace_buffer=TraceBuffer(max_events_per_trace=1),
    )
    provider = LoggerProvider()
    provider.add_log_record_processor(processor.content_events)
    logger = provider.get_logger("opentelemetry.instrumentation.openai_v2")
    for _ in range(3):
        logger.emit(
            LogRecord(
                event_name="gen_ai.user.message", body={"content": QUESTION}, context=_tied(5)
            )
        )
    assert processor.force_flush(10_000)  # the worker thread reads what was handed over

    data = reader.get_metrics_data()
    processor.shutdown()
    assert data is not None
    points = [
        (dict(point.attributes or {}), point.value)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == semconv.METRIC_CONTENT_EVENTS_DROPPED
        for point in metric.data.data_points  # type: ignore[union-attr]
    ]
    assert points == [({"reason": "bounds"}, 2)]


def test_a_choice_event_with_its_tool_calls_beside_its_message_asks_for_tools() -> None:
    from ragpulse.adapters import may_answer

    step = chat(agent_root(), "unknown")
    # OpenLLMetry's events mode: the calls beside the message, not in it.
    choice = event(step, "gen_ai.choice", {"index": 0, "message": {}, "tool_calls": [TOOL_CALL]})

    assert may_answer(step)
    assert not may_answer(with_content(step, [choice]))
