"""``Relay``: the log records and metrics an application sends to ``ragpulse serve``, passed on.

An application whose OTLP endpoint is serve sends every signal there: its log
events (the ``ragpulse.feedback`` events among them) and its metrics beside its
spans. Serve reads them only to check they are an export request of their
signal, then forwards each request as the bytes it came in (a JSON body
re-encoded as protobuf) to serve's own destination for that signal: the OTLP
exporter of the same ``OTEL_EXPORTER_OTLP_*`` endpoint, protocol and headers as
its traces, or OTLP-JSON lines in its ``-logs`` / ``-metrics`` file. Their
content is relayed unchanged, as a Collector relays it: ``capture_content`` and
``redact`` are the sender's to apply. serve's own evaluation events join the logs
relayed (``forward_own``, from ``ragpulse.serve._events``), already under serve's
content policy.

Delivery is the one serve's spans go through (``relay_delivery``): retried with
backoff for ``export_buffer_seconds``, requests queued behind the one in flight
merged up to ``export_max_batch_bytes`` (serialized requests concatenate, their
top-level field being repeated, so merging is a join of bytes), larger requests
cut below it. The bytes are held in serve's ``ByteBudget`` until delivered or
dropped, so a backend outage fills the same bound and senders are refused
(retryably) rather than memory growing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as OTLPGrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.exporter import OTLPExporterMixin
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
    OTLPMetricExporter as OTLPGrpcMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as OTLPHttpLogExporter,
)
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as OTLPHttpMetricExporter,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

from ragpulse._guard import Guard
from ragpulse.outputs.delivery import Delivery, ExitDeadline, OnDrop
from ragpulse.outputs.files import _Appender, otlp_json
from ragpulse.outputs.refusal import take_refusal
from ragpulse.serve._byte_budget import ByteBudget
from ragpulse.serve._convert import decode_json, decode_protobuf
from ragpulse.serve._encode import split_request
from ragpulse.serve._forwarding import relay_delivery
from ragpulse.settings import Settings

_logger = logging.getLogger("ragpulse.serve.export")
# Internal errors are logged throttled: one export failing in a loop is one line and a count.
_guard = Guard("ragpulse.serve.relay")


@dataclass(frozen=True)
class RelayedSignal:
    """One signal serve relays: its export request and response, and their field names."""

    name: str
    """``logs`` or ``metrics``: the signal, its file's suffix and its HTTP path's end."""
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

    def parse(self, body: bytes, is_json: bool = False) -> Any:
        """The export request in ``body``; ``DecodeError`` when it is not one."""
        if is_json:
            return decode_json(body, self.request, self.name)
        return decode_protobuf(body, self.request, self.name)

    def count(self, request: Message) -> int:
        """The records (log records, metrics) ``request`` carries."""
        return sum(
            len(getattr(scope, self.records))
            for resource in getattr(request, self.resources)
            for scope in getattr(resource, self.scopes)
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
RELAYED = (LOGS, METRICS)


@dataclass(frozen=True, slots=True)
class RawRequest:
    """A received export request forwarded as it came: its serialized bytes."""

    data: bytes
    count: int
    """Records it carries."""


def joined(items: Sequence[RawRequest]) -> bytes:
    """The one serialized request ``items`` make together."""
    return items[0].data if len(items) == 1 else b"".join(item.data for item in items)


def _measure(items: Sequence[RawRequest], limit: int) -> int:
    return sum(len(item.data) for item in items)


class Forwarder(Protocol):
    """Sends joined requests of one signal: OTLP, or its file."""

    def send(self, items: Sequence[RawRequest]) -> bool: ...

    def shutdown(self) -> Any: ...


class SignalFile:
    """Appends relayed requests to their signal's file as OTLP/JSON lines."""

    def __init__(self, path: Path, signal: RelayedSignal) -> None:
        self._out = _Appender.of(path)
        self._signal = signal

    def send(self, items: Sequence[RawRequest]) -> bool:
        return self._out.append(otlp_json(self._signal.request.FromString(joined(items))))

    def shutdown(self) -> None:
        return None


class _GrpcSend:
    """Sending through the SDK's OTLP/gRPC exporter: its channel, retries and headers."""

    # Not ``_signal``: the SDK's exporter has an attribute of that name.
    _relayed: RelayedSignal

    def _translate_data(self, data: Sequence[RawRequest]) -> Any:
        return self._relayed.request.FromString(joined(data))

    def _count_data(self, data: Sequence[RawRequest]) -> int:
        return sum(item.count for item in data)

    def send(self, items: Sequence[RawRequest]) -> bool:
        result = OTLPExporterMixin._export(self, items)  # type: ignore[arg-type,type-var]
        return bool(result is self._result.SUCCESS)  # type: ignore[attr-defined]


