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
