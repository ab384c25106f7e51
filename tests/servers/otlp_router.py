"""A test-side OTLP/HTTP router that routes spans by trace id as the Collector's loadbalancing
exporter does (``routing_key: traceID``), in front of several ``ragpulse serve`` replicas.

The ring is the exporter's: each endpoint takes 100 positions, ``crc32(endpoint + byte(i))
% 36000`` (a position already taken is skipped), sorted; a trace goes to the first position at
or after ``crc32(trace id bytes) % 36000``, wrapping to the first. A request is split into one
request per backend (resource and scope kept); each part is retried on a refused connection or
a retryable answer (429, 502, 503, 504) with backoff, each backend independently of the others,
as the exporter's per-backend sending queues do, and
the sender gets 200 once every part is queued (503 when a queue is full, so the sender
retries), as with the exporter's ``sending_queue``. A part not delivered within
``part_timeout`` is dropped and counted, as the exporter's ``max_elapsed_time`` does.

Counts what it did per backend: spans delivered, attempts refused.
"""

from __future__ import annotations

import queue
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

MAX_POSITIONS = 36_000
WEIGHT = 100
RETRYABLE = frozenset({429, 502, 503, 504})
QUEUE_PARTS = 5000


class HashRing:
    """The loadbalancing exporter's consistent hash ring over ``host:port`` endpoints."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        taken: set[int] = set()
        items: list[tuple[int, str]] = []
        for endpoint in endpoints:
            for i in range(WEIGHT):
                position = zlib.crc32(endpoint.encode() + bytes([i])) % MAX_POSITIONS
                if position in taken:
                    continue
                taken.add(position)
                items.append((position, endpoint))
        items.sort()
        self._positions = [position for position, _ in items]
        self._endpoints = [endpoint for _, endpoint in items]

    def endpoint_for(self, trace_id: bytes) -> str:
        """The endpoint responsible for a 16-byte trace id."""
        position = zlib.crc32(trace_id) % MAX_POSITIONS
        # First ring item at or after the position; past the last one, the first.
        low, high = 0, len(self._positions)
        while low < high:
            middle = (low + high) // 2
            if self._positions[middle] < position:
                low = middle + 1
            else:
                high = middle
        return self._endpoints[low % len(self._endpoints)]


def split_by_backend(
    request: ExportTraceServiceRequest, ring: HashRing
) -> dict[str, ExportTraceServiceRequest]:
    """One request per backend, each span under a copy of its resource and scope."""
    parts: dict[str, ExportTraceServiceRequest] = {}
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            grouped: dict[str, list[object]] = defaultdict(list)
            for span in scope_spans.spans:
                grouped[ring.endpoint_for(span.trace_id)].append(span)
            for endpoint, spans in grouped.items():
                part = parts.setdefault(endpoint, ExportTraceServiceRequest())
                out_resource = part.resource_spans.add()
                out_resource.resource.CopyFrom(resource_spans.resource)
                out_resource.schema_url = resource_spans.schema_url
                out_scope = out_resource.scope_spans.add()
                out_scope.scope.CopyFrom(scope_spans.scope)
                out_scope.schema_url = scope_spans.schema_url
                out_scope.spans.extend(spans)  # type: ignore[arg-type]
    return parts


class OtlpRouter:
    """The router on a free port of 127.0.0.1; ``with OtlpRouter([...]) as router:``."""

    def __init__(self, endpoints: Sequence[str], *, part_timeout: float = 60.0) -> None:
        self.endpoints = list(endpoints)
        self.ring = HashRing(self.endpoints)
        self.part_timeout = part_timeout
        self.delivered: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._queued = 0
        self._queues: dict[str, queue.Queue[ExportTraceServiceRequest | None]] = {
            endpoint: queue.Queue(maxsize=QUEUE_PARTS) for endpoint in self.endpoints
        }
        self._senders = [
            threading.Thread(target=self._send_forever, args=(endpoint,), daemon=True)
            for endpoint in self.endpoints
        ]
        self._client = httpx.Client(timeout=10.0)
        router = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = router.route(body) if self.path == "/v1/traces" else 404
                self.send_response(status)
                if status == 503:
                    self.send_header("retry-after", "1")
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL senders export to (``/v1/traces`` under it)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def route(self, body: bytes) -> int:
        """Deliver one request's spans to their backends; the HTTP status for the sender."""
        request = ExportTraceServiceRequest.FromString(body)
        parts = split_by_backend(request, self.ring)
        # Like the exporter with sending_queue enabled: a request is acknowledged once its
        # parts are queued, and each backend's queue is sent (and retried) on its own, so a
        # replica that is down holds back neither the sender nor the other replicas.
        if any(self._queues[endpoint].full() for endpoint in parts):
            return 503
        with self._lock:
            self._queued += len(parts)
        for endpoint, part in parts.items():
            self._queues[endpoint].put(part)
        return 200

    @property
    def queued(self) -> int:
        """Parts accepted and not yet delivered (or given up)."""
        return self._queued

    def _send_forever(self, endpoint: str) -> None:
        queue = self._queues[endpoint]
        while True:
            part = queue.get()
            if part is None:
                return
            if not self._deliver(endpoint, part):
                with self._lock:
                    self.dropped[endpoint] += 1
            with self._lock:
                self._queued -= 1

    def _deliver(self, endpoint: str, part: ExportTraceServiceRequest) -> bool:
        body = part.SerializeToString()
        spans = sum(len(s.spans) for r in part.resource_spans for s in r.scope_spans)
        deadline = time.monotonic() + self.part_timeout
        backoff = 0.1
        while True:
            try:
                response = self._client.post(
                    f"http://{endpoint}/v1/traces",
                    content=body,
                    headers={"content-type": "application/x-protobuf"},
                )
                status = response.status_code
            except httpx.TransportError:
                status = 503
            if status == 200:
                with self._lock:
                    self.delivered[endpoint] += spans
                return True
            with self._lock:
                self.refused[endpoint] += 1
            if status not in RETRYABLE or time.monotonic() + backoff > deadline:
                return False
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def start(self) -> OtlpRouter:
        """Start serving on a background thread."""
        for sender in self._senders:
            sender.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the client."""
        self._server.shutdown()
        self._server.server_close()
        for endpoint in self.endpoints:
            self._queues[endpoint].put(None)
        for sender in self._senders:
            sender.join(timeout=5)
        self._client.close()

    def __enter__(self) -> OtlpRouter:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
