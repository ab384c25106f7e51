"""The GenAI content events of a received OTLP logs request (``adapters._content_events``).

``ragpulse serve`` relays log requests as they came; before that, the records that carry a
chat call's messages (the GenAI instrumentation's legacy per-message events and its
``gen_ai.client.inference.operation.details`` event) are read out for the trace assembler,
which reads them onto their spans as the application's process does. A request whose bytes
hold no ``gen_ai.`` at all is not walked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as PbLogRecord

from ragpulse import semconv
from ragpulse.adapters._content_events import CONTENT_EVENT_NAMES, ContentEvent, content_event
from ragpulse.serve._assembly import TraceAssembler
from ragpulse.serve._convert import any_value, attributes_of

_MARK = b"gen_ai."


def content_events(
    request: ExportLogsServiceRequest, body: bytes | None = None
) -> Iterator[ContentEvent]:
    """Each GenAI content event of ``request`` (``body``: its protobuf, when it came so)."""
    if body is not None and _MARK not in body:
        return
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                event = otlp_content_event(record)
                if event is not None:
                    yield event


def take_content_events(
    assembler: TraceAssembler,
    request: ExportLogsServiceRequest,
    body: bytes | None = None,
    in_sample: Callable[[int], bool] | None = None,
) -> dict[str, int]:
    """Hand the GenAI content events of ``request`` to ``assembler``, which reads them onto
    their spans: serve's logs intake, and ``ragpulse eval``'s for a trace file's log lines.
    ``in_sample``: which traces' events are taken (default: every trace's). Returns the events
    the assembler dropped, by reason (``late``, ``bounds``)."""
    dropped: dict[str, int] = {}
    for event in content_events(request, body):
        if in_sample is not None and not in_sample(event.trace_id):
            continue
        reason = assembler.add_event(event)
        if reason is not None:
            dropped[reason] = dropped.get(reason, 0) + 1
    return dropped


def otlp_content_event(record: PbLogRecord) -> ContentEvent | None:
    """``content_event`` of one OTLP log record; ``None`` for any other record."""
    name = record.event_name or None
    if name is None:
        for pair in record.attributes:
            if pair.key == semconv.EVENT_NAME:
                name = pair.value.string_value
                break
    if name not in CONTENT_EVENT_NAMES:
        return None
    trace_id, span_id = record.trace_id, record.span_id
    if len(trace_id) != 16 or len(span_id) != 8:
        return None
    body = any_value(record.body) if record.HasField("body") else None
    return content_event(
        name,
        int.from_bytes(trace_id, "big"),
        int.from_bytes(span_id, "big"),
        body,
        attributes_of(record.attributes),
    )
