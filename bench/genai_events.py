"""What reading the GenAI instrumentation's content log events costs, against the same agent
turn with its content on the spans (SPAN_ONLY), in the same process.

One agent turn as ``opentelemetry-instrumentation-openai-v2`` writes it: three chat calls (two
ask for a tool, the last answers), two ``execute_tool`` spans, under an ``invoke_agent`` root;
each tool result ~2 KB. Its content goes on the chat spans (``span``), as the legacy
per-message log events (``events``: ``gen_ai.user.message``... and ``gen_ai.choice``, one per
message of each call, the history repeated), or as one operation details event per call
(``details``). For each mode:

- held: the events and estimated bytes the trace buffer holds for the turn until its root ends;
- emit: CPU per event of ``logger.emit`` on an SDK logger provider with the app's own
  processor and ragpulse's content intake (which hands the record over), against the same
  provider without the intake (the request thread's share);
- read: CPU per span of holding the turn's spans and events and reading its record at the
  root (``from_log_record``, ``TraceBuffer.add`` / ``add_event``, ``take``, ``read_trace``:
  the worker thread's share), against the ``span`` mode.

Timings are the best of 7 rounds in which every measurement takes its turn
(``time.process_time``); ratios are what to read.

    .venv/bin/python bench/genai_events.py
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import Any

from opentelemetry._logs import LogRecord
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from ragpulse.adapters import TraceBuffer, read_trace
from ragpulse.adapters._content_events import ContentEvent, from_log_record
from ragpulse.processor.log_intake import ContentEventIntake

QUESTION = "What warranty does the X200 have, and does it cover water damage?"
RESULT = ("The X200 comes with a 2-year limited warranty that covers parts and labour. " * 26)[
    :2000
]
ANSWER = "The X200 has a 2-year limited warranty; water damage is not covered."
TURNS = 300
REPEATS = 7
_ids = itertools.count(2)


def _call(call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "search_docs", "arguments": '{"query": "X200"}'},
    }


def _history(step: int) -> list[dict[str, Any]]:
    """The OpenAI messages of chat call ``step`` (0, 1, 2): the question, then each earlier
    step's call and result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for earlier in range(step):
        messages.append({"role": "assistant", "tool_calls": [_call(f"call_{earlier}")]})
        messages.append({"role": "tool", "tool_call_id": f"call_{earlier}", "content": RESULT})
    return messages


def _output(step: int) -> dict[str, Any]:
    if step < 2:
        return {"role": "assistant", "tool_calls": [_call(f"call_{step}")]}
    return {"role": "assistant", "content": ANSWER}


def _genai_parts(message: dict[str, Any]) -> dict[str, Any]:
    role = message["role"]
    if role == "tool":
        part = {
            "type": "tool_call_response",
            "id": message["tool_call_id"],
            "response": message["content"],
        }
        return {"role": "tool", "parts": [part]}
    if "tool_calls" in message:
        calls = [
            {
                "type": "tool_call",
                "id": c["id"],
                "name": "search_docs",
                "arguments": {"query": "X200"},
            }
            for c in message["tool_calls"]
        ]
        return {"role": role, "parts": calls}
    return {"role": role, "parts": [{"type": "text", "content": message["content"]}]}


def _span(
    name: str, trace_id: int, span_id: int, attributes: dict[str, Any], root: bool = False
) -> ReadableSpan:
    start = next(_ids) * 1000
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, False, TraceFlags(1)),
        parent=None if root else SpanContext(trace_id, 1, False, TraceFlags(1)),
        attributes=attributes,
        start_time=start,
        end_time=start + 500,
    )


Emitted = tuple[int, LogRecord]
"""A log record the instrumentation emits, with the span id it is tied to."""


def turn(trace_id: int, mode: str) -> tuple[ReadableSpan, list[ReadableSpan], list[Emitted]]:
    """The root, the parts and the log records of one agent turn in ``mode``."""
    parts: list[ReadableSpan] = []
    records: list[Emitted] = []
    for step in range(3):
        span_id = next(_ids)
        history, output = _history(step), _output(step)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.response.finish_reasons": ("tool_calls" if step < 2 else "stop",),
        }
        if mode == "span":
            attributes["gen_ai.input.messages"] = json.dumps([_genai_parts(m) for m in history])
            attributes["gen_ai.output.messages"] = json.dumps([_genai_parts(output)])
        elif mode == "details":
            details = {
                "gen_ai.input.messages": tuple(_genai_parts(m) for m in history),
                "gen_ai.output.messages": (_genai_parts(output),),
            }
            records.append(
                (
                    span_id,
                    LogRecord(
                        event_name="gen_ai.client.inference.operation.details", attributes=details
                    ),
                )
            )
        else:
            for message in history:
                body = {k: v for k, v in message.items() if k not in ("role", "tool_call_id")}
                if message["role"] == "tool":
                    body["id"] = message["tool_call_id"]
                records.append(
                    (span_id, LogRecord(event_name=f"gen_ai.{message['role']}.message", body=body))
                )
            choice = {
                "index": 0,
                "finish_reason": attributes["gen_ai.response.finish_reasons"][0],
                "message": output,
            }
            records.append((span_id, LogRecord(event_name="gen_ai.choice", body=choice)))
        parts.append(_span("chat m", trace_id, span_id, attributes))
        if step < 2:
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_docs",
                "gen_ai.tool.call.id": f"call_{step}",
            }
            parts.append(_span("execute_tool search_docs", trace_id, next(_ids), tool))
    root = _span(
        "invoke_agent support", trace_id, 1, {"gen_ai.operation.name": "invoke_agent"}, root=True
    )
    return root, parts, records


