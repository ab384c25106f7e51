"""Encoding and exporting what ``ragpulse serve`` forwards.

Most spans leave exactly as they came: ``encode_request`` writes a
``ReceivedSpan`` back from its original OTLP message and encodes only the spans
the pipeline rebuilt (evaluated units, carrier spans) with the SDK's encoder.
Spans are grouped by their resource and scope objects, which conversion
creates once per received group, so no resource is hashed per span.

The exporters are the SDK's OTLP exporters (they read every standard
``OTEL_EXPORTER_OTLP_*`` variable: endpoint, headers, certificates,
compression, timeout) with this encoder swapped in, and the OTLP-JSON file
exporter ``configure(output_file=)`` uses.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_resource,
)
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import _encode_span
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from ragpulse._files import FileSpanExporter, otlp_json
from ragpulse._guard import Guard
from ragpulse.serve._convert import ReceivedSpan

_logger = logging.getLogger("ragpulse.serve.export")
# Internal errors are logged throttled: one export failing in a loop is one line and a count.
_guard = Guard("ragpulse.serve.export")


@dataclass(frozen=True)
class RawSpans:
    """A received request forwarded as it is, never converted (evaluation off)."""

    request: ExportTraceServiceRequest
    count: int
    """Spans it carries."""
    size: int
    """Bytes it holds in the budget."""


Item = ReadableSpan | RawSpans
"""What the forwarding sink queues: one span, or a whole request passed through."""


def item_count(item: Item) -> int:
    """Spans in one queued item."""
    return item.count if type(item) is RawSpans else 1


# Bytes a span's framing adds inside a ScopeSpans (tag and length prefix).
_SPAN_FRAMING = 6


def item_bytes(item: Item) -> int:
    """Bytes ``item`` adds to an encoded export request (its resource and scope aside).

    Exact for received spans and requests passed through; a rebuilt span (the
    evaluated unit) is encoded once to be measured.
    """
    if type(item) is RawSpans:
        return int(item.request.ByteSize())
    if type(item) is ReceivedSpan:
        return int(item.otlp.ByteSize()) + _SPAN_FRAMING
    assert isinstance(item, ReadableSpan)
    return int(_encode_span(item).ByteSize()) + _SPAN_FRAMING


def split_request(
    request: ExportTraceServiceRequest, max_bytes: int
) -> list[ExportTraceServiceRequest]:
    """``request`` cut into requests of at most ``max_bytes`` encoded, resources and scopes kept.

    Spans stay in order; a span that alone passes the bound goes in a request of its own.
    """
    if request.ByteSize() <= max_bytes:
        return [request]
    out: list[ExportTraceServiceRequest] = []
    current = ExportTraceServiceRequest()
    size = 0
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            # The resource and scope are written again in every request a group spans.
            overhead = resource_spans.resource.ByteSize() + scope_spans.scope.ByteSize()
            overhead += 4 * _SPAN_FRAMING
            group: ScopeSpans | None = None
            for span in scope_spans.spans:
                span_size = span.ByteSize() + _SPAN_FRAMING
                needed = span_size + (overhead if group is None else 0)
                if size and size + needed > max_bytes:
                    out.append(current)
                    current, size, group = ExportTraceServiceRequest(), 0, None
                    needed = span_size + overhead
                if group is None:
                    target = current.resource_spans.add()
                    target.resource.CopyFrom(resource_spans.resource)
                    target.schema_url = resource_spans.schema_url
                    group = target.scope_spans.add()
                    group.scope.CopyFrom(scope_spans.scope)
                    group.schema_url = scope_spans.schema_url
                group.spans.append(span)
                size += needed
    if size:
        out.append(current)
    return out


def encode_request(items: Sequence[Item]) -> ExportTraceServiceRequest:
    """One export request for ``items``, received spans copied from their original message."""
    resources: dict[int, tuple[Resource, dict[int, tuple[InstrumentationScope | None, list[Any]]]]]
    resources = {}
    raw: list[RawSpans] = []
    for span in items:
        if type(span) is RawSpans:
            raw.append(span)
            continue
        assert isinstance(span, ReadableSpan)
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
    for batch in raw:
        request.resource_spans.extend(batch.request.resource_spans)
    return request


class FileForwarder(FileSpanExporter):
    """Appends spans to a file as OTLP/JSON lines, as ``configure(output_file=)`` does."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = self._out.append(otlp_json(encode_request(spans)))
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE


def otlp_forwarder(
    endpoint: str | None,
    protocol: str,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> SpanExporter:
    """The SDK's OTLP span exporter for ``protocol``, sending ``encode_request``'s output.

    With ``endpoint=None`` the exporter reads ``OTEL_EXPORTER_OTLP_*`` itself.
    """
    if protocol == "grpc":
        module = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")

        class GrpcForwarder(module.OTLPSpanExporter):  # type: ignore[name-defined,misc]
            """The SDK's OTLP/gRPC exporter, encoding with ``encode_request``."""

            def _translate_data(self, data: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
                return encode_request(data)

        return GrpcForwarder(  # type: ignore[no-any-return]
            endpoint=endpoint, headers=dict(headers) if headers else None, timeout=timeout
        )
    module = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")

    class HttpForwarder(module.OTLPSpanExporter):  # type: ignore[name-defined,misc]
        """The SDK's OTLP/HTTP exporter, encoding with ``encode_request``."""

        def export(self, spans: Sequence[Item]) -> SpanExportResult:  # type: ignore[override]
            if getattr(self, "_shutdown", False):
                return SpanExportResult.FAILURE
            try:
                data = encode_request(spans).SerializePartialToString()
                client = getattr(self, "_client", None)
                if client is not None:  # the SDK's HTTP client object, where it has one
                    ok = bool(client.export(data).success)
                else:  # SDKs without it post with _export (and retry in export())
                    ok = bool(self._export(data, self._timeout).ok)
            except Exception:
                _guard.exception("OTLP/HTTP export raised")
                return SpanExportResult.FAILURE
            # A failure is retried by the forwarding sink, with backoff.
            return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    url = f"{endpoint.rstrip('/')}/v1/traces" if endpoint else None
    return HttpForwarder(endpoint=url, headers=headers, timeout=timeout)  # type: ignore[no-any-return]


def file_forwarder(path: Path) -> SpanExporter:
    """OTLP/JSON lines in ``path``."""
    return FileForwarder(path)
