"""OTLP load tools for benches and tests: a counting OTLP/HTTP sink and a retrying sender.

``CountingSink`` receives ``/v1/traces`` (protobuf), counts spans, units scored by ragpulse
(``ragpulse.eval.status``) and their statuses, and can be held to ``max_spans_per_s``, the way
a slow backend is. ``Sender`` posts pre-encoded requests from a few threads, honouring
``Retry-After`` on 429/503 (capped at ``max_backoff``) and counting every refusal, so nothing
offered is dropped. ``make_requests`` builds requests of RAG-shaped traces with random ids.
"""

from __future__ import annotations

import gzip
import json
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

EVAL_STATUS = "ragpulse.eval.status"
CONTEXT = "The Eiffel Tower is 330 metres tall and stands in Paris. It was completed in 1889."
ANSWER = "The Eiffel Tower is 330 metres tall."


def _kv(key: str, value: str) -> KeyValue:
    pair = KeyValue(key=key)
    pair.value.string_value = value
    return pair


def make_requests(
    requests: int,
    traces_per_request: int,
    *,
    plain_spans: int = 1,
    seed: int = 1,
    small: bool = False,
) -> list[bytes]:
    """Encoded export requests of RAG traces: an OpenInference root (the unit), a retriever,
    an LLM span and ``plain_spans`` other spans each, all of a trace in one request.

    ``small``: the same spans with one short attribute each instead (nothing to evaluate).
    """
    rng = random.Random(seed)
    bodies = []
    for _ in range(requests):
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.append(_kv("service.name", "load"))
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.name = "load-generator"
        now = time.time_ns()
        for _ in range(traces_per_request):
            trace_id = rng.getrandbits(128).to_bytes(16, "big")
            root_id = rng.getrandbits(64).to_bytes(8, "big")
            shapes: list[tuple[str, list[KeyValue]]] = [
                (
                    "POST /ask",
                    [
                        _kv("openinference.span.kind", "CHAIN"),
                        _kv("input.value", "How tall is the Eiffel Tower?"),
                        _kv("output.value", ANSWER),
                    ],
                ),
                (
                    "retrieve",
                    [
                        _kv("openinference.span.kind", "RETRIEVER"),
                        _kv("retrieval.documents.0.document.content", CONTEXT),
                    ],
                ),
                ("llm", [_kv("openinference.span.kind", "LLM"), _kv("output.value", ANSWER)]),
            ]
            shapes += [
                ("cache lookup", [_kv("db.system", "redis"), _kv("db.statement", "GET q")])
            ] * plain_spans
            if small:
                shapes = [(name, [_kv("step", str(i))]) for i, (name, _) in enumerate(shapes)]
            for index, (name, attributes) in enumerate(shapes):
                span = Span(
                    trace_id=trace_id,
                    span_id=root_id if index == 0 else rng.getrandbits(64).to_bytes(8, "big"),
                    parent_span_id=b"" if index == 0 else root_id,
                    name=name,
                    kind=Span.SPAN_KIND_SERVER if index == 0 else Span.SPAN_KIND_INTERNAL,
                    start_time_unix_nano=now + index,
                    end_time_unix_nano=now + 1_000_000 - index,
                )
                span.attributes.extend(attributes)
                # Children first, the root last, as an SDK's batch processor exports them.
                scope_spans.spans.append(span)
            scope_spans.spans.append(scope_spans.spans.pop(-len(shapes)))
        bodies.append(request.SerializeToString())
    return bodies


