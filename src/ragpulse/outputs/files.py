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
import logging
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

from ragpulse import semconv
from ragpulse.outputs.delivery import DROP_UNWRITABLE, OnDrop

_logger = logging.getLogger("ragpulse.export")

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

_WHAT = {"traces": "spans", "logs": "evaluation events", "metrics": "metric snapshots"}


class _Appender:
    """Appends lines to one file, and says when it cannot.

    A file that cannot be written (a directory, a path under ``/proc``, a full disk, no
    permission) loses what is exported to it; that must not pass in silence. The first
    failure of an outage is logged with the path, the system's reason and what happens
    instead; each lost export is counted by the exporter; ``flush`` says False when an
    append failed since the last one, so ``force_flush()`` tells the truth.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._failing: str | None = None
        """Why appending fails now (the system's words); None while it works."""
        self._lost_since_flush = False

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

    def append(self, line: str, signal: str | None = None) -> bool:
        """Append one line of ``signal``; False (the failure noted) when the file cannot be
        written."""
        return self._write(line + "\n", signal)

    def check(self, signal: str) -> bool:
        """Whether the file can be written, found by opening it to append (it is created,
        empty, when it did not exist); when not, one warning saying what is lost."""
        return self._write("", signal)

    def _write(self, text: str, signal: str | None = None) -> bool:
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(text)
        except OSError as exc:
            self._failed(exc, signal, lost=bool(text))
            return False
        if self._failing is not None:
            self._failing = None
            _logger.info("ragpulse: writing to %s again", self.path)
        return True

    def _failed(self, exc: OSError, signal: str | None, *, lost: bool) -> None:
        why = exc.strerror or str(exc)
        if lost:
            self._lost_since_flush = True
        if self._failing == why:
            return  # logged once per outage, not once per export
        self._failing = why
        what = _WHAT.get(signal or "", "what is exported to it")
        _logger.warning(
            "ragpulse: cannot write %s to %s (%s: %s); they are dropped, counted in %s "
            "(reason %s), and force_flush() returns False until it can be written. Set "
            "output_file (RAGPULSE_OUTPUT_FILE) to a file that can be written, or an OTLP "
            "endpoint",
            what,
            self.path,
            exc.filename if exc.filename is not None else self.path,
            why,
            semconv.METRIC_EXPORT_DROPPED,
            DROP_UNWRITABLE,
        )

    def flush(self, timeout: float | None = None) -> bool:
        """False when an append failed since the last flush (what it carried is lost)."""
        with self._lock:
            lost, self._lost_since_flush = self._lost_since_flush, False
        return not lost

    def shutdown(self, timeout: float | None = None) -> bool:
        """Nothing is buffered here: ``flush``."""
        return self.flush(timeout)


class _FileExporter:
    """What the three file exporters share: the file, and the count of what it lost."""

    signal = ""

    def __init__(self, path: str | Path, on_drop: OnDrop | None = None) -> None:
        self.output = _Appender.of(path)
        """Flushed with the setup (``force_flush()`` is False while exports are lost)."""
        self.path = self.output.path
        self._on_drop = on_drop

    def check(self) -> bool:
        """Whether the file can be written; when not, one warning saying what is lost."""
        return self.output.check(self.signal)

    def _append(self, message: Message, count: int) -> bool:
        if self.output.append(otlp_json(message), self.signal):
            return True
        if self._on_drop is not None:
            try:
                self._on_drop(self.signal, DROP_UNWRITABLE, count)
            except Exception:
                _logger.debug("ragpulse: counting unwritten exports failed", exc_info=True)
        return False


class FileSpanExporter(_FileExporter, SpanExporter):
    """Appends spans to ``path`` as OTLP/JSON lines; ``on_drop`` counts what it cannot write."""

    signal = "traces"

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = self._append(encode_spans(spans), len(spans))
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        return None


class FileLogExporter(_FileExporter, LogRecordExporter):
    """Appends log records (the evaluation events) to ``path`` as OTLP/JSON lines."""

    signal = "logs"

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        ok = self._append(encode_logs(batch), len(batch))
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        return None


class FileMetricExporter(_FileExporter, MetricExporter):
    """Appends metric snapshots to ``path`` as OTLP/JSON lines (cumulative)."""

    signal = "metrics"

    def __init__(self, path: str | Path, on_drop: OnDrop | None = None) -> None:
        MetricExporter.__init__(self, preferred_temporality={}, preferred_aggregation={})
        _FileExporter.__init__(self, path, on_drop)

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        ok = self._append(encode_metrics(metrics_data), 1)
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
