"""OTLP-JSON lines files as an OpenTelemetry Collector's ``file`` exporter writes them.

One export request per line, in the OTLP/JSON encoding: the protobuf JSON mapping with
lowerCamelCase keys, enums as integers, 64-bit integers as strings and trace and span ids
in lower-case hex (not the mapping's base64). Written here from the protobuf bodies an OTLP
receiver took (``OtlpRecorder``), or from SDK spans, with this module's own encoding, so a
reader is tested against a writer that is not ragpulse's.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

from .otlp_recorder import Received

_IDS = {"traceId", "spanId", "parentSpanId"}
_REQUESTS = {"/v1/traces": ExportTraceServiceRequest, "/v1/logs": ExportLogsServiceRequest}


def _hex(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: base64.b64decode(item).hex() if key in _IDS else _hex(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_hex(item) for item in value]
    return value


def collector_line(message: Any) -> str:
    """One export request as one line of the Collector's file exporter."""
    document = MessageToDict(message, use_integers_for_enums=True)
    return json.dumps(_hex(document), separators=(",", ":"))


def spans_line(spans: Sequence[ReadableSpan]) -> str:
    """SDK spans as one line (one export request)."""
    return collector_line(encode_spans(spans))


def write_received(path: Path, received: Iterable[Received]) -> Path:
    """What an OTLP/HTTP receiver took (protobuf bodies of traces and logs), one line per
    request, in the order it arrived."""
    lines = []
    for request in received:
        message_type = _REQUESTS.get(request.path)
        if message_type is None:
            continue
        body = request.body
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        message = message_type()
        message.ParseFromString(body)
        lines.append(collector_line(message))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def hex_id(value: int, width: int) -> str:
    """An id as OTLP/JSON spells it."""
    return format(value, f"0{width * 2}x")
