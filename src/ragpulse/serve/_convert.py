"""OTLP protobuf spans into SDK ``ReadableSpan``s, and OTLP/JSON into protobuf.

The receivers decode a request with the protobuf classes the OTLP exporter
already depends on (``opentelemetry-proto``); this module turns each span into
the ``ReadableSpan`` the in-process pipeline handles, keeping its ids, parent
(and whether the parent was remote, from the span's flags), times, resource,
scope, attributes, events, links and status. One ``Resource`` and one
``InstrumentationScope`` object are built per group, not per span. Results a
span arrives with (``ragpulse.eval.*``) are removed on the way (``_trust``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common._internal import _encode_key_value
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from ragpulse._guard import Guard
from ragpulse.outputs.relayed import OtlpSpan, RelayedSignal
from ragpulse.serve._trust import strip_results

# An attribute that cannot be encoded is logged throttled: one line and a count, not one per span.
_guard = Guard("ragpulse.serve.convert")

# OTLP's SpanFlags: bit 8 says whether bit 9 (the parent is remote) is known.
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_TRACE_FLAGS_MASK = 0xFF
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})
# OTLP kinds count from SPAN_KIND_UNSPECIFIED = 0; the SDK's from INTERNAL = 0.
_KINDS = {
    0: SpanKind.INTERNAL,
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_STATUS_CODES = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
_UNSET_STATUS = Status(StatusCode.UNSET)
_M = TypeVar("_M", bound=Message)


class ReceivedSpan(OtlpSpan):
    """A ``ReadableSpan`` that still has the OTLP ``Span`` it was read from.

    A span forwarded unchanged is written back from ``otlp`` rather than encoded
    anew (exact, and several times cheaper). A span the pipeline rebuilds with its
    scores (the evaluated unit, a scored retrieval span) is a ``ReceivedSpan`` too
    (``rebuild``): its message is the received one with the new attributes written in.
    """

    def rebuild(self, extra: Mapping[str, Any]) -> ReceivedSpan:
        """A copy with ``extra`` attributes merged in (they win), as ``sink.rebuild`` makes.

        The copy's message is the received one with ``extra`` written in, so the span
        still leaves as it came plus ragpulse's attributes (its flags and dropped counts
        kept), and its size is the message's: nothing is encoded from SDK objects.
        """
        otlp = PbSpan()
        otlp.CopyFrom(self.otlp)
        pairs = otlp.attributes
        if any(pair.key in extra for pair in pairs):
            kept = [pair for pair in pairs if pair.key not in extra]
            del pairs[:]
            pairs.extend(kept)
        add_key_values(pairs, extra)
        return ReceivedSpan(
            otlp,
            name=self.name,
            context=self.context,
            parent=self.parent,
            resource=self.resource,
            attributes={**(self._attributes or {}), **extra},
            events=self._events,
            links=self._links,
            kind=self.kind,
            status=self.status,
            start_time=self.start_time,
            end_time=self.end_time,
            instrumentation_scope=self.instrumentation_scope,
        )


class DecodeError(ValueError):
    """The request body is not an OTLP export request."""


@dataclass
class Converted:
    """The spans of one request, with what could not be read."""

    spans: list[ReadableSpan] = field(default_factory=list)
    rejected: int = 0
    """Spans with invalid ids (the protocol's partial success reports them)."""
    errors: list[str] = field(default_factory=list)


def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest`` from its binary protobuf encoding."""
    return decode_protobuf(body, ExportTraceServiceRequest, "trace")


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest`` from OTLP/JSON (hex trace and span ids)."""
    return decode_json(body, ExportTraceServiceRequest, "trace")


def parse_relayed(signal: RelayedSignal, body: bytes, is_json: bool = False) -> Any:
    """The export request of ``signal`` in ``body``; ``DecodeError`` when it is not one."""
    if is_json:
        return decode_json(body, signal.request, signal.name)
    return decode_protobuf(body, signal.request, signal.name)


def decode_protobuf(body: bytes, message_type: type[_M], signal: str) -> _M:
    """A ``message_type`` export request of ``signal`` from its binary protobuf encoding."""
    request: _M = message_type()
    try:
        request.ParseFromString(body)
    except Exception as exc:  # protobuf raises its own DecodeError and others
        raise DecodeError(f"not an OTLP protobuf {signal} request: {exc}") from None
    return request


def decode_json(body: bytes, message_type: type[_M], signal: str) -> _M:
    """A ``message_type`` export request of ``signal`` from OTLP/JSON (hex trace and span ids)."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"not JSON: {exc}") from None
    except RecursionError:
        raise DecodeError(f"not an OTLP/JSON {signal} request: nested too deeply") from None
    return decode_document(document, message_type, signal)


def decode_document(document: object, message_type: type[_M], signal: str) -> _M:
    """``decode_json`` of a JSON text already parsed (``ragpulse eval`` reads a line once to
    tell spans from logs)."""
    too_deep = f"not an OTLP/JSON {signal} request: nested too deeply"
    if not isinstance(document, dict):
        raise DecodeError("an OTLP/JSON request is a JSON object")
    request: _M = message_type()
    try:
        json_format.ParseDict(_base64_ids(document), request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise DecodeError(f"not an OTLP/JSON {signal} request: {exc}") from None
    except RecursionError:
        raise DecodeError(too_deep) from None
    except SystemError as exc:
        # protobuf's C lookup of a field or enum name fails this way on a lone surrogate
        # ("\ud800" as a key or a kind), which no UTF-8 text holds.
        if not isinstance(exc.__cause__, UnicodeError):
            raise
        raise DecodeError(f"not an OTLP/JSON {signal} request: a name is not UTF-8") from None
    return request


def _base64_ids(value: Any) -> Any:
    # OTLP/JSON spells ids in hex; the protobuf JSON mapping of bytes is base64.
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _ID_KEYS and isinstance(item, str):
                try:
                    out[key] = base64.b64encode(bytes.fromhex(item)).decode("ascii")
                except ValueError:
                    raise DecodeError(f"{key} is not hex: {item[:40]!r}") from None
            else:
                out[key] = _base64_ids(item)
        return out
    if isinstance(value, list):
        return [_base64_ids(item) for item in value]
    return value


def count_spans(request: ExportTraceServiceRequest) -> int:
    """How many spans a request carries."""
    return sum(
        len(scope_spans.spans)
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
    )


def to_readable_spans(request: ExportTraceServiceRequest) -> Converted:
    """Every span of ``request`` as a ``ReadableSpan``; spans with invalid ids rejected."""
    out = Converted()
    for resource_spans in request.resource_spans:
        resource = Resource(
            attributes_of(resource_spans.resource.attributes),
            resource_spans.schema_url or None,
        )
        for scope_spans in resource_spans.scope_spans:
            pb_scope = scope_spans.scope
            scope = InstrumentationScope(
                pb_scope.name,
                pb_scope.version or None,
                scope_spans.schema_url or None,
                attributes_of(pb_scope.attributes) or None,
            )
            for pb_span in scope_spans.spans:
                span = _span(pb_span, resource, scope)
                if span is None:
                    out.rejected += 1
                    if len(out.errors) < 5:
                        out.errors.append(f"span {pb_span.name!r}: invalid trace or span id")
                else:
                    out.spans.append(span)
    return out


def _span(pb: PbSpan, resource: Resource, scope: InstrumentationScope) -> ReadableSpan | None:
    trace_id_bytes, span_id_bytes = pb.trace_id, pb.span_id
    if len(trace_id_bytes) != 16 or len(span_id_bytes) != 8:
        return None
    trace_id = int.from_bytes(trace_id_bytes, "big")
    span_id = int.from_bytes(span_id_bytes, "big")
    if trace_id == 0 or span_id == 0:
        return None
    trace_state = _trace_state(pb.trace_state)
    flags = pb.flags
    # A span that was exported was sampled; SDKs that leave the W3C byte out
    # (opentelemetry-python's encoder does) still mean that.
    trace_flags = TraceFlags(flags & _TRACE_FLAGS_MASK or TraceFlags.SAMPLED)
    context = SpanContext(trace_id, span_id, False, trace_flags, trace_state)
    parent = None
    if len(pb.parent_span_id) == 8:
        parent_id = int.from_bytes(pb.parent_span_id, "big")
        if parent_id:
            remote = flags & (_HAS_IS_REMOTE | _IS_REMOTE) == _HAS_IS_REMOTE | _IS_REMOTE
            parent = SpanContext(trace_id, parent_id, remote, trace_flags, trace_state)
    attributes = attributes_of(pb.attributes)
    strip_results(pb, attributes)
    status = _UNSET_STATUS
    if pb.HasField("status") and pb.status.code:
        code = _STATUS_CODES.get(pb.status.code, StatusCode.UNSET)
        status = Status(code, pb.status.message if code is StatusCode.ERROR else None)
    return ReceivedSpan(
        pb,
        name=pb.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=attributes,
        events=[
            Event(event.name, attributes_of(event.attributes), event.time_unix_nano)
            for event in pb.events
        ],
        links=[_link(link) for link in pb.links if len(link.trace_id) == 16],
        kind=_KINDS.get(pb.kind, SpanKind.INTERNAL),
        status=status,
        start_time=pb.start_time_unix_nano,
        end_time=pb.end_time_unix_nano,
        instrumentation_scope=scope,
    )


def _link(pb: PbSpan.Link) -> Link:
    flags = pb.flags
    context = SpanContext(
        int.from_bytes(pb.trace_id, "big"),
        int.from_bytes(pb.span_id, "big"),
        flags & (_HAS_IS_REMOTE | _IS_REMOTE) == _HAS_IS_REMOTE | _IS_REMOTE,
        TraceFlags(flags & _TRACE_FLAGS_MASK),
        _trace_state(pb.trace_state),
    )
    return Link(context, attributes_of(pb.attributes))


def _trace_state(text: str) -> TraceState | None:
    if not text:
        return None
    return TraceState.from_header([text])


def attributes_of(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    """OTLP key-values as SDK attribute values (arrays become tuples, maps dicts)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        value = pair.value
        # Strings are nearly every attribute: read them without the general dispatch.
        if value.WhichOneof("value") == "string_value":
            out[pair.key] = value.string_value
        else:
            out[pair.key] = any_value(value)
    return out


def add_key_values(pairs: Any, attributes: Mapping[str, Any]) -> None:
    """Append SDK attribute values to ``pairs`` (a message's repeated ``KeyValue`` field) as
    the SDK's encoder writes them; one that cannot be encoded is left out and logged, as
    there. Filled in place: a key-value built apart and then copied in costs twice."""
    add = pairs.add
    for key, value in attributes.items():
        kind = type(value)
        if kind is str:
            add(key=key).value.string_value = value
        elif kind is float:
            add(key=key).value.double_value = value
        elif kind is int:
            add(key=key).value.int_value = value
        elif kind is bool:
            add(key=key).value.bool_value = value
        else:
            try:
                pairs.append(_encode_key_value(key, value))
            except Exception:
                _guard.warning("ragpulse: attribute %r not encoded: %r", key, type(value))


def any_value(value: AnyValue) -> Any:
    """One OTLP value as the SDK holds it (arrays as tuples, maps as dicts, unset as None)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "array_value":
        return tuple(any_value(item) for item in value.array_value.values)
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value
    return None
