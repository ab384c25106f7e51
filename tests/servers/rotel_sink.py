"""A real OTLP receiver for tests: the rotel collector with a processor that records what arrives.

``RotelSink`` starts ``rotel-agent`` (from the ``rotel`` PyPI package) on two free ports of
127.0.0.1, one for OTLP/gRPC and one for OTLP/HTTP. Every span and log record it receives is
written by ``rotel_processor.py`` as one JSON line, and read back here as ``ReceivedSpan`` and
``ReceivedLog``. By default rotel drops the data after recording it (``blackhole`` exporter);
with ``forward_to=`` it also forwards traces to another OTLP backend (Phoenix, Jaeger, Tempo),
unchanged, so a test can check both ends of the same export.

Used as a context manager::

    with RotelSink() as sink:
        exporter = OTLPSpanExporter(endpoint=sink.http_traces_endpoint)
        ...
        span = sink.wait_for_span(lambda s: s.name == "handle_request")
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from ._process import free_port as free_port
from ._process import free_ports as free_ports
from ._process import log_tail, stop_process

PROCESSOR_FILE = Path(__file__).with_name("rotel_processor.py")
SPANS_FILE_ENV = "ROTEL_SINK_SPANS_FILE"
LOGS_FILE_ENV = "ROTEL_SINK_LOGS_FILE"
WAIT = 60.0
"""Seconds a wait gives up after: a bound for a hang (each wait ends once what it waits for
has arrived), generous for an app process that starts, evaluates and exports on a busy
machine."""

# OTLP's SpanKind numbering (one more than opentelemetry-python's SpanKind values).
SPAN_KIND_NAMES = {
    0: "UNSPECIFIED",
    1: "INTERNAL",
    2: "SERVER",
    3: "CLIENT",
    4: "PRODUCER",
    5: "CONSUMER",
}
# OTLP's StatusCode numbering (the same as opentelemetry-python's StatusCode values).
STATUS_CODE_NAMES = {0: "UNSET", 1: "OK", 2: "ERROR"}

STARTUP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.05

T = TypeVar("T")


def rotel_agent_path() -> Path | None:
    """The ``rotel-agent`` binary shipped in the installed ``rotel`` package, if any."""
    spec = importlib.util.find_spec("rotel")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).with_name("rotel-agent")
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class ReceivedEvent:
    """A span event as it arrived over OTLP."""

    name: str
    time_unix_nano: int
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class ReceivedLink:
    """A span link as it arrived over OTLP."""

    trace_id: str | None
    span_id: str | None
    trace_state: str
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as rotel received it. Ids are lower-case hex; ``parent_span_id`` is None at a root.

    Attribute values keep their OTLP type: a double is a ``float``, an int an ``int``, arrays are
    lists, bytes are ``{"bytes": "<hex>"}``.
    """

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    trace_state: str
    flags: int
    kind: int
    status_code: int
    status_message: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: Mapping[str, Any]
    events: tuple[ReceivedEvent, ...]
    links: tuple[ReceivedLink, ...]
    resource: Mapping[str, Any]
    scope_name: str
    scope_version: str

    @property
    def kind_name(self) -> str:
        """OTLP span kind as a name: ``INTERNAL``, ``SERVER``, ``CLIENT``, ..."""
        return SPAN_KIND_NAMES.get(self.kind, str(self.kind))

    @property
    def status_name(self) -> str:
        """OTLP status code as a name: ``UNSET``, ``OK`` or ``ERROR``."""
        return STATUS_CODE_NAMES.get(self.status_code, str(self.status_code))

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> ReceivedSpan:
        """Build from one line written by ``rotel_processor.process_spans``."""
        return cls(
            name=line["name"],
            trace_id=line["trace_id"],
            span_id=line["span_id"],
            parent_span_id=line["parent_span_id"],
            trace_state=line["trace_state"],
            flags=line["flags"],
            kind=line["kind"],
            status_code=line["status"]["code"],
            status_message=line["status"]["message"],
            start_time_unix_nano=line["start_time_unix_nano"],
            end_time_unix_nano=line["end_time_unix_nano"],
            attributes=line["attributes"],
            events=tuple(ReceivedEvent(**event) for event in line["events"]),
            links=tuple(ReceivedLink(**link) for link in line["links"]),
            resource=line["resource"],
            scope_name=line["scope"]["name"],
            scope_version=line["scope"]["version"],
        )


