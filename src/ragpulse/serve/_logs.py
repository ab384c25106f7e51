"""``LogRelay``: the log records an application sends to ``ragpulse serve``, passed on.

An application whose OTLP endpoint is serve sends its log events there too (the
``ragpulse.feedback`` events among them). Serve reads them only to check they are
an ``ExportLogsServiceRequest``, then forwards each request as the bytes it came in
(a JSON body re-encoded as protobuf) to serve's own destination: the logs exporter
of the same ``OTEL_EXPORTER_OTLP_*`` endpoint, protocol and headers as its traces,
or OTLP-JSON lines in its logs file. Their content is relayed unchanged, as a
Collector relays it: ``capture_content`` and ``redact`` are the sender's to apply.

Delivery is the outputs layer's ``Delivery``, as for the spans serve forwards:
retried with backoff for ``export_buffer_seconds``, requests queued behind the one
in flight merged up to ``export_max_batch_bytes`` (serialized requests concatenate,
``resource_logs`` being repeated, so merging is a join of bytes), larger requests
cut below it. The bytes are held in serve's ``ByteBudget`` until delivered or
dropped, so a backend outage fills the same bound and senders are refused
(retryably) rather than memory growing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as OTLPGrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as OTLPHttpLogExporter,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs.export import LogRecordExportResult

from ragpulse._export import Delivery, ExitDeadline, OnDrop
from ragpulse._files import _Appender, otlp_json
from ragpulse._guard import Guard
from ragpulse.serve._budget import ByteBudget
from ragpulse.serve._convert import decode_json, decode_protobuf
from ragpulse.serve._export import split_request
from ragpulse.serve._sink import relay_delivery
from ragpulse.settings import Settings

_logger = logging.getLogger("ragpulse.serve.export")
# Internal errors are logged throttled: one export failing in a loop is one line and a count.
_guard = Guard("ragpulse.serve.logs")

SIGNAL = "logs"


@dataclass(frozen=True, slots=True)
class RawLogs:
    """Received log records forwarded as they came: a serialized ``ExportLogsServiceRequest``."""

    data: bytes
    count: int
    """Log records it carries."""


def parse_logs_protobuf(body: bytes) -> ExportLogsServiceRequest:
    """An ``ExportLogsServiceRequest`` from its binary protobuf encoding."""
    return decode_protobuf(body, ExportLogsServiceRequest, "logs")


def parse_logs_json(body: bytes) -> ExportLogsServiceRequest:
    """An ``ExportLogsServiceRequest`` from OTLP/JSON (hex trace and span ids)."""
    return decode_json(body, ExportLogsServiceRequest, "logs")


def count_records(request: ExportLogsServiceRequest) -> int:
    """How many log records a request carries."""
    return sum(
        len(scope_logs.log_records)
        for resource_logs in request.resource_logs
        for scope_logs in resource_logs.scope_logs
    )


def joined(items: Sequence[RawLogs]) -> bytes:
    """The one serialized request ``items`` make together."""
    return items[0].data if len(items) == 1 else b"".join(item.data for item in items)


def _measure(items: Sequence[RawLogs], limit: int) -> int:
    return sum(len(item.data) for item in items)


class FileLogForwarder:
    """Appends relayed log records to serve's logs file as OTLP/JSON lines."""

    def __init__(self, path: Path) -> None:
        self._out = _Appender.of(path)

    def export(self, items: Sequence[RawLogs]) -> LogRecordExportResult:
        ok = self._out.append(otlp_json(ExportLogsServiceRequest.FromString(joined(items))))
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        return None


class _GrpcLogForwarder(OTLPGrpcLogExporter):
    """The SDK's OTLP/gRPC logs exporter, sending the received requests joined."""

    def _translate_data(  # type: ignore[override]
        self, data: Sequence[RawLogs]
    ) -> ExportLogsServiceRequest:
        request: ExportLogsServiceRequest = ExportLogsServiceRequest.FromString(joined(data))
        return request

    def _count_data(self, data: Sequence[RawLogs]) -> int:  # type: ignore[override]
        return sum(item.count for item in data)


