"""OTLP requests into SDK ReadableSpans: everything a span carries survives the trip."""

from __future__ import annotations

import json

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from ragpulse.outputs.files import otlp_json
from ragpulse.serve._convert import (
    DecodeError,
    count_spans,
    parse_json,
    parse_protobuf,
    to_readable_spans,
)

TRACE = 0x0AF7651916CD43DD8448EB211C80319C
STATE = TraceState([("vendor", "v1")])


def _span(span_id: int, parent: SpanContext | None, **kwargs: object) -> ReadableSpan:
    options: dict[str, object] = {
        "name": f"span-{span_id}",
        "context": SpanContext(TRACE, span_id, False, TraceFlags(1), STATE),
        "parent": parent,
        "resource": Resource({"service.name": "shop", "deployment.environment": "prod"}),
        "attributes": {"s": "text", "i": 7, "f": 0.5, "b": True, "list": ("a", "b")},
        "events": [Event("retrieved", {"n": 2}, timestamp=1_000_000_123)],
        "links": [Link(SpanContext(TRACE + 1, 99, False, TraceFlags(1)), {"why": "batch"})],
        "kind": SpanKind.SERVER,
        "status": Status(StatusCode.ERROR, "boom"),
        "start_time": 1_000_000_000,
        "end_time": 1_000_500_000,
        "instrumentation_scope": InstrumentationScope("my.lib", "1.2.3"),
    }
    options.update(kwargs)
    return ReadableSpan(**options)  # type: ignore[arg-type]


def test_protobuf_span_keeps_ids_parent_times_resource_scope_events_links_status() -> None:
    remote_parent = SpanContext(TRACE, 0x1111, True, TraceFlags(1))
    original = _span(0x2222, remote_parent)
    request = parse_protobuf(encode_spans([original]).SerializeToString())

    converted = to_readable_spans(request)

    assert converted.rejected == 0
    (span,) = converted.spans
    assert span.context.trace_id == TRACE and span.context.span_id == 0x2222
    assert span.context.trace_flags.sampled
    assert span.context.trace_state.get("vendor") == "v1"
    assert span.parent is not None and span.parent.span_id == 0x1111 and span.parent.is_remote
    assert (span.start_time, span.end_time) == (1_000_000_000, 1_000_500_000)
    assert span.resource.attributes["service.name"] == "shop"
    assert span.instrumentation_scope.name == "my.lib"
    assert span.instrumentation_scope.version == "1.2.3"
    assert dict(span.attributes) == {"s": "text", "i": 7, "f": 0.5, "b": True, "list": ("a", "b")}
    assert [(e.name, dict(e.attributes), e.timestamp) for e in span.events] == [
        ("retrieved", {"n": 2}, 1_000_000_123)
    ]
    assert span.links[0].context.trace_id == TRACE + 1 and span.links[0].context.span_id == 99
    assert span.kind is SpanKind.SERVER
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "boom"


def test_converted_span_encodes_back_to_the_same_otlp() -> None:
    original = encode_spans([_span(5, SpanContext(TRACE, 4, False, TraceFlags(1)))])

    again = encode_spans(to_readable_spans(original).spans)

    assert MessageToDict(again) == MessageToDict(original)


def test_local_parent_is_not_remote_and_root_has_no_parent() -> None:
    local = _span(6, SpanContext(TRACE, 5, False, TraceFlags(1)))
    root = _span(5, None)
    spans = to_readable_spans(encode_spans([local, root])).spans

    by_id = {span.context.span_id: span for span in spans}
    assert by_id[6].parent is not None and not by_id[6].parent.is_remote
    assert by_id[5].parent is None


def test_otlp_json_with_hex_ids_parses_like_protobuf() -> None:
    original = encode_spans([_span(7, SpanContext(TRACE, 3, False, TraceFlags(1)))])
    body = otlp_json(original).encode()

    assert MessageToDict(parse_json(body)) == MessageToDict(original)


