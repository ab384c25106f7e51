"""An OTLP/HTTP endpoint that records each request (path, headers, body) and answers with a
status chosen by the test: 200 with an empty protobuf response, or a refusal such as 401.
With a certificate and key it serves HTTPS, for TLS tests (with ``client_ca``, it requires a
client certificate that CA signed)."""

from __future__ import annotations

import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType


@dataclass(frozen=True)
class Received:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes


class OtlpRecorder:
    """Records requests on 127.0.0.1 on a free port; answers ``status``."""

    def __init__(
        self,
        status: int = 200,
        *,
        cert: Path | None = None,
        key: Path | None = None,
        client_ca: Path | None = None,
    ) -> None:
        self.status = status
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                with recorder._lock:
                    recorder.requests.append(Received(self.path, headers, body))
                self.send_response(recorder.status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.scheme = "http"
        if cert is not None and key is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            if client_ca is not None:  # mutual TLS: a client certificate signed by it
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(cafile=client_ca)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``scheme://127.0.0.1:port``, no path."""
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}"

    def paths(self) -> list[str]:
        """The path of every request received so far, in order."""
        with self._lock:
            return [r.path for r in self.requests]

    def received(self) -> list[Received]:
        """Every request received so far."""
        with self._lock:
            return list(self.requests)

    def wait_for(self, path: str, timeout: float = 60.0) -> Received:
        """The first request to ``path``, once it has arrived (a bound for a hang only)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for request in self.received():
                if request.path == path:
                    return request
            time.sleep(0.05)
        raise AssertionError(f"no request to {path}; got {self.paths()}")

    def start(self) -> OtlpRecorder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OtlpRecorder:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