def _tie(trace_id: int, records: list[Emitted]) -> list[LogRecord]:
    """The records with the trace context the instrumentation emits them under."""
    tied = []
    for span_id, record in records:
        context = set_span_in_context(
            NonRecordingSpan(SpanContext(trace_id, span_id, False, TraceFlags(1))), Context()
        )
        tied.append(
            LogRecord(
                event_name=record.event_name,
                body=record.body,
                attributes=record.attributes,
                context=context,
            )
        )
    return tied


def _events(trace_id: int, records: list[Emitted]) -> list[ContentEvent]:
    return [e for r in _tie(trace_id, records) if (e := from_log_record(r)) is not None]


def _hold(buffer: TraceBuffer, records: list[LogRecord]) -> None:
    """What the worker thread does with the records the intake handed over."""
    for record in records:
        event = from_log_record(record)
        if event is not None:
            buffer.add_event(event)


def held(mode: str) -> tuple[int, int, int]:
    """Events, estimated bytes and spans the trace buffer holds for one turn in ``mode``."""
    buffer = TraceBuffer()
    _, parts, records = turn(7, mode)
    for event in _events(7, records):
        buffer.add_event(event)
    for part in parts:
        buffer.add(part)
    return buffer.events, buffer.bytes, buffer.spans


Trial = Callable[[], float]
"""One timed run of a measurement: CPU seconds per span or per event."""


def interleaved(trials: dict[str, Trial]) -> dict[str, float]:
    """The best of ``REPEATS`` runs of each trial, the trials taking turns in every round (a
    machine busy with other work slows them alike)."""
    best = {name: float("inf") for name in trials}
    for _ in range(REPEATS):
        for name, trial in trials.items():
            best[name] = min(best[name], trial())
    return best


def read_cpu(mode: str) -> Trial:
    """CPU seconds per span of holding and reading ``TURNS`` turns in ``mode``."""
    turns = []
    for t in range(TURNS):
        root, parts, records = turn(1000 + t, mode)
        turns.append((root, parts, _tie(1000 + t, records)))
    spans = sum(len(parts) + 1 for _, parts, _ in turns)

    def run() -> float:
        buffer = TraceBuffer()
        start = time.process_time()
        for root, parts, records in turns:
            _hold(buffer, records)
            for part in parts:
                buffer.add(part)
            taken, _ = buffer.take(root.context.trace_id)  # type: ignore[union-attr]
            record = read_trace(root, taken).record
            assert record is not None and record.answer == ANSWER and record.contexts
        return (time.process_time() - start) / spans

    return run


class _Exporting(LogRecordProcessor):
    """The app's own log pipeline, reduced to taking each record (a batch processor's append)."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def on_emit(self, log_record: Any) -> None:
        self.records.append(log_record)

    def shutdown(self) -> None:
        self.records.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def emit_cpu(mode: str, intake: bool) -> Trial:
    """CPU seconds per event of ``logger.emit`` with or without ragpulse's intake, on a
    provider with the app's own processor."""
    provider = LoggerProvider()
    provider.add_log_record_processor(_Exporting())
    handed: list[Any] = []
    if intake:
        provider.add_log_record_processor(ContentEventIntake(handed.append))
    logger = provider.get_logger("opentelemetry.instrumentation.openai_v2")
    batches = [_tie(2000 + t, turn(2000 + t, mode)[2]) for t in range(TURNS)]
    count = sum(len(b) for b in batches)

    def run() -> float:
        start = time.process_time()
        for batch in batches:
            for record in batch:
                logger.emit(record)
        elapsed = time.process_time() - start
        handed.clear()
        return elapsed / count

    return run


def main() -> None:
    modes = ("span", "events", "details")
    cpu = interleaved(
        {
            **{f"read {mode}": read_cpu(mode) for mode in modes},
            **{
                f"emit {mode} {on}": emit_cpu(mode, on)
                for mode in modes[1:]
                for on in (True, False)
            },
        }
    )
    print(
        f"{'mode':<8} {'events':>6} {'held bytes':>10} {'spans':>5} {'read µs/span':>13} "
        f"{'ratio':>6} {'emit µs/event':>14} {'intake':>7}"
    )
    figures: dict[str, Any] = {}
    base_read = cpu["read span"]
    for mode in modes:
        events, size, spans = held(mode)
        read = cpu[f"read {mode}"]
        emit = cpu.get(f"emit {mode} True", 0.0)
        bare = cpu.get(f"emit {mode} False", 0.0)
        ratio = read / base_read
        intake = emit / bare if bare else 0.0
        print(
            f"{mode:<8} {events:>6} {size:>10} {spans:>5} {read * 1e6:>13.1f} {ratio:>6.2f} "
            f"{emit * 1e6:>14.2f} {intake:>7.2f}"
        )
        figures[mode] = (events, size, ratio, emit, bare, intake)
    _, span_bytes, *_ = figures["span"]
    ev, ev_bytes, ev_ratio, ev_emit, ev_bare, ev_intake = figures["events"]
    de, de_bytes, de_ratio, de_emit, de_bare, de_intake = figures["details"]
    print(
        f"RESULT turns={TURNS} legacy_events_held={ev} "
        f"legacy_bytes_ratio={ev_bytes / span_bytes:.2f} "
        f"details_events_held={de} details_bytes_ratio={de_bytes / span_bytes:.2f} "
        f"legacy_read_cpu_ratio={ev_ratio:.2f} details_read_cpu_ratio={de_ratio:.2f} "
        f"legacy_emit_intake_ratio={ev_intake:.2f} details_emit_intake_ratio={de_intake:.2f} "
        f"legacy_intake_us_per_event={(ev_emit - ev_bare) * 1e6:.2f} "
        f"details_intake_us_per_event={(de_emit - de_bare) * 1e6:.2f}"
    )


if __name__ == "__main__":
    main()
