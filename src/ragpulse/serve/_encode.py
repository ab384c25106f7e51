"""Encoding and exporting what ``ragpulse serve`` forwards.

Most spans leave as the bytes they came in. A received request, or the part of
it that is forwarded unchanged, is one ``RawSpans``: a serialized
``ExportTraceServiceRequest``. Serialized requests concatenate into one
(``resource_spans`` is a repeated field), so a batch of them is a join of bytes,
never a decode and re-encode. The spans the pipeline holds as SDK spans (units
waiting for evaluation, and the rebuilt evaluated ones) are encoded by
``encode_request``: a ``ReceivedSpan`` (a rebuilt one too: its message has the new
attributes written in) is written back from its OTLP message, any other span (a late
result's carrier span) with the SDK's encoder.

The exporters are the SDK's OTLP exporters, built by ``ragpulse.outputs`` (they read
every standard ``OTEL_EXPORTER_OTLP_*`` variable: endpoint, headers,
certificates, compression, timeout), sending these bytes; and the OTLP-JSON file
exporter ``configure(output_file=)`` uses.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_resource,
)
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import _encode_span
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as OTLPGrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as OTLPHttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from ragpulse._guard import Guard
from ragpulse.outputs.delivery import span_bound
from ragpulse.outputs.files import FileSpanExporter, otlp_json
from ragpulse.serve._convert import ReceivedSpan

_logger = logging.getLogger("ragpulse.serve.export")
# Internal errors are logged throttled: one export failing in a loop is one line and a count.
_guard = Guard("ragpulse.serve.export")


@dataclass(frozen=True, slots=True)
class RawSpans:
    """Spans forwarded as they came: a serialized ``ExportTraceServiceRequest``."""

    data: bytes
    count: int
    """Spans it carries."""
    size: int
    """Bytes it holds in the budget."""


_R = TypeVar("_R", bound=Message)

Item = ReadableSpan | RawSpans
"""What the forwarding sink queues: one span, or received spans forwarded as bytes."""


def item_count(item: Item) -> int:
    """Spans in one queued item."""
    return item.count if type(item) is RawSpans else 1


# Bytes a span's framing adds inside a ScopeSpans (tag and length prefix).
_SPAN_FRAMING = 6
# Bytes the resources and scopes of a batch of spans add, generously (as ragpulse.outputs.delivery
# bounds them); a batch that looks too big is encoded to be measured exactly.
_PER_BATCH = 16 * 1024


def item_bytes(item: Item) -> int:
    """Bytes ``item`` adds to an encoded export request, its resources and scopes left out.

    Exact for bytes forwarded as they came and for a received span, rebuilt or not (its
    message's size and framing); for any other span (a late result's carrier span) an
    upper bound read from its fields (``span_bound``): it is encoded once, when it
    leaves, not also to be measured.
    """
    if type(item) is RawSpans:
        return len(item.data)
    if type(item) is ReceivedSpan:
        return int(item.otlp.ByteSize()) + _SPAN_FRAMING
    assert isinstance(item, ReadableSpan)
    return span_bound(item) + _SPAN_FRAMING


def items_bytes(items: Sequence[Item], limit: int) -> int:
    """Bytes of the request ``items`` encode to: exact when near or over ``limit`` (or all
    raw bytes), else an upper bound."""
    size = sum(item_bytes(item) for item in items)
    if all(type(item) is RawSpans for item in items):
        return size
    size += _PER_BATCH
    return size if size <= limit else len(encode_items(items))


def split_request(
    request: _R,
    max_bytes: int,
    *,
    resources: str = "resource_spans",
    scopes: str = "scope_spans",
    records: str = "spans",
) -> list[_R]:
    """``request`` cut into requests of at most ``max_bytes`` encoded, resources and scopes kept.

    Records stay in order; a record that alone passes the bound goes in a request of its
    own. The field names say which signal's request it is (spans by default; logs are
    ``resource_logs``, ``scope_logs``, ``log_records``; metrics alike).
    """
    if request.ByteSize() <= max_bytes:
        return [request]
    out: list[_R] = []
    current = type(request)()
    size = 0
    for resource_group in getattr(request, resources):
        for scope_group in getattr(resource_group, scopes):
            # The resource and scope are written again in every request a group spans.
            overhead = resource_group.resource.ByteSize() + scope_group.scope.ByteSize()
            overhead += 4 * _SPAN_FRAMING
            group: Any = None
            for record in getattr(scope_group, records):
                record_size = record.ByteSize() + _SPAN_FRAMING
                needed = record_size + (overhead if group is None else 0)
                if size and size + needed > max_bytes:
                    out.append(current)
                    current, size, group = type(request)(), 0, None
                    needed = record_size + overhead
                if group is None:
                    target = getattr(current, resources).add()
                    target.resource.CopyFrom(resource_group.resource)
                    target.schema_url = resource_group.schema_url
                    group = getattr(target, scopes).add()
                    group.scope.CopyFrom(scope_group.scope)
                    group.schema_url = scope_group.schema_url
                getattr(group, records).append(record)
                size += needed
    if size:
        out.append(current)
    return out


def encode_request(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    """One export request for ``spans``, received spans copied from their original message."""
    resources: dict[int, tuple[Resource, dict[int, tuple[InstrumentationScope | None, list[Any]]]]]
    resources = {}
    for span in spans:
        resource = span.resource
        scope = span.instrumentation_scope
        entry = resources.get(id(resource))
        if entry is None:
            entry = resources[id(resource)] = (resource, {})
        scopes = entry[1]
        group = scopes.get(id(scope))
        if group is None:
            group = scopes[id(scope)] = (scope, [])
        group[1].append(span.otlp if type(span) is ReceivedSpan else _encode_span(span))
    request = ExportTraceServiceRequest()
    for resource, scopes in resources.values():
        resource_spans = ResourceSpans(
            resource=_encode_resource(resource), schema_url=resource.schema_url or ""
        )
        for scope, pb_spans in scopes.values():
            scope_spans = ScopeSpans(
                scope=_encode_instrumentation_scope(scope),  # type: ignore[arg-type]
                schema_url=(scope.schema_url if scope is not None else None) or "",
            )
            scope_spans.spans.extend(pb_spans)
            resource_spans.scope_spans.append(scope_spans)
        request.resource_spans.append(resource_spans)
    return request


def encode_items(items: Sequence[Item]) -> bytes:
    """The serialized export request of ``items``: raw bytes joined, spans encoded."""
    raw = [item.data for item in items if type(item) is RawSpans]
    spans = [item for item in items if type(item) is not RawSpans]
    if spans:
        raw.append(encode_request(spans).SerializePartialToString())  # type: ignore[arg-type]
    return raw[0] if len(raw) == 1 else b"".join(raw)


class FileForwarder(FileSpanExporter):
    """Appends spans to a file as OTLP/JSON lines, as ``configure(output_file=)`` does."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = ExportTraceServiceRequest.FromString(encode_items(spans))
        ok = self._out.append(otlp_json(request))
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE


class _GrpcForwarder(OTLPGrpcSpanExporter):
    """The SDK's OTLP/gRPC exporter, sending ``encode_items``' request."""

    def _translate_data(  # type: ignore[override]
        self, data: Sequence[Item]
    ) -> ExportTraceServiceRequest:
        request: ExportTraceServiceRequest = ExportTraceServiceRequest.FromString(
            encode_items(data)
        )
        return request


class _HttpForwarder(OTLPHttpSpanExporter):
    """The SDK's OTLP/HTTP exporter, posting ``encode_items``' bytes."""

    def export(self, spans: Sequence[Item]) -> SpanExportResult:  # type: ignore[override]
        if getattr(self, "_shutdown", False):
            return SpanExportResult.FAILURE
        try:
            data = encode_items(spans)
            client = getattr(self, "_client", None)
            if client is not None:  # the SDK's HTTP client object, where it has one
                ok = bool(client.export(data).success)
            else:  # SDKs without it post with _export
                ok = bool(self._export(data, self._timeout).ok)  # type: ignore[attr-defined]
        except Exception:
            _guard.exception("OTLP/HTTP export raised")
            return SpanExportResult.FAILURE
        # A failure is retried by the forwarding sink's delivery, with backoff.
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE


def forwarder_class(protocol: str) -> type[SpanExporter]:
    """The OTLP span exporter class that sends ``Item`` batches over ``protocol``."""
    return _GrpcForwarder if protocol == "grpc" else _HttpForwarder
