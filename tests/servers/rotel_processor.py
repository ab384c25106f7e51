"""A rotel Python processor that writes every received span and log record as one JSON line.

rotel loads this file into its embedded interpreter (``--otlp-with-trace-processor`` and
``--otlp-with-logs-processor``) and calls ``process_spans`` / ``process_logs`` with each
``ResourceSpans`` / ``ResourceLogs`` it receives over OTLP. Nothing is changed in the data, so
in forward mode the backend receives exactly what the application sent.

Output files are named by ``ROTEL_SINK_SPANS_FILE`` and ``ROTEL_SINK_LOGS_FILE``. Attribute
values keep their OTLP types: double -> JSON float, int -> JSON int, bool, string, array -> list,
kvlist -> object, bytes -> ``{"bytes": "<hex>"}``. A double is always written with a decimal
point or exponent (``json`` does that for floats), so a reader can tell ``1.0`` from ``1``.

Only the standard library is used: the embedded interpreter is the system Python, not the
project's virtual environment.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rotel_sdk only exists inside the rotel-agent process.
    from rotel_sdk.open_telemetry.logs.v1 import ResourceLogs
    from rotel_sdk.open_telemetry.trace.v1 import ResourceSpans

SPANS_FILE_ENV = "ROTEL_SINK_SPANS_FILE"
LOGS_FILE_ENV = "ROTEL_SINK_LOGS_FILE"

# rotel may call the processor from several receiver tasks; one lock keeps each batch's lines
# together so a reader never sees two half-written lines interleaved.
_write_lock = threading.Lock()


def _value(any_value: Any) -> Any:
    """Convert a rotel ``AnyValue`` (or its bare ``.value``) into a typed JSON value."""
    raw = getattr(any_value, "value", any_value) if any_value is not None else None
    if raw is None or isinstance(raw, (bool, int, float, str)):
        return raw
    if isinstance(raw, bytes):
        return {"bytes": raw.hex()}
    kind = type(raw).__name__
    if kind == "ArrayValue":
        return [_value(item) for item in raw]
    if kind == "KeyValueList":
        return _attributes(raw)
    return repr(raw)


def _attributes(key_values: Iterable[Any] | None) -> dict[str, Any]:
    if key_values is None:
        return {}
    return {kv.key: _value(kv.value) for kv in key_values}


def _hex(raw: bytes | None) -> str | None:
    # OTLP marks "no parent" (and "no trace" on logs) with an empty byte string.
    return raw.hex() if raw else None


def _scope(scope: Any) -> dict[str, Any]:
    if scope is None:
        return {"name": "", "version": "", "attributes": {}}
    return {
        "name": scope.name,
        "version": scope.version,
        "attributes": _attributes(scope.attributes),
    }


def _span(span: Any, resource: dict[str, Any], scope: dict[str, Any]) -> dict[str, Any]:
    status = span.status
    return {
        "name": span.name,
        "trace_id": _hex(span.trace_id),
        "span_id": _hex(span.span_id),
        "parent_span_id": _hex(span.parent_span_id),
        "trace_state": span.trace_state,
        "flags": span.flags,
        "kind": span.kind,
        "status": {
            "code": status.code if status is not None else 0,
            "message": status.message if status is not None else "",
        },
        "start_time_unix_nano": span.start_time_unix_nano,
        "end_time_unix_nano": span.end_time_unix_nano,
        "attributes": _attributes(span.attributes),
        "dropped_attributes_count": span.dropped_attributes_count,
        "events": [
            {
                "name": event.name,
                "time_unix_nano": event.time_unix_nano,
                "attributes": _attributes(event.attributes),
            }
            for event in span.events
        ],
        "links": [
            {
                "trace_id": _hex(link.trace_id),
                "span_id": _hex(link.span_id),
                "trace_state": link.trace_state,
                "attributes": _attributes(link.attributes),
            }
            for link in span.links
        ],
        "resource": resource,
        "scope": scope,
    }


def _log(record: Any, resource: dict[str, Any], scope: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_name": getattr(record, "event_name", ""),
        "time_unix_nano": record.time_unix_nano,
        "observed_time_unix_nano": record.observed_time_unix_nano,
        "severity_number": record.severity_number,
        "severity_text": record.severity_text,
        "body": _value(record.body),
        "attributes": _attributes(record.attributes),
        "trace_id": _hex(record.trace_id),
        "span_id": _hex(record.span_id),
        "flags": record.flags,
        "resource": resource,
        "scope": scope,
    }


def _append(env_name: str, lines: list[dict[str, Any]]) -> None:
    path = os.environ.get(env_name)
    if not path or not lines:
        return
    text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
    with _write_lock, open(path, "a", encoding="utf-8") as out:
        out.write(text)
        out.flush()


def process_spans(resource_spans: ResourceSpans) -> None:
    """Write each span of one OTLP ``ResourceSpans`` as a JSON line; leave the data unchanged."""
    resource = _attributes(resource_spans.resource.attributes if resource_spans.resource else None)
    lines = [
        _span(span, resource, _scope(scope_spans.scope))
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    _append(SPANS_FILE_ENV, lines)


def process_logs(resource_logs: ResourceLogs) -> None:
    """Write each log record of one OTLP ``ResourceLogs`` as a JSON line; leave it unchanged."""
    resource = _attributes(resource_logs.resource.attributes if resource_logs.resource else None)
    lines = [
        _log(record, resource, _scope(scope_logs.scope))
        for scope_logs in resource_logs.scope_logs
        for record in scope_logs.log_records
    ]
    _append(LOGS_FILE_ENV, lines)
