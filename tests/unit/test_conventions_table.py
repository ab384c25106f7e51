"""The conventions table: every row classifies a span the same way in the application's process
(the adapters, on an SDK span) and in ``ragpulse serve``'s router (on the OTLP protobuf), so a
convention added to the table is evaluated in both."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse.adapters import is_buffered, is_evidence_span, is_retrieval
from ragpulse.adapters._conventions import (
    EVENT_MARKERS,
    MARKERS,
    WAITS_FOR_UNIT,
    EventMarker,
    Marker,
    kinds,
)
from ragpulse.adapters._read import _is_agent_span
from ragpulse.adapters._tools import is_tool
from ragpulse.serve._route import _RETRIEVAL_MARKS, _waits_for_unit, span_kinds

_PARENT = SpanContext(0x1F, 0x2, is_remote=False, trace_flags=TraceFlags(1))


def _sdk_span(attributes: dict[str, object], events: tuple[Event, ...] = ()) -> ReadableSpan:
    return ReadableSpan(
        name="s",
        context=SpanContext(0x1F, 0x3, is_remote=False, trace_flags=TraceFlags(1)),
        parent=_PARENT,
        attributes=attributes,  # type: ignore[arg-type]
        events=events,
        start_time=1,
        end_time=2,
    )


def _pb_span(span: ReadableSpan) -> PbSpan:
    [resource] = encode_spans([span]).resource_spans
    return resource.scope_spans[0].spans[0]


def _row_span(row: Marker | EventMarker) -> ReadableSpan:
    if isinstance(row, EventMarker):
        return _sdk_span({}, (Event(row.name, {}),))
    value = sorted(row.values)[0] if row.values is not None else "present"
    return _sdk_span({row.key: value})


def _row_id(row: Marker | EventMarker) -> str:
    if isinstance(row, EventMarker):
        return f"{row.convention}-{row.kind}-event:{row.name}"
    return f"{row.convention}-{row.kind}-{row.key}"


ROWS: list[Marker | EventMarker] = [*MARKERS, *EVENT_MARKERS]


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_each_row_classifies_its_span_as_its_kind_in_process_and_in_serve(
    row: Marker | EventMarker,
) -> None:
    span = _row_span(row)
    pb = _pb_span(span)

    names = [event.name for event in span.events]
    in_process = kinds(dict(span.attributes or {}), names)
    assert row.kind in in_process
    assert span_kinds(pb) == in_process


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_each_row_is_held_for_its_unit_alike_in_process_and_in_serve(
    row: Marker | EventMarker,
) -> None:
    span = _row_span(row)

    waits = row.kind in WAITS_FOR_UNIT
    assert is_buffered(span) is waits
    assert _waits_for_unit(_pb_span(span)) is waits


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind in WAITS_FOR_UNIT], ids=_row_id)
def test_each_row_that_waits_has_a_mark_the_router_finds_in_the_body(
    row: Marker | EventMarker,
) -> None:
    body = _pb_span(_row_span(row)).SerializeToString()

    assert any(mark in body for mark in _RETRIEVAL_MARKS)


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_the_adapters_predicates_follow_the_table(row: Marker | EventMarker) -> None:
    span = _row_span(row)
    attributes = dict(span.attributes or {})

    assert is_tool(attributes) is (row.kind == "tool")
    assert is_retrieval(span) is (row.kind == "retrieval")
    assert is_evidence_span(span) is (row.kind in ("tool", "retrieval"))
    assert _is_agent_span(span) is (row.kind == "agent")


def test_the_older_prompt_attributes_mark_no_llm_call_beside_another_operation() -> None:
    span = _sdk_span({"gen_ai.operation.name": "invoke_agent", "gen_ai.prompt.0.content": "hi"})

    assert "llm" not in kinds(dict(span.attributes or {}))
    assert span_kinds(_pb_span(span)) == {"agent"}
