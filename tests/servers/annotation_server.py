"""A stand-in for Phoenix's ``POST /v1/span_annotations`` on 127.0.0.1 that answers as scripted.

Each request is answered with the next status of ``statuses`` and, once they are used up,
with 200 (Phoenix's asynchronous answer, ``{"data": []}``). Every request's annotations are
kept in ``requests``; ``accepted`` holds those of the requests answered 2xx. Used to show how
``PhoenixAnnotations`` rides out a Phoenix that fails first; the real Phoenix is
``servers.phoenix``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .rotel_sink import free_port

ANNOTATIONS_PATH = "/v1/span_annotations"


class AnnotationServer:
    """Answers annotation posts with scripted statuses, then 200; records what it got."""

    def __init__(self, statuses: Iterable[int] = (), port: int | None = None) -> None:
        self.port = port or free_port()
        self._statuses = deque(statuses)
        self._lock = threading.Lock()
        self.requests: list[list[dict[str, Any]]] = []
        self.accepted: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL to give ``PhoenixAnnotations``."""
        return f"http://127.0.0.1:{self.port}"

    def _answer(self, annotations: list[dict[str, Any]]) -> int:
        with self._lock:
            self.requests.append(annotations)
            status = self._statuses.popleft() if self._statuses else 200
            if 200 <= status < 300:
                self.accepted.extend(annotations)
            return status

    def start(self) -> AnnotationServer:
        """Listen on ``port`` and answer from a thread of its own."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != ANNOTATIONS_PATH:
                    self.send_error(404)
                    return
                status = server._answer(list(json.loads(body)["data"]))
                payload = json.dumps({"data": []} if status < 300 else {"detail": "scripted"})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> AnnotationServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
