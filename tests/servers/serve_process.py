"""``ragpulse serve`` as a real child process on free loopback ports, for tests and benches.

``ServeProcess`` starts ``python -m ragpulse.cli serve`` writing OTLP-JSON lines
to a file of its own, waits for ``/readyz``, and reads back what it exported::

    with ServeProcess(tmp_path, "--sample-rate", "1") as serve:
        ...send OTLP to serve.http_endpoint or serve.grpc_endpoint...
        span = serve.wait_for_span(lambda s: s.attributes.get("ragpulse.eval.status") == "ok")
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from ._process import free_port as free_port
from ._process import free_ports as free_ports
from ._process import log_tail, stop_process

STARTUP_TIMEOUT_S = 20.0
REPO = Path(__file__).resolve().parents[2]


def _value(value: dict[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_value(item) for item in value["arrayValue"].get("values", [])]
    return None


def _enum_name(value: int | str, enum: Any) -> str:
    """An OTLP enum's name (``SPAN_KIND_SERVER``): OTLP/JSON writes the number."""
    return str(enum.Name(value)) if isinstance(value, int) else str(value)


@dataclass
class ExportedSpan:
    """One span as ``ragpulse serve`` exported it (read from its OTLP-JSON output)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    """The OTLP enum name, e.g. ``SPAN_KIND_SERVER``."""
    start: int
    end: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    status_code: str
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    flags: int = 0


def read_spans(path: Path) -> list[ExportedSpan]:
    """Every span in an OTLP-JSON lines file, in file order (duplicates kept)."""
    if not path.exists():
        return []
    spans: list[ExportedSpan] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        for resource_spans in document.get("resourceSpans", []):
            resource = {
                kv["key"]: _value(kv["value"])
                for kv in resource_spans.get("resource", {}).get("attributes", [])
            }
            for scope_spans in resource_spans.get("scopeSpans", []):
                scope = scope_spans.get("scope", {}).get("name", "")
                for span in scope_spans.get("spans", []):
                    spans.append(
                        ExportedSpan(
                            trace_id=span["traceId"],
                            span_id=span["spanId"],
                            parent_span_id=span.get("parentSpanId", ""),
                            name=span["name"],
                            kind=_enum_name(span.get("kind", 0), PbSpan.SpanKind),
                            start=int(span.get("startTimeUnixNano", 0)),
                            end=int(span.get("endTimeUnixNano", 0)),
                            attributes={
                                kv["key"]: _value(kv["value"]) for kv in span.get("attributes", [])
                            },
                            resource=resource,
                            scope=scope,
                            status_code=_enum_name(
                                span.get("status", {}).get("code", 0), PbStatus.StatusCode
                            ),
                            events=span.get("events", []),
                            links=span.get("links", []),
                            flags=int(span.get("flags", 0)),
                        )
                    )
    return spans


class ServeProcess:
    """One ``ragpulse serve`` child process; ``start()``/``stop()`` or use ``with``."""

    def __init__(
        self,
        workdir: Path,
        *args: str,
        name: str = "serve",
        env: dict[str, str] | None = None,
        http_port: int | None = None,
        grpc_port: int | None = None,
        output_file: Path | None = None,
        tls_ca: Path | None = None,
    ) -> None:
        self.workdir = workdir
        self.tls_ca = tls_ca
        """The CA (or self-signed certificate) to trust when the process serves TLS."""
        self.args = list(args)
        self.name = name
        spare = [port for port in free_ports(3) if port not in (http_port, grpc_port)]
        self.http_port = http_port or spare.pop()
        self.grpc_port = grpc_port or spare.pop()
        self.output_file = output_file or workdir / f"{name}-traces.jsonl"
        self.log_file = workdir / f"{name}.log"
        self._env = env
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def http_endpoint(self) -> str:
        """Base URL of the OTLP/HTTP receiver (``/v1/traces`` is under it)."""
        scheme = "https" if self.tls_ca is not None else "http"
        return f"{scheme}://127.0.0.1:{self.http_port}"

    @property
    def grpc_endpoint(self) -> str:
        """``host:port`` of the OTLP/gRPC receiver."""
        return f"127.0.0.1:{self.grpc_port}"

    def command(self) -> list[str]:
        """The command line this process runs."""
        command = [sys.executable, "-m", "ragpulse.cli", "serve"]
        command += ["--http", f"127.0.0.1:{self.http_port}"]
        command += ["--grpc", f"127.0.0.1:{self.grpc_port}"]
        if not any(arg.startswith("--output-file") for arg in self.args) and not (
            self._env and "OTEL_EXPORTER_OTLP_ENDPOINT" in self._env
        ):
            command += ["--output-file", str(self.output_file)]
        return command + self.args

    def start(self) -> ServeProcess:
        """Start the process and wait until it answers ``/readyz``."""
        env = dict(os.environ)
        src = str(REPO / "src")
        env["PYTHONPATH"] = os.pathsep.join([src, str(REPO), env.get("PYTHONPATH", "")])
        for key in list(env):
            if key.startswith("OTEL_EXPORTER_OTLP"):
                del env[key]
        env.update(self._env or {})
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ragpulse serve exited early:\n{log_tail(self.log_file)}")
            if self.ready():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ragpulse serve did not become ready:\n{log_tail(self.log_file)}")

    def ready(self) -> bool:
        """Whether ``/readyz`` answers 200 now."""
        context = ssl.create_default_context(cafile=self.tls_ca) if self.tls_ca else None
        try:
            with urllib.request.urlopen(
                f"{self.http_endpoint}/readyz", timeout=1, context=context
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, http.client.HTTPException):
            # Not serve's HTTP receiver answering (yet): keep asking until it does or exits.
            return False

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL: the process ends without draining."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not drained within a minute."""
        stop_process(self.process, timeout=60.0)

    def spans(self) -> list[ExportedSpan]:
        """Every span exported so far."""
        return read_spans(self.output_file)

    def log(self) -> str:
        """The end of the process's log (for failure messages)."""
        return log_tail(self.log_file)

    def wait_for_spans(
        self,
        predicate: Callable[[list[ExportedSpan]], bool],
        timeout: float = 60.0,  # a bound for a hang: the wait ends when the spans are there
    ) -> list[ExportedSpan]:
        """Wait until ``predicate(all spans exported so far)`` holds; returns them."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"condition not met within {timeout}s; {len(spans)} spans exported\n"
                    + self.log()
                )
            time.sleep(0.05)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def by_span_id(spans: Sequence[ExportedSpan]) -> dict[tuple[str, str], list[ExportedSpan]]:
    """Exported spans grouped by (trace id, span id): more than one entry is a duplicate."""
    grouped: dict[tuple[str, str], list[ExportedSpan]] = {}
    for span in spans:
        grouped.setdefault((span.trace_id, span.span_id), []).append(span)
    return grouped


def iter_lines(path: Path) -> Iterator[str]:
    """Lines of a file that may not exist yet."""
    if path.exists():
        yield from path.read_text(encoding="utf-8").splitlines()


def otlp_documents(path: Path) -> Iterator[dict[str, Any]]:
    """The OTLP-JSON requests of a lines file, skipping a line being written right now."""
    for line in iter_lines(path):
        try:
            yield json.loads(line)
        except ValueError:
            continue


def log_records(path: Path) -> list[dict[str, Any]]:
    """Every log record of an OTLP-JSON lines file (``ragpulse-logs.jsonl``)."""
    return [
        record
        for document in otlp_documents(path)
        for resource_logs in document.get("resourceLogs", [])
        for scope_logs in resource_logs.get("scopeLogs", [])
        for record in scope_logs.get("logRecords", [])
    ]
