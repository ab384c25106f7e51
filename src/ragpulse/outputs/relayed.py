"""What a relay forwards: OTLP export requests of one signal, as bytes, and the spans it encodes.

``ragpulse serve`` passes most of what it receives on as the bytes it came in. A
received request, or the part of it that goes on unchanged, is one ``Received``: a
serialized export request of its signal (``TRACES``, ``LOGS``, ``METRICS``).
Serialized requests concatenate into one (their top-level field is repeated), so a
batch of them is a join of bytes, never a decode and re-encode. The spans a relay
holds as SDK spans (units waiting for evaluation, and the rebuilt evaluated ones) are
encoded by ``encode_request``: an ``OtlpSpan`` (a span that still has the OTLP message
it was read from, a rebuilt one too) is written back from its message, any other span
(a late result's carrier span) with the SDK's encoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_resource,
)
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import _encode_span
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from ragpulse.outputs.delivery import span_bound

__all__ = [
    "LOGS",
    "METRICS",
    "RELAYED",
    "SIGNALS",
    "TRACES",
    "Item",
    "OtlpSpan",
    "Received",
    "RelayedSignal",
    "encode_items",
    "encode_request",
    "item_bytes",
    "item_count",
    "items_bytes",
    "split_request",
]


@dataclass(frozen=True)
class RelayedSignal:
    """One OTLP signal a relay forwards: its export request and response, and their fields."""

    name: str
    """``traces``, ``logs`` or ``metrics``: the signal, its file suffix and HTTP path end."""
    service: str
    """The gRPC service that receives it."""
    request: type[Any]
    response: type[Any]
    resources: str
    scopes: str
    records: str

    @property
    def path(self) -> str:
        """The OTLP/HTTP path that receives it."""
        return f"/v1/{self.name}"

    def count(self, request: Message) -> int:
        """The records (spans, log records, metrics) ``request`` carries."""
        return sum(
            len(getattr(scope, self.records))
            for resource in getattr(request, self.resources)
            for scope in getattr(resource, self.scopes)
        )


TRACES = RelayedSignal(
    "traces",
    "opentelemetry.proto.collector.trace.v1.TraceService",
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
    "resource_spans",
    "scope_spans",
    "spans",
)
LOGS = RelayedSignal(
    "logs",
    "opentelemetry.proto.collector.logs.v1.LogsService",
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
    "resource_logs",
    "scope_logs",
    "log_records",
)
METRICS = RelayedSignal(
    "metrics",
    "opentelemetry.proto.collector.metrics.v1.MetricsService",
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
    "resource_metrics",
    "scope_metrics",
    "metrics",
)
SIGNALS = (TRACES, LOGS, METRICS)
RELAYED = (LOGS, METRICS)
"""The signals relayed whole, read only to check them (spans are routed and judged)."""


@dataclass(frozen=True, slots=True)
class Received:
    """Records forwarded as they came: a serialized export request of the relay's signal."""

    data: bytes
    count: int
    """Records it carries."""
    held: int
    """Bytes it holds in the relay's budget until it is delivered or dropped."""


class OtlpSpan(ReadableSpan):
    """A ``ReadableSpan`` that still has the OTLP ``Span`` message it was read from.

    It is written back from ``otlp`` rather than encoded anew: exact, and several times
    cheaper. Whoever changes its attributes writes them into a copy of the message too.
    """

    def __init__(self, otlp: PbSpan, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.otlp = otlp


_R = TypeVar("_R", bound=Message)

Item = ReadableSpan | Received
"""What a relay queues: received records as bytes, or (the traces relay) one SDK span."""


def item_count(item: Item) -> int:
    """Records in one queued item."""
    return item.count if type(item) is Received else 1


# Bytes a record's framing adds inside its scope group (tag and length prefix).
_RECORD_FRAMING = 6
# Bytes the resources and scopes of a batch of spans add, generously (as
# ragpulse.outputs.delivery bounds them); a batch that looks too big is encoded to be measured.
_PER_BATCH = 16 * 1024


def item_bytes(item: Item) -> int:
    """Bytes ``item`` adds to an encoded export request, its resources and scopes left out.

    Exact for bytes forwarded as they came and for an ``OtlpSpan`` (its message's size and
    framing); for any other span (a late result's carrier span) an upper bound read from
    its fields (``span_bound``): it is encoded once, when it leaves, not also to be measured.
    """
    if type(item) is Received:
        return len(item.data)
    if isinstance(item, OtlpSpan):
        return int(item.otlp.ByteSize()) + _RECORD_FRAMING
    assert isinstance(item, ReadableSpan)
    return span_bound(item) + _RECORD_FRAMING


def items_bytes(items: Sequence[Item], limit: int) -> int:
    """Bytes of the request ``items`` encode to: exact when near or over ``limit`` (or all
    received bytes), else an upper bound."""
    size = sum(item_bytes(item) for item in items)
    if all(type(item) is Received for item in items):
        return size
    size += _PER_BATCH
    return size if size <= limit else len(encode_items(items))


def split_request(request: _R, max_bytes: int, signal: RelayedSignal = TRACES) -> list[_R]:
    """``request`` (of ``signal``) cut into requests of at most ``max_bytes`` encoded,
    resources and scopes kept.

    Records stay in order; a record that alone passes the bound goes in a request of its own.
    """
    if request.ByteSize() <= max_bytes:
        return [request]
    resources, scopes, records = signal.resources, signal.scopes, signal.records
    out: list[_R] = []
    current = type(request)()
    size = 0
    for resource_group in getattr(request, resources):
        for scope_group in getattr(resource_group, scopes):
            # The resource and scope are written again in every request a group spans.
            overhead = resource_group.resource.ByteSize() + scope_group.scope.ByteSize()
            overhead += 4 * _RECORD_FRAMING
            group: Any = None
            for record in getattr(scope_group, records):
                record_size = record.ByteSize() + _RECORD_FRAMING
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
    """One export request for ``spans``, an ``OtlpSpan`` copied from its message."""
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
        group[1].append(span.otlp if isinstance(span, OtlpSpan) else _encode_span(span))
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
    """The serialized export request of ``items``: received bytes joined, spans encoded."""
    if len(items) == 1 and type(items[0]) is Received:
        return items[0].data
    raw = [item.data for item in items if type(item) is Received]
    spans = [item for item in items if type(item) is not Received]
    if spans:
        raw.append(encode_request(spans).SerializePartialToString())  # type: ignore[arg-type]
    return raw[0] if len(raw) == 1 else b"".join(raw)
