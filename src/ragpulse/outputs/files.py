"""Exporters that append OTLP-JSON lines to a file, so nothing is lost without a backend.

Each line is one export request in the OTLP/JSON encoding (the protobuf JSON
mapping with hex trace and span ids and enums as integers), readable by the Collector's
``otlpjsonfile`` receiver and by ``jq``. A line holds no character that any reader
could take for a line break: besides the control characters JSON always escapes,
U+0085, U+2028 and U+2029 are written as ``\\u`` escapes, and so is a lone surrogate,
which UTF-8 cannot encode. ``read_lines`` reads such files back on ``\\n`` alone, so one
damaged line costs that line and no other.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from google.protobuf.message import Message  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def _hex_ids(value: Any) -> Any:
    # OTLP/JSON spells ids in hex; the generic protobuf mapping uses base64.
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _ID_KEYS and isinstance(item, str):
                out[key] = base64.b64decode(item).hex()
            else:
                out[key] = _hex_ids(item)
        return out
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value


# Characters str.splitlines() (and JavaScript, and some editors) take for a line break that
# json.dumps leaves raw, and lone surrogates, which no UTF-8 file can hold. Outside strings a
# JSON text is ASCII, so each can only sit inside a string, where its \\u escape means the same.
_UNSAFE_IN_A_LINE = re.compile("[\\u0085\\u2028\\u2029\\ud800-\\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_unsafe(json_text: str) -> str:
    """A JSON text with its line-breaking characters and lone surrogates as ``\\u`` escapes."""
    return _UNSAFE_IN_A_LINE.sub(_escape, json_text)


def json_line(value: Any) -> str:
    """``value`` as one JSON line that stays one line for every reader, and encodes as UTF-8."""
    return escape_unsafe(json.dumps(value, ensure_ascii=False))


def otlp_json(message: Message) -> str:
    """One OTLP/JSON line for an export request (enums as integers, as OTLP/JSON requires
    and receivers such as rotel insist on)."""
    return json_line(_hex_ids(MessageToDict(message, use_integers_for_enums=True)))


def read_lines(path: str | Path, *, start: int = 0) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of ``path`` from byte ``start``, split on ``\\n`` only.

    Read one line at a time; bytes that are not UTF-8 become U+FFFD and a leading byte
    order mark is dropped. ``OSError`` propagates.
    """
    with Path(path).open("rb") as stream:
        stream.seek(start)
        for number, raw in enumerate(stream, start=1):
            if number == 1 and start == 0 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            yield number, raw.decode("utf-8", "replace").rstrip("\r\n")


_APPENDERS: weakref.WeakValueDictionary[str, _Appender] = weakref.WeakValueDictionary()
_APPENDERS_LOCK = threading.Lock()


class _Appender:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, path: str | Path) -> _Appender:
        """The one appender of ``path``: writers of one file share its lock, so lines never
        interleave (``ragpulse serve`` writes its own events and relayed logs to one file)."""
        key = os.path.abspath(path)
        with _APPENDERS_LOCK:
            appender = _APPENDERS.get(key)
            if appender is None:
                appender = _APPENDERS[key] = cls(path)
            return appender

    def append(self, line: str) -> bool:
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
            return True
        except OSError:
            return False


class FileSpanExporter(SpanExporter):
    """Appends spans to ``path`` as OTLP/JSON lines."""

    def __init__(self, path: str | Path) -> None:
        self._out = _Appender.of(path)
        self.path = self._out.path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = self._out.append(otlp_json(encode_spans(spans)))
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        return None


class FileLogExporter(LogRecordExporter):
    """Appends log records (the evaluation events) to ``path`` as OTLP/JSON lines."""

    def __init__(self, path: str | Path) -> None:
        self._out = _Appender.of(path)
        self.path = self._out.path

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        ok = self._out.append(otlp_json(encode_logs(batch)))
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        return None


class FileMetricExporter(MetricExporter):
    """Appends metric snapshots to ``path`` as OTLP/JSON lines (cumulative)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(preferred_temporality={}, preferred_aggregation={})
        self._out = _Appender.of(path)
        self.path = self._out.path

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        ok = self._out.append(otlp_json(encode_metrics(metrics_data)))
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


__all__ = [
    "FileLogExporter",
    "FileMetricExporter",
    "FileSpanExporter",
    "escape_unsafe",
    "json_line",
    "otlp_json",
    "read_lines",
]