class CountingSink:
    """An OTLP/HTTP trace receiver on a free port of 127.0.0.1 that counts and drops spans."""

    def __init__(self, max_spans_per_s: float | None = None, *, keep_ids: bool = False) -> None:
        self.spans = 0
        self.keep_ids = keep_ids
        self.copies: Counter[tuple[bytes, bytes]] = Counter()
        """Copies of each (trace id, span id) received, when ``keep_ids``."""
        self.evaluations: Counter[bytes] = Counter()
        """Spans with ``ragpulse.eval.status`` ``ok`` per trace id, when ``keep_ids``."""
        self.requests = 0
        self.request_bytes: list[int] = []
        """The encoded size of every trace request received, in arrival order."""
        self.statuses: Counter[str] = Counter()
        self.max_spans_per_s = max_spans_per_s
        self._lock = threading.Lock()
        self._next_free = time.monotonic()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                # What a sink in another process has counted, for the bench that reads it.
                body = json.dumps({"spans": sink.spans, "statuses": dict(sink.statuses)}).encode()
                self.send_response(200 if self.path == "/stats" else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding", "") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":  # metrics and logs are accepted and dropped
                    sink.take(body)
                self.send_response(200)
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
        """Base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def take(self, body: bytes) -> None:
        """Count one request's spans (after waiting, when rate-limited)."""
        request = ExportTraceServiceRequest.FromString(body)
        spans = 0
        statuses: Counter[str] = Counter()
        keys: list[tuple[bytes, bytes]] = []
        evaluated: list[bytes] = []
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans += len(scope_spans.spans)
                for span in scope_spans.spans:
                    if self.keep_ids:
                        keys.append((span.trace_id, span.span_id))
                    for pair in span.attributes:
                        if pair.key == EVAL_STATUS:
                            statuses[pair.value.string_value] += 1
                            if pair.value.string_value == "ok":
                                evaluated.append(span.trace_id)
        if self.max_spans_per_s:
            with self._lock:
                start = max(self._next_free, time.monotonic())
                self._next_free = start + spans / self.max_spans_per_s
            time.sleep(max(0.0, start - time.monotonic()) + spans / self.max_spans_per_s)
        with self._lock:
            self.spans += spans
            self.requests += 1
            self.request_bytes.append(len(body))
            self.statuses.update(statuses)
            self.copies.update(keys)
            self.evaluations.update(evaluated)

    def wait_for(self, spans: int, timeout: float) -> bool:
        """Wait until ``spans`` spans arrived; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.spans < spans:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def start(self) -> CountingSink:
        """Serve on a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> CountingSink:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class Sender:
    """Posts encoded requests to ``url`` from ``threads`` threads until each one is accepted.

    ``interval`` paces each thread (seconds between posts) to offer a fixed load.
    """

    def __init__(
        self,
        url: str,
        bodies: Sequence[bytes],
        *,
        threads: int = 4,
        interval: float = 0.0,
        max_backoff: float = 1.0,
    ) -> None:
        self.url = f"{url}/v1/traces"
        self._pending: deque[tuple[float, bytes]] = deque((0.0, body) for body in bodies)
        self._threads = threads
        self._interval = interval
        self._max_backoff = max_backoff
        self._lock = threading.Lock()
        self.accepted = 0
        self.refused = 0
        self.errors = 0
        self._outstanding = len(bodies)

    def run(self) -> float:
        """Send everything; returns the seconds it took."""
        started = time.perf_counter()
        workers = [threading.Thread(target=self._work) for _ in range(self._threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return time.perf_counter() - started

    def _next(self) -> bytes | None:
        while True:
            with self._lock:
                if self._outstanding == 0:
                    return None
                if self._pending:
                    not_before, body = self._pending.popleft()
                    if not_before <= time.monotonic():
                        return body
                    self._pending.append((not_before, body))
            time.sleep(0.005)

    def _work(self) -> None:
        headers = {"content-type": "application/x-protobuf"}
        with httpx.Client(timeout=30.0) as client:
            while (body := self._next()) is not None:
                try:
                    response = client.post(self.url, content=body, headers=headers)
                    status = response.status_code
                    retry_after = float(response.headers.get("retry-after", "1"))
                except httpx.TransportError:
                    status, retry_after = 503, 1.0
                with self._lock:
                    if status == 200:
                        self.accepted += 1
                        self._outstanding -= 1
                    else:
                        self.refused += status in (429, 503)
                        self.errors += status not in (429, 503)
                        delay = min(retry_after, self._max_backoff)
                        self._pending.append((time.monotonic() + delay, body))
                if self._interval:
                    time.sleep(self._interval)


def main() -> None:
    """``python -m tests.servers.otlp_load``: a counting sink in its own process; prints its URL."""
    with CountingSink() as sink:
        print(sink.url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
