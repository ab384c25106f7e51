"""serve's own log events (``gen_ai.evaluation.result``), encoded straight to OTLP.

In an application the evaluation events go through the SDK's logger provider. In
``ragpulse serve`` that path cost about 0.2 ms of CPU per evaluation, a fifth of
serve's own work on it: the SDK checks each attribute of each record one by one
(``BoundedAttributes``), queues the record for its batch thread, and its exporter
encodes it again through a generic encoder. The attributes of these events are
made under the content policy (in the judge's process, or the sink) and are plain
strings, numbers and booleans, so here each record becomes one protobuf message
at once, in an export request of serve's resource and the ``ragpulse`` scope, and
joins the log requests serve relays: the same delivery (retried, byte-bounded,
merged into one export), the same exporter and endpoint, or the same ``-logs`` file.

The SDK's log-record limits (``OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT`` and
``..._VALUE_LENGTH_LIMIT``, or the general attribute limits) apply as they would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry._logs import Logger, LoggerProvider, LogRecord, SeverityNumber
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common._internal import _encode_value
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as PbLogRecord
from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.sdk._logs import LogRecordLimits
from opentelemetry.sdk.resources import Resource
from opentelemetry.util.types import AnyValue, Attributes

from ragpulse._guard import Guard
from ragpulse.outputs.relay import Relay
from ragpulse.serve._convert import add_key_values

_guard = Guard("ragpulse.serve.events")


class RelayedEventsProvider(LoggerProvider):
    """Loggers whose records go into ``relay`` (serve's log relay) as OTLP requests."""

    def __init__(self, resource: Resource, relay: Relay) -> None:
        self._resource = PbResource()
        add_key_values(self._resource.attributes, resource.attributes)
        self._schema_url = resource.schema_url or ""
        self._relay = relay
        self._limits = LogRecordLimits()

    def get_logger(
        self,
        name: str,
        version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
    ) -> Logger:
        scope = InstrumentationScope(name=name, version=version or "")
        if attributes:
            add_key_values(scope.attributes, attributes)
        group = ResourceLogs(resource=self._resource, schema_url=self._schema_url)
        group.scope_logs.add(scope=scope, schema_url=schema_url or "")
        return RelayedEventLogger(name, version, schema_url, attributes, self, group)

    def emit(self, group: ResourceLogs, record: PbLogRecord) -> None:
        """Queue ``record`` in one request of ``group``'s resource and scope."""
        request = ExportLogsServiceRequest()
        copied = request.resource_logs.add()
        copied.CopyFrom(group)
        copied.scope_logs[0].log_records.append(record)
        self._relay.forward_own(request.SerializeToString(), 1)

    def add_attributes(self, record: PbLogRecord, attributes: Mapping[str, Any]) -> None:
        """Write ``attributes`` into ``record`` within the log-record limits, counting those
        dropped."""
        limits = self._limits
        count = limits.max_log_record_attributes
        length = limits.max_log_record_attribute_length
        if (count is not None and len(attributes) > count) or length is not None:
            items = list(attributes.items())
            if count is not None and len(items) > count:
                record.dropped_attributes_count = len(items) - count
                items = items[:count]
            if length is not None:
                items = [(key, _cut(value, length)) for key, value in items]
            attributes = dict(items)
        add_key_values(record.attributes, attributes)


class RelayedEventLogger(Logger):
    """Encodes each record it is given at once and hands it to its provider."""

    def __init__(
        self,
        name: str,
        version: str | None,
        schema_url: str | None,
        attributes: Attributes,
        provider: RelayedEventsProvider,
        group: ResourceLogs,
    ) -> None:
        super().__init__(name, version, schema_url, attributes)
        self._provider = provider
        self._group = group

    def enabled(
        self,
        *,
        context: Context | None = None,
        severity_number: SeverityNumber | None = None,
        event_name: str | None = None,
    ) -> bool:
        return True

    def emit(self, record: LogRecord | None = None, **fields: Any) -> None:  # type: ignore[override]
        try:
            if record is None:
                record = LogRecord(**fields)
            self._provider.emit(self._group, self._encode(record))
        except Exception:
            # An event that cannot be written costs that event, never the evaluation.
            _guard.exception("ragpulse: could not write an evaluation event")

    def _encode(self, record: LogRecord) -> PbLogRecord:
        encoded = PbLogRecord(
            time_unix_nano=record.timestamp or 0,
            observed_time_unix_nano=record.observed_timestamp or 0,
            severity_text=record.severity_text or "",
            event_name=record.event_name or "",
            flags=int(record.trace_flags or 0),
        )
        self._provider.add_attributes(encoded, record.attributes or {})
        if record.severity_number is not None:
            encoded.severity_number = record.severity_number.value  # type: ignore[assignment]
        if record.trace_id:
            encoded.trace_id = record.trace_id.to_bytes(16, "big")
        if record.span_id:
            encoded.span_id = record.span_id.to_bytes(8, "big")
        if record.body is not None:
            encoded.body.CopyFrom(_encode_value(record.body))
        return encoded


def _cut(value: AnyValue, length: int) -> AnyValue:
    if isinstance(value, str):
        return value[:length]
    if isinstance(value, tuple | list):
        return type(value)(item[:length] if isinstance(item, str) else item for item in value)
    return value