def test_spans_with_invalid_ids_are_rejected_and_the_rest_kept() -> None:
    request = encode_spans([_span(8, None), _span(9, None)])
    request.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01\x02"

    converted = to_readable_spans(request)

    assert count_spans(request) == 2
    assert converted.rejected == 1
    assert [span.context.span_id for span in converted.spans] == [9]


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", json.dumps({"resourceSpans": [{"scopeSpans": 5}]}).encode()],
)
def test_a_body_that_is_not_an_otlp_json_request_is_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_json(body)


@pytest.mark.parametrize(
    "body",
    [
        rb'{"\ud800": 1}',
        rb'{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": "\udfff"}]}]}]}',
    ],
)
def test_a_field_or_enum_name_with_a_lone_surrogate_is_a_decode_error(body: bytes) -> None:
    # protobuf's C name lookup raises SystemError on it, which serve would answer with a 500.
    with pytest.raises(DecodeError, match="not UTF-8"):
        parse_json(body)


def test_a_body_that_is_not_protobuf_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        parse_protobuf(b"\xff\xff\xff\xff garbage")


def test_forwarded_request_copies_received_spans_and_encodes_rebuilt_ones() -> None:
    from ragpulse.outputs.relayed import encode_request
    from ragpulse.processor.span_processor import rebuild

    original = encode_spans(
        [_span(11, None), _span(12, SpanContext(TRACE, 11, True, TraceFlags(1)))]
    )
    original.resource_spans[0].scope_spans[0].spans[0].dropped_attributes_count = 3
    received = to_readable_spans(original).spans
    scored = rebuild(received[0], {"ragpulse.eval.status": "ok"})

    request = encode_request([scored, received[1]])

    (resource_spans,) = request.resource_spans
    (scope_spans,) = resource_spans.scope_spans
    first, second = scope_spans.spans
    assert second == original.resource_spans[0].scope_spans[0].spans[1]
    assert any(kv.key == "ragpulse.eval.status" for kv in first.attributes)
    assert first.span_id == original.resource_spans[0].scope_spans[0].spans[0].span_id
    assert resource_spans.resource == original.resource_spans[0].resource
    assert scope_spans.scope.name == "my.lib"


def test_a_rebuilt_received_span_leaves_as_it_came_with_the_new_attributes_written_in() -> None:
    from ragpulse.outputs.relayed import encode_request, item_bytes
    from ragpulse.processor.settle import rebuild

    original = encode_spans([_span(21, SpanContext(TRACE, 20, True, TraceFlags(1)))])
    message = original.resource_spans[0].scope_spans[0].spans[0]
    message.dropped_attributes_count = 3
    message.flags |= 0x100  # fields the SDK's encoder would not write back as they came
    (received,) = to_readable_spans(original).spans
    before = received.otlp.SerializeToString()
    extra = {"s": "replaced", "ragpulse.eval.score": 0.75, "n": 2, "ok": False, "t": ("x", "y")}

    scored = rebuild(received, extra)

    assert received.otlp.SerializeToString() == before  # the received span is not changed
    assert dict(scored.attributes) == {**dict(received.attributes), **extra}
    (sent,) = encode_request([scored]).resource_spans[0].scope_spans[0].spans
    assert (sent.dropped_attributes_count, sent.flags) == (3, message.flags)
    assert [kv.key for kv in sent.attributes].count("s") == 1
    values = {kv.key: MessageToDict(kv.value) for kv in sent.attributes}
    assert values["s"] == {"stringValue": "replaced"}
    assert values["ragpulse.eval.score"] == {"doubleValue": 0.75}
    assert values["n"] == {"intValue": "2"} and values["ok"] == {"boolValue": False}
    assert values["t"] == {"arrayValue": {"values": [{"stringValue": "x"}, {"stringValue": "y"}]}}
    assert values["i"] == {"intValue": "7"}  # the received attributes stay
    assert item_bytes(scored) == sent.ByteSize() + 6  # measured exactly, not bounded