class _HttpLogForwarder(OTLPHttpLogExporter):
    """The SDK's OTLP/HTTP logs exporter, posting the received requests joined."""

    def export(self, batch: Sequence[RawLogs]) -> LogRecordExportResult:  # type: ignore[override]
        if getattr(self, "_shutdown", False):
            return LogRecordExportResult.FAILURE
        try:
            ok = bool(self._client.export(joined(batch)).success)
        except Exception:
            _guard.exception("OTLP/HTTP logs export raised")
            return LogRecordExportResult.FAILURE
        # A failure is retried by the relay's delivery, with backoff.
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE


def log_forwarder_class(protocol: str) -> type:
    """The OTLP logs exporter class that sends ``RawLogs`` batches over ``protocol``."""
    return _GrpcLogForwarder if protocol == "grpc" else _HttpLogForwarder


class LogRelay:
    """Forwards received log export requests to ``exporter`` through a ``Delivery``.

    ``exporter`` has ``export(Sequence[RawLogs]) -> LogRecordExportResult`` and
    ``shutdown()``: an OTLP logs forwarder or a ``FileLogForwarder``.
    """

    def __init__(
        self,
        exporter: Any,
        budget: ByteBudget,
        *,
        max_batch_bytes: int = Settings.export_max_batch_bytes,
        max_retry_seconds: float = Settings.export_buffer_seconds,
        shutdown_timeout: float = Settings.shutdown_timeout,
        deadline: ExitDeadline | None = None,
        on_drop: OnDrop | None = None,
    ) -> None:
        self._exporter = exporter
        self._budget = budget
        self._max_batch_bytes = max_batch_bytes
        self.delivery: Delivery[RawLogs] = relay_delivery(
            SIGNAL,
            self._send,
            _measure,
            budget,
            max_batch_bytes=max_batch_bytes,
            max_retry_seconds=max_retry_seconds,
            shutdown_timeout=shutdown_timeout,
            deadline=deadline,
            on_drop=on_drop,
            close=self._close_exporter,
            on_settled=self._settled,
        )

    def forward(self, data: bytes, request: ExportLogsServiceRequest) -> None:
        """Queue one received request (``data``: ``request`` serialized), cut to the byte bound.

        Its bytes must have been reserved in the budget; they are given back once settled.
        """
        if len(data) <= self._max_batch_bytes:
            self.delivery.put([RawLogs(data, count_records(request))])
            return
        parts = split_request(
            request,
            self._max_batch_bytes,
            resources="resource_logs",
            scopes="scope_logs",
            records="log_records",
        )
        # The parts re-encode the resources and scopes they share: hold what they are.
        items = [RawLogs(part.SerializeToString(), count_records(part)) for part in parts]
        self._budget.give_back(len(data) - sum(len(item.data) for item in items))
        for item in items:
            self.delivery.put([item])

    def flush(self, timeout: float) -> bool:
        """Wait until everything handed in so far is delivered (or ``timeout`` passes)."""
        return self.delivery.flush(timeout)

    def shutdown(self, timeout: float = Settings.shutdown_timeout) -> None:
        """Deliver what is queued within ``timeout``, then stop and shut the exporter down."""
        self.delivery.shutdown(timeout)

    # --- delivery's callbacks (its sending thread) -----------------------------------------

    def _send(self, items: Sequence[RawLogs]) -> bool:
        return bool(self._exporter.export(items) is LogRecordExportResult.SUCCESS)

    def _settled(self, items: Sequence[Any], delivered: bool) -> None:
        # Delivered or dropped (and counted by the delivery), the bytes are no longer held.
        self._budget.give_back(sum(len(item.data) for item in items))

    def _close_exporter(self) -> None:
        try:
            self._exporter.shutdown()
        except Exception:
            _logger.debug("logs exporter shutdown failed", exc_info=True)