@dataclass(frozen=True)
class ReceivedLog:
    """One log record (or event) as rotel received it."""

    event_name: str
    time_unix_nano: int
    observed_time_unix_nano: int
    severity_number: int
    severity_text: str
    body: Any
    attributes: Mapping[str, Any]
    trace_id: str | None
    span_id: str | None
    flags: int
    resource: Mapping[str, Any]
    scope_name: str

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> ReceivedLog:
        """Build from one line written by ``rotel_processor.process_logs``."""
        return cls(
            event_name=line["event_name"],
            time_unix_nano=line["time_unix_nano"],
            observed_time_unix_nano=line["observed_time_unix_nano"],
            severity_number=line["severity_number"],
            severity_text=line["severity_text"],
            body=line["body"],
            attributes=line["attributes"],
            trace_id=line["trace_id"],
            span_id=line["span_id"],
            flags=line["flags"],
            resource=line["resource"],
            scope_name=line["scope"]["name"],
        )


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    # A line without its newline is still being written; it is read on the next poll.
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line]


class RotelSink:
    """A running rotel collector that records every span and log record it receives.

    ``forward_to`` (an OTLP endpoint such as ``http://127.0.0.1:6006``) also sends the traces
    there over ``forward_protocol``; logs and metrics are then only recorded, because trace
    backends such as Phoenix do not accept them.
    """

    def __init__(
        self,
        *,
        forward_to: str | None = None,
        forward_protocol: Literal["http", "grpc"] = "http",
        binary: Path | None = None,
        workdir: Path | None = None,
    ) -> None:
        found = binary or rotel_agent_path()
        if found is None:
            raise FileNotFoundError("rotel-agent not found: install the 'rotel' package")
        self._binary = found
        self._forward_to = forward_to
        self._forward_protocol = forward_protocol
        self._own_workdir = workdir is None
        self._workdir = workdir or Path(tempfile.mkdtemp(prefix="rotel-sink-"))
        self.spans_file = self._workdir / "spans.jsonl"
        self.logs_file = self._workdir / "logs.jsonl"
        self.log_file = self._workdir / "rotel.log"
        self.grpc_port = 0
        self.http_port = 0
        self._process: subprocess.Popen[bytes] | None = None

    # --- endpoints -------------------------------------------------------------------------
    @property
    def http_endpoint(self) -> str:
        """Base URL of the OTLP/HTTP receiver (``OTEL_EXPORTER_OTLP_ENDPOINT`` style)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def http_traces_endpoint(self) -> str:
        """Full URL for an OTLP/HTTP span exporter."""
        return f"{self.http_endpoint}/v1/traces"

    @property
    def http_logs_endpoint(self) -> str:
        """Full URL for an OTLP/HTTP log exporter."""
        return f"{self.http_endpoint}/v1/logs"

    @property
    def grpc_endpoint(self) -> str:
        """Address of the OTLP/gRPC receiver, as ``http://127.0.0.1:PORT`` (insecure)."""
        return f"http://127.0.0.1:{self.grpc_port}"

    # --- lifecycle -------------------------------------------------------------------------
    def command(self) -> list[str]:
        """The rotel command line this sink runs (also a worked example for the docs)."""
        cmd = [
            str(self._binary),
            "start",
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{self.http_port}",
            "--otlp-with-trace-processor",
            str(PROCESSOR_FILE),
            "--otlp-with-logs-processor",
            str(PROCESSOR_FILE),
            "--pid-file",
            str(self._workdir / "rotel.pid"),
            "--log-file",
            str(self.log_file),
            # Small batches: tests wait on arrival, not on throughput.
            "--batch-timeout",
            "50ms",
        ]
        if self._forward_to is None:
            cmd += ["--exporter", "blackhole"]
        return cmd

    def _environment(self) -> dict[str, str]:
        # Drop inherited ROTEL_* settings so the command line alone says what runs.
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROTEL_")}
        env[SPANS_FILE_ENV] = str(self.spans_file)
        env[LOGS_FILE_ENV] = str(self.logs_file)
        if self._forward_to is not None:
            # Named exporters: traces to the backend, logs and metrics recorded and dropped.
            env.update(
                {
                    "ROTEL_EXPORTERS": "backend:otlp,drop:blackhole",
                    "ROTEL_EXPORTER_BACKEND_ENDPOINT": self._forward_to,
                    "ROTEL_EXPORTER_BACKEND_PROTOCOL": self._forward_protocol,
                    "ROTEL_EXPORTERS_TRACES": "backend",
                    "ROTEL_EXPORTERS_LOGS": "drop",
                    "ROTEL_EXPORTERS_METRICS": "drop",
                }
            )
        return env

    def start(self) -> RotelSink:
        """Start rotel and return once both receivers accept connections."""
        self.grpc_port, self.http_port = free_ports(2)
        self.spans_file.write_text("", encoding="utf-8")
        self.logs_file.write_text("", encoding="utf-8")
        output = (self._workdir / "rotel.out").open("wb")
        self._process = subprocess.Popen(
            self.command(),
            env=self._environment(),
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        output.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"rotel exited with {self._process.returncode}: {self.output()}")
            if _port_open(self.grpc_port) and _port_open(self.http_port):
                return self
            time.sleep(POLL_INTERVAL_S)
        self.stop()
        raise RuntimeError(f"rotel did not listen within {STARTUP_TIMEOUT_S}s: {self.output()}")

    def stop(self) -> None:
        """Stop rotel (SIGTERM, then SIGKILL after 5 s) and remove its files if we made them."""
        process, self._process = self._process, None
        stop_process(process, timeout=5)
        if self._own_workdir and process is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def output(self) -> str:
        """rotel's own console output (for failure messages)."""
        return log_tail(self._workdir / "rotel.out")

    def __enter__(self) -> RotelSink:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- what arrived ----------------------------------------------------------------------
    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        return [ReceivedSpan.from_json(line) for line in _read_lines(self.spans_file)]

    def logs(self) -> list[ReceivedLog]:
        """Every log record received so far, in arrival order."""
        return [ReceivedLog.from_json(line) for line in _read_lines(self.logs_file)]

    def clear(self) -> None:
        """Forget what arrived so far (the next reads start empty)."""
        self.spans_file.write_text("", encoding="utf-8")
        self.logs_file.write_text("", encoding="utf-8")

    def wait_for_spans(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = WAIT
    ) -> list[ReceivedSpan]:
        """Poll until ``predicate(all spans so far)`` is true; return the spans.

        Raises ``AssertionError`` naming what did arrive when ``timeout`` seconds pass first.
        """
        return _wait(self.spans, predicate, timeout, "spans", lambda s: s.name)

    def wait_for_span(
        self, match: Callable[[ReceivedSpan], bool], timeout: float = WAIT
    ) -> ReceivedSpan:
        """Poll until one received span satisfies ``match``; return the first that does."""
        spans = self.wait_for_spans(lambda got: any(match(s) for s in got), timeout)
        return next(s for s in spans if match(s))

    def wait_for_logs(
        self, predicate: Callable[[list[ReceivedLog]], bool], timeout: float = WAIT
    ) -> list[ReceivedLog]:
        """Poll until ``predicate(all log records so far)`` is true; return them."""
        return _wait(self.logs, predicate, timeout, "log records", lambda r: r.event_name)


def _wait(
    read: Callable[[], list[T]],
    predicate: Callable[[list[T]], bool],
    timeout: float,
    what: str,
    describe: Callable[[T], str],
) -> list[T]:
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if predicate(got):
            return got
        if time.monotonic() >= deadline:
            names: Sequence[str] = [describe(item) for item in got]
            raise AssertionError(f"no match among {len(got)} {what} after {timeout}s: {names}")
        time.sleep(POLL_INTERVAL_S)
