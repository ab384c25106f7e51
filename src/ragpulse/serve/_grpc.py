"""The OTLP/gRPC receiver: ``TraceService``, ``LogsService`` and ``MetricsService`` ``/Export``.

Served by ``grpc.aio`` on the service's event loop. A full buffer answers
``RESOURCE_EXHAUSTED`` and a draining service ``UNAVAILABLE``, both with a
``RetryInfo`` (in ``grpc-status-details-bin``, where the Collector reads it, and
in ``google.rpc.retryinfo-bin``, where the Python exporter reads it), so the
sender retries after the delay. Unreadable spans are reported in the partial
success, and a message that is not an export request is ``INVALID_ARGUMENT``
(not retried). The message arrives as bytes and is decoded on the pipeline's
worker thread, like an HTTP body, never on the event loop. Log requests are
checked the same way and passed on whole (``ServePipeline.receive_relayed``), metric
requests too.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragpulse import semconv
from ragpulse.outputs.relayed import RELAYED, TRACES, RelayedSignal
from ragpulse.serve._convert import DecodeError, parse_protobuf, parse_relayed
from ragpulse.serve._pipeline import Outcome, ServePipeline
from ragpulse.serve._security import Security
from ragpulse.settings import Settings


class _Receiver:
    def __init__(self, pipeline: ServePipeline, security: Security) -> None:
        self._pipeline = pipeline
        self._security = security

    def _take(self, body: bytes) -> Outcome:
        # On the pipeline's worker thread.
        return self._pipeline.receive(parse_protobuf(body), len(body), "grpc", body)

    def _take_relayed(self, signal: RelayedSignal, body: bytes) -> Outcome:
        # On the pipeline's worker thread.
        return self._pipeline.receive_relayed(signal, parse_relayed(signal, body), body)

    async def _outcome(
        self, take: Callable[[bytes], Outcome], body: bytes, context: grpc.aio.ServicerContext
    ) -> Outcome:
        if self._security.token is not None:
            metadata = context.invocation_metadata() or ()
            authorization = next((v for k, v in metadata if k == "authorization"), None)
            if not self._security.allows(authorization):
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED, "ragpulse serve: a bearer token is required"
                )
        try:
            outcome = await self._pipeline.call(take, body)
        except DecodeError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if outcome.refused is not None:
            await _refuse(context, outcome)
        return outcome

    async def export(
        self, body: bytes, context: grpc.aio.ServicerContext
    ) -> ExportTraceServiceResponse:
        outcome = await self._outcome(self._take, body, context)
        response = ExportTraceServiceResponse()
        if outcome.rejected:
            response.partial_success.rejected_spans = outcome.rejected
            response.partial_success.error_message = outcome.message
        return response

    def relayed(self, signal: RelayedSignal) -> Callable[..., Awaitable[Any]]:
        """The ``Export`` method of ``signal``'s service."""

        async def export(body: bytes, context: grpc.aio.ServicerContext) -> Any:
            await self._outcome(partial(self._take_relayed, signal), body, context)
            return signal.response()

        return export


async def _refuse(context: grpc.aio.ServicerContext, outcome: Outcome) -> None:
    full = outcome.refused == semconv.SERVE_REFUSED_BUFFER_FULL
    code = grpc.StatusCode.RESOURCE_EXHAUSTED if full else grpc.StatusCode.UNAVAILABLE
    seconds = max(1, math.ceil(outcome.retry_after))
    retry_info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=seconds))
    detail = any_pb2.Any()
    detail.Pack(retry_info)
    message = f"ragpulse serve: {outcome.refused}, retry later"
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    await context.abort(
        code,
        message,
        trailing_metadata=(
            ("grpc-status-details-bin", status.SerializeToString()),
            ("google.rpc.retryinfo-bin", retry_info.SerializeToString()),
        ),
    )


def grpc_server(
    pipeline: ServePipeline,
    *,
    max_message_bytes: int = Settings.serve_max_request_bytes,
    security: Security | None = None,
    idle_timeout: float | None = None,
) -> grpc.aio.Server:
    """A ``grpc.aio`` server with the trace, logs and metrics services added (``add_port``
    adds its port)."""
    options: list[tuple[str, int]] = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]
    if idle_timeout is not None:
        # A connection with no RPC for this long is closed (GOAWAY).
        options.append(("grpc.max_connection_idle_ms", int(idle_timeout * 1000)))
    server = grpc.aio.server(options=options)
    # Registered by hand to receive the message undecoded (no request deserializer).
    receiver = _Receiver(pipeline, security or Security())
    traces = grpc.unary_unary_rpc_method_handler(
        receiver.export, response_serializer=ExportTraceServiceResponse.SerializeToString
    )
    handlers = [grpc.method_handlers_generic_handler(TRACES.service, {"Export": traces})]
    for signal in RELAYED:
        handler = grpc.unary_unary_rpc_method_handler(
            receiver.relayed(signal), response_serializer=signal.response.SerializeToString
        )
        handlers.append(grpc.method_handlers_generic_handler(signal.service, {"Export": handler}))
    server.add_generic_rpc_handlers(handlers)
    return server


def add_port(server: grpc.aio.Server, address: str, security: Security | None = None) -> None:
    """Listen on ``address`` (``host:port``), with TLS when ``security`` has a certificate."""
    if security is not None and security.tls:
        credentials = grpc.ssl_server_credentials([security.tls_pair()])
        server.add_secure_port(address, credentials)
    else:
        server.add_insecure_port(address)
