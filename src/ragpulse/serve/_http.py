"""The OTLP/HTTP receiver: ``POST /v1/traces``, ``/v1/logs`` and ``/v1/metrics`` (protobuf or
JSON, gzip), ``/healthz``, ``/readyz``.

A plain ASGI application served by uvicorn. Answers follow the OTLP/HTTP
specification: 200 with an ``ExportTraceServiceResponse`` (its partial success
counts spans rejected as unreadable), 400 for a body that is not an export
request, 401 without the bearer token when one is configured, 413 past the
size limit, 415 for another content type, and the retryable 429 (buffer full)
or 503 (draining) with ``Retry-After``. A response is encoded like its request.
Log and metric requests are checked the same way and passed on whole
(``ServePipeline.receive_relayed``).
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragpulse import semconv
from ragpulse._guard import Guard
from ragpulse.outputs.relayed import RELAYED, TRACES, RelayedSignal
from ragpulse.serve._convert import DecodeError, parse_json, parse_protobuf, parse_relayed
from ragpulse.serve._pipeline import Outcome, ServePipeline
from ragpulse.serve._security import Security
from ragpulse.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_RELAYED = {signal.path: signal for signal in RELAYED}
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# gRPC codes inside the google.rpc.Status body of an error response.
_RESOURCE_EXHAUSTED = 8
_UNAVAILABLE = 14
_INVALID_ARGUMENT = 3
_UNAUTHENTICATED = 16
_INTERNAL = 13
# Internal errors are logged throttled: one fault repeated is one line and a count.
_guard = Guard("ragpulse.serve.http")


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    """The client went away (or was cut off) before its body arrived whole."""


class OtlpHttpApp:
    """ASGI application of the HTTP receiver."""

    def __init__(
        self,
        pipeline: ServePipeline,
        ready: Callable[[], bool],
        *,
        max_request_bytes: int = Settings.serve_max_request_bytes,
        security: Security | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._ready = ready
        self._max = max_request_bytes
        self._security = security or Security()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/healthz":
            await _respond(send, 200, b"ok\n", "text/plain")
        elif path == "/readyz":
            ready = self._ready()
            await _respond(
                send, 200 if ready else 503, b"ready\n" if ready else b"not ready\n", "text/plain"
            )
        elif path != TRACES.path and path not in _RELAYED:
            await _respond(send, 404, b"not found\n", "text/plain")
        elif method != "POST":
            await _respond(send, 405, b"POST only\n", "text/plain", [(b"allow", b"POST")])
        else:
            await self._export(scope, receive, send, _RELAYED.get(path))

    async def _export(
        self, scope: Scope, receive: Receive, send: Send, relayed: RelayedSignal | None
    ) -> None:
        headers = {key.lower(): value for key, value in scope.get("headers", [])}
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().decode("latin-1")
        is_json = content_type == JSON
        if not self._security.allows(headers.get(b"authorization")):
            await _error(
                send,
                401,
                _UNAUTHENTICATED,
                "a bearer token is required",
                is_json,
                [(b"www-authenticate", b'Bearer realm="ragpulse serve"')],
            )
            return
        if content_type not in (PROTOBUF, JSON):
            await _respond(
                send, 415, b"use application/x-protobuf or application/json\n", "text/plain"
            )
            return
        encoding = headers.get(b"content-encoding", b"").strip().lower()
        if encoding not in (b"", b"identity", b"gzip"):
            await _error(send, 415, _INVALID_ARGUMENT, "unsupported content-encoding", is_json)
            return
        try:
            body = await _read_body(receive, self._max)
            # Inflating, decoding and converting cost in proportion to the request: off the loop.
            gzipped = encoding == b"gzip"
            if relayed is not None:
                outcome = await self._pipeline.call(
                    self._take_relayed, relayed, body, gzipped, is_json
                )
            else:
                outcome = await self._pipeline.call(self._take, body, gzipped, is_json)
        except _Disconnected:
            return
        except _TooLarge:
            await _error(send, 413, _INVALID_ARGUMENT, f"request over {self._max} bytes", is_json)
            return
        except zlib.error as exc:
            await _error(send, 400, _INVALID_ARGUMENT, f"bad gzip body: {exc}", is_json)
            return
        except DecodeError as exc:
            await _error(send, 400, _INVALID_ARGUMENT, str(exc), is_json)
            return
        except Exception:
            # A fault of ours: logged (throttled), and answered without a traceback.
            _guard.exception("taking an export request failed")
            await _error(send, 500, _INTERNAL, "ragpulse serve: internal error", is_json)
            return
        if outcome.refused is not None:
            await _refuse(send, outcome, is_json)
            return
        if relayed is not None:
            await _respond(send, 200, *_encode(relayed.response(), is_json))
            return
        response = ExportTraceServiceResponse()
        if outcome.rejected:
            response.partial_success.rejected_spans = outcome.rejected
            response.partial_success.error_message = outcome.message
        await _respond(send, 200, *_encode(response, is_json))

    def _take(self, body: bytes, gzipped: bool, is_json: bool) -> Outcome:
        # On the pipeline's worker thread.
        if gzipped:
            body = _gunzip(body, self._max)
        request = parse_json(body) if is_json else parse_protobuf(body)
        return self._pipeline.receive(request, len(body), "http", None if is_json else body)

    def _take_relayed(
        self, signal: RelayedSignal, body: bytes, gzipped: bool, is_json: bool
    ) -> Outcome:
        # On the pipeline's worker thread.
        if gzipped:
            body = _gunzip(body, self._max)
        request = parse_relayed(signal, body, is_json)
        return self._pipeline.receive_relayed(signal, request, None if is_json else body)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            # A part of a body is not a request: nothing of it is taken.
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _gunzip(body: bytes, limit: int) -> bytes:
    """Every gzip member of ``body`` inflated, in order (RFC 1952 allows several).

    Bounded: a small bomb must not expand past the request limit in memory. A
    truncated member, or bytes after the last one that are not a member, are a
    ``zlib.error``.
    """
    out = bytearray()
    rest = body
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += inflater.decompress(rest, limit + 1 - len(out))
        if len(out) > limit or inflater.unconsumed_tail:
            raise _TooLarge
        out += inflater.flush()
        if not inflater.eof:
            raise zlib.error("the gzip body ends inside a member")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)


def _encode(message: Any, is_json: bool) -> tuple[bytes, str]:
    if is_json:
        return json.dumps(json_format.MessageToDict(message)).encode(), JSON
    return message.SerializeToString(), PROTOBUF


async def _refuse(send: Send, outcome: Outcome, is_json: bool) -> None:
    full = outcome.refused == semconv.SERVE_REFUSED_BUFFER_FULL
    status = 429 if full else 503
    code = _RESOURCE_EXHAUSTED if full else _UNAVAILABLE
    retry_after = str(max(1, math.ceil(outcome.retry_after))).encode()
    message = f"ragpulse serve: {outcome.refused}, retry later"
    await _error(send, status, code, message, is_json, [(b"retry-after", retry_after)])


async def _error(
    send: Send,
    status: int,
    code: int,
    message: str,
    is_json: bool,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body, content_type = _encode(status_pb2.Status(code=code, message=message), is_json)
    await _respond(send, status, body, content_type, extra)


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})
