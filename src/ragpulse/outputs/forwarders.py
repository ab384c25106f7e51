"""Where a relay sends what it forwards: the SDK's OTLP exporters sending bytes, or a file.

The exporters are the SDK's OTLP exporters of each signal, built by
``ragpulse.outputs.build`` (so they read every standard ``OTEL_EXPORTER_OTLP_*``
variable: endpoint, headers, certificates, compression, timeout), made to send a
relay's items (``ragpulse.outputs.relayed``): received requests joined as bytes, spans
encoded. ``SignalFile`` appends them as OTLP/JSON lines instead, as
``configure(output_file=)`` does. Each is a ``Forwarder``: ``send(items) -> bool``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as OTLPGrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.exporter import OTLPExporterMixin
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
    OTLPMetricExporter as OTLPGrpcMetricExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as OTLPGrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as OTLPHttpLogExporter,
)
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as OTLPHttpMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as OTLPHttpSpanExporter,
)

from ragpulse._guard import Guard
from ragpulse.outputs.build import Exporters
from ragpulse.outputs.files import _Appender, otlp_json
from ragpulse.outputs.relayed import (
    LOGS,
    METRICS,
    TRACES,
    Item,
    RelayedSignal,
    encode_items,
    item_count,
)

__all__ = ["Forwarder", "SignalFile", "forwarder_class", "forwarder_for"]

# Internal errors are logged throttled: one export failing in a loop is one line and a count.
_guard = Guard("ragpulse.outputs.forwarders")


class Forwarder(Protocol):
    """Sends the items of one signal's relay as one request: OTLP, or its file."""

    def send(self, items: Sequence[Item]) -> bool:
        """One request; True when the destination took it."""
        ...

    def shutdown(self) -> Any:
        """Stop sending (aborts the exporter's own retries)."""
        ...


class SignalFile:
    """Appends a relay's items to its signal's file as OTLP/JSON lines."""

    def __init__(self, path: Path, signal: RelayedSignal) -> None:
        self._out = _Appender.of(path)
        self.path = self._out.path
        self._signal = signal

    def send(self, items: Sequence[Item]) -> bool:
        return self._out.append(otlp_json(self._signal.request.FromString(encode_items(items))))

    def shutdown(self) -> None:
        return None


class _GrpcSend:
    """Sending through the SDK's OTLP/gRPC exporter: its channel, retries and headers."""

    # Not ``_signal``: the SDK's exporter has an attribute of that name.
    _relayed: RelayedSignal

    def _translate_data(self, data: Sequence[Item]) -> Any:
        return self._relayed.request.FromString(encode_items(data))

    def _count_data(self, data: Sequence[Item]) -> int:
        return sum(item_count(item) for item in data)

    def send(self, items: Sequence[Item]) -> bool:
        result = OTLPExporterMixin._export(self, items)  # type: ignore[arg-type,type-var]
        return bool(result is self._result.SUCCESS)  # type: ignore[attr-defined]


class _GrpcTraces(_GrpcSend, OTLPGrpcSpanExporter):  # type: ignore[misc]
    _relayed = TRACES


class _GrpcLogs(_GrpcSend, OTLPGrpcLogExporter):  # type: ignore[misc]
    _relayed = LOGS


class _GrpcMetrics(_GrpcSend, OTLPGrpcMetricExporter):  # type: ignore[misc]
    _relayed = METRICS


class _HttpSend:
    """Posting through the SDK's OTLP/HTTP exporter: its session, URL and headers."""

    def send(self, items: Sequence[Item]) -> bool:
        if getattr(self, "_shutdown", False):
            return False
        try:
            data = encode_items(items)
            client = getattr(self, "_client", None)
            if client is not None:  # the SDK's HTTP client object, where it has one
                return bool(client.export(data).success)
            # SDKs without it post with _export.
            return bool(self._export(data, self._timeout).ok)  # type: ignore[attr-defined]
        except Exception:
            _guard.exception("OTLP/HTTP relay export raised")
            return False


class _HttpTraces(_HttpSend, OTLPHttpSpanExporter):  # type: ignore[misc]
    pass


class _HttpLogs(_HttpSend, OTLPHttpLogExporter):  # type: ignore[misc]
    pass


class _HttpMetrics(_HttpSend, OTLPHttpMetricExporter):  # type: ignore[misc]
    pass


_CLASSES: dict[tuple[str, bool], type] = {
    ("traces", True): _GrpcTraces,
    ("traces", False): _HttpTraces,
    ("logs", True): _GrpcLogs,
    ("logs", False): _HttpLogs,
    ("metrics", True): _GrpcMetrics,
    ("metrics", False): _HttpMetrics,
}


def forwarder_class(signal: RelayedSignal, protocol: str) -> type:
    """The OTLP exporter class that sends ``signal``'s relayed items over ``protocol``."""
    return _CLASSES[(signal.name, protocol == "grpc")]


def forwarder_for(exporters: Exporters, signal: RelayedSignal) -> Forwarder:
    """Where ``signal``'s relayed items go: where the setup's own exporters send that signal
    (its own endpoint and protocol, else the base ones), else the signal's file.

    Built after the setup's providers: where their exporters fell back to a file, the relay
    writes it too.
    """
    s = exporters.settings
    wanted = signal.name not in exporters.files
    protocol = s.signal_protocol(signal.name)
    otlp = exporters.otlp(signal.name, forwarder_class(signal, protocol)) if wanted else None
    if otlp is not None:
        forwarder: Forwarder = otlp
        return forwarder
    return SignalFile(exporters.file(signal.name), signal)