class _GrpcLogs(_GrpcSend, OTLPGrpcLogExporter):  # type: ignore[misc]
    _relayed = LOGS


class _GrpcMetrics(_GrpcSend, OTLPGrpcMetricExporter):  # type: ignore[misc]
    _relayed = METRICS


class _HttpSend:
    """Posting through the SDK's OTLP/HTTP exporter: its session, URL and headers."""

    def send(self, items: Sequence[RawRequest]) -> bool:
        if getattr(self, "_shutdown", False):
            return False
        try:
            return bool(self._client.export(joined(items)).success)  # type: ignore[attr-defined]
        except Exception:
            _guard.exception("OTLP/HTTP relay export raised")
            return False


class _HttpLogs(_HttpSend, OTLPHttpLogExporter):  # type: ignore[misc]
    pass


class _HttpMetrics(_HttpSend, OTLPHttpMetricExporter):  # type: ignore[misc]
    pass


def relay_forwarder_class(signal: RelayedSignal, protocol: str) -> type:
    """The OTLP exporter class that sends ``signal``'s ``RawRequest`` batches over
    ``protocol``."""
    if signal is LOGS:
        return _GrpcLogs if protocol == "grpc" else _HttpLogs
    return _GrpcMetrics if protocol == "grpc" else _HttpMetrics


class Relay:
    """Forwards received export requests of one signal through a ``Delivery``."""

    def __init__(
        self,
        signal: RelayedSignal,
        forwarder: Forwarder,
        budget: ByteBudget,
        *,
        max_batch_bytes: int = Settings.export_max_batch_bytes,
        max_retry_seconds: float = Settings.export_buffer_seconds,
        shutdown_timeout: float = Settings.shutdown_timeout,
        deadline: ExitDeadline | None = None,
        on_drop: OnDrop | None = None,
    ) -> None:
        self.signal = signal
        self._forwarder = forwarder
        self._budget = budget
        self._max_batch_bytes = max_batch_bytes
        self.delivery: Delivery[RawRequest] = relay_delivery(
            signal.name,
            forwarder.send,
            _measure,
            budget,
            max_batch_bytes=max_batch_bytes,
            max_retry_seconds=max_retry_seconds,
            shutdown_timeout=shutdown_timeout,
            deadline=deadline,
            on_drop=on_drop,
            close=self._close_forwarder,
            on_settled=self._settled,
            refused=lambda: take_refusal(forwarder),
        )

    def forward(self, data: bytes, request: Message) -> None:
        """Queue one received request (``data``: ``request`` serialized), cut to the byte bound.

        Its bytes must have been reserved in the budget; they are given back once settled.
        """
        signal = self.signal
        if len(data) <= self._max_batch_bytes:
            self.delivery.put([RawRequest(data, signal.count(request))])
            return
        parts = split_request(
            request,
            self._max_batch_bytes,
            resources=signal.resources,
            scopes=signal.scopes,
            records=signal.records,
        )
        # The parts re-encode the resources and scopes they share: hold what they are.
        items = [RawRequest(part.SerializeToString(), signal.count(part)) for part in parts]
        self._budget.give_back(len(data) - sum(len(item.data) for item in items))
        for item in items:
            self.delivery.put([item])

    def forward_own(self, data: bytes, count: int) -> None:
        """Queue a request serve made itself (its evaluation events, ``serve._events``) with
        those it relays; held in the budget like them, though never refused: it is small
        and stands for work already done."""
        self._budget.hold(len(data))
        self.delivery.put([RawRequest(data, count)])

    def shutdown(self, timeout: float = Settings.shutdown_timeout) -> None:
        """Deliver what is queued within ``timeout``, then stop and shut the forwarder down."""
        self.delivery.shutdown(timeout)

    def _settled(self, items: Sequence[Any], delivered: bool) -> None:
        # Delivered or dropped (and counted by the delivery), the bytes are no longer held.
        self._budget.give_back(sum(len(item.data) for item in items))

    def _close_forwarder(self) -> None:
        try:
            self._forwarder.shutdown()
        except Exception:
            _logger.debug("relay forwarder shutdown failed", exc_info=True)
