"""``ServeService``: the receivers, the pipeline and the lifecycle of ``ragpulse serve``.

One asyncio loop runs both receivers (uvicorn for OTLP/HTTP, ``grpc.aio`` for
OTLP/gRPC) and the assembly timer; decoding and assembly run on the pipeline's
worker thread, the evaluation worker and the exporter on their own. SIGTERM (or
SIGINT) drains: readiness turns false and new requests are refused with a
retryable 503 / ``UNAVAILABLE``, every unit still assembling goes to
evaluation, evaluations finish within ``serve_drain_timeout`` (what does not is
forwarded ``pending``), everything is exported (relayed logs and metrics too), and
only then do the listeners close and the process exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from ragpulse._guard import Guard
from ragpulse.judges.base import Judge
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging.resilient import ResilientJudge
from ragpulse.outputs.relay import Relay
from ragpulse.outputs.relayed import LOGS, SIGNALS, TRACES
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.serve._assembly import TraceAssembler
from ragpulse.serve._byte_budget import ByteBudget
from ragpulse.serve._connections import deadline_protocol
from ragpulse.serve._destinations import Outputs, build_outputs
from ragpulse.serve._events import RelayedEventsProvider
from ragpulse.serve._grpc import add_port, grpc_server
from ragpulse.serve._http import OtlpHttpApp
from ragpulse.serve._judge_processes import serve_judge, serve_settings
from ragpulse.serve._pipeline import ServeMetrics, ServePipeline
from ragpulse.serve._security import Security, exposure_warnings, port_number
from ragpulse.serve._trust import SeenUnits
from ragpulse.settings import Settings

_logger = logging.getLogger("ragpulse.serve")
# Internal errors are logged throttled: one export failing in a loop is one line and a count.
_guard = Guard("ragpulse.serve")

_TICK = 0.1


@dataclass
class ServeOptions:
    """What only ``ragpulse serve`` has; the pipeline's settings are ``settings``."""

    http: str | None = "127.0.0.1:4318"
    """``host:port`` of the OTLP/HTTP receiver (and /healthz, /readyz); None: off."""
    grpc: str | None = "127.0.0.1:4317"
    """``host:port`` of the OTLP/gRPC receiver; None: off."""
    settings: Settings = field(default_factory=Settings.load)
    """Judge, sampling, holding, exporting and metric settings, as ``configure()`` reads them,
    and serve's own bounds (``serve_buffer_bytes``, ``serve_assembly_timeout``, ...)."""
    output_file: Path | None = None
    """Write OTLP-JSON lines here even when an OTLP endpoint is configured."""
    security: Security = field(default_factory=Security)
    """The bearer token requests must carry, and the TLS certificate of both receivers."""


def _host_port(address: str) -> tuple[str, int]:
    host, _, port_text = address.rpartition(":")
    port = port_number(port_text)
    if not host or port is None:
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), port


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: the service drains on SIGTERM itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ServeService:
    """One ``ragpulse serve`` process: build it, then ``await run()``."""

    def __init__(self, options: ServeOptions, judge: Judge | None = None) -> None:
        self.options = options
        settings = self.settings = options.settings
        self.outputs: Outputs = build_outputs(settings, output_file=options.output_file)
        self.budget = ByteBudget(options.settings.serve_buffer_bytes)
        self.metrics = ServeMetrics(self.outputs.meter_provider, self.budget)
        exporters = self.outputs.exporters
        # What serve relays, spans, log records and metrics, is delivered under the same bounds;
        # serve's span counters count the spans.
        counted: dict[str, Any] = {
            "on_exported": lambda n: self.metrics.exported.add(n),
            "on_failure": lambda n: self.metrics.export_failures.add(n),
            "on_lost": lambda n: self.metrics.dropped.add(n),
        }
        self.relays = {
            signal.name: Relay(
                signal,
                self.outputs.forwarders[signal.name],
                self.budget,
                max_batch_bytes=settings.export_max_batch_bytes,
                max_retry_seconds=settings.export_buffer_seconds,
                shutdown_timeout=options.settings.serve_drain_timeout,
                max_batch_items=settings.relay_max_batch_items,
                linger=settings.relay_linger,
                deadline=exporters.deadline,
                on_drop=exporters.drops,
                **(counted if signal is TRACES else {}),
            )
            for signal in SIGNALS
        }
        self.spans = self.relays[TRACES.name]
        self.processor: EvaluatingSpanProcessor | None = None
        self._judge: Judge | None = None
        sampler: EvalSampler | None = None
        release = None
        if settings.evaluate:
            # Evaluation off: requests go out as they came and no judge is built at all.
            if judge is None:
                judge = LexicalJudge(correctness_mode=settings.correctness_mode)
            settings = self.settings = serve_settings(judge, settings)
            judge = self._judge = serve_judge(judge, settings)
            sampler = EvalSampler.from_settings(settings)
            self.processor = EvaluatingSpanProcessor.from_settings(
                self.spans,
                settings,
                judge=judge,
                sampler=sampler,
                meter_provider=self.outputs.meter_provider,
                logger_provider=RelayedEventsProvider(
                    self.outputs.logger_provider.resource, self.relays[LOGS.name]
                ),
            )
            release = self.processor.on_end_with_records
        # The pipeline forwards every span but the units itself; the assembler reads the
        # parts of sampled traces and releases each unit, with its record, to the processor.
        self.assembler = TraceAssembler(
            self.spans,
            release=release,
            timeout=options.settings.serve_assembly_timeout,
            max_traces=options.settings.serve_assembly_traces,
            max_bytes=options.settings.serve_assembly_bytes,
            on_release=self.metrics.count_released,
            tools=settings.tool_policy,
        )
        self.pipeline = ServePipeline(
            self.budget,
            self.assembler,
            self.metrics,
            sampler=sampler,
            retry_after=options.settings.serve_retry_after,
            relays=self.relays,
            seen=SeenUnits(settings.serve_dedupe_window, settings.serve_dedupe_units),
            hold_retrieval=self.processor.on_end_retrieval if self.processor else None,
        )
        self._stop: asyncio.Event | None = None
        self._started = False

    def ready(self) -> bool:
        """Listening and not draining."""
        return self._started and not self.pipeline.draining

    def request_stop(self) -> None:
        """Begin draining (what SIGTERM does); safe from the service's loop."""
        if self._stop is not None:
            self._stop.set()

    async def run(self) -> int:
        """Serve until SIGTERM/SIGINT, drain, and return the exit code (0)."""
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._stop.set)
        options = self.options
        security = options.security
        hosts = [_host_port(a)[0] for a in (options.http, options.grpc) if a]
        for warning in exposure_warnings(dict.fromkeys(hosts), security):
            _logger.warning(warning)
        grpc_server_ = None
        if options.grpc:
            grpc_server_ = grpc_server(
                self.pipeline,
                max_message_bytes=options.settings.serve_max_request_bytes,
                security=security,
                idle_timeout=self.settings.serve_idle_timeout,
            )
            host, port = _host_port(options.grpc)
            add_port(grpc_server_, f"{host}:{port}", security)
            await grpc_server_.start()
        http_server = None
        http_task = None
        if options.http:
            host, port = _host_port(options.http)
            config = uvicorn.Config(
                OtlpHttpApp(
                    self.pipeline,
                    self.ready,
                    max_request_bytes=options.settings.serve_max_request_bytes,
                    security=security,
                ),
                host=host,
                port=port,
                ssl_certfile=security.cert,
                ssl_keyfile=security.key,
                http=deadline_protocol(self.settings.serve_request_timeout),
                timeout_keep_alive=max(1, math.ceil(self.settings.serve_idle_timeout)),
                log_config=None,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=5,
            )
            http_server = _Uvicorn(config)
            http_task = asyncio.create_task(http_server.serve())
            while not http_server.started:
                if http_task.done():
                    await http_task
                    raise OSError(f"the HTTP receiver could not listen on {options.http}")
                await asyncio.sleep(0.01)
        self._started = True
        _logger.info(
            "ragpulse serve ready",
            extra={
                "http": options.http or "off",
                "grpc": options.grpc or "off",
                "evaluate": self.settings.evaluate,
                "auth": "bearer token" if security.token is not None else "none",
                "tls": security.tls,
                "output": str(options.output_file) if self.outputs.files else self.outputs.endpoint,
                "prometheus": self.outputs.prometheus_url or "off",
            },
        )
        ticker = asyncio.create_task(self._tick())
        await self._stop.wait()
        await self._drain(grpc_server_, http_server, http_task, ticker)
        return 0

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(_TICK)
            try:
                await self.pipeline.call(self.pipeline.tick)
            except Exception:
                _guard.exception("assembly timer failed")

    async def _drain(
        self,
        grpc_server_: object | None,
        http_server: _Uvicorn | None,
        http_task: asyncio.Task[None] | None,
        ticker: asyncio.Task[None],
    ) -> None:
        started = time.monotonic()
        _logger.info("draining")
        # Refuse (retryably) from now on: the listeners stay open and answer 503 /
        # UNAVAILABLE until everything held is evaluated and exported, so a sender
        # retries elsewhere rather than meeting a refused connection.
        self.pipeline.draining = True
        ticker.cancel()
        # After the requests already queued on the worker (they now see draining).
        await self.pipeline.call(self.pipeline.drain)
        deadline = started + self.options.settings.serve_drain_timeout
        loop = asyncio.get_running_loop()
        # Blocking joins, off the loop, which keeps answering meanwhile.
        await loop.run_in_executor(None, self._finish, deadline)
        if grpc_server_ is not None:
            await grpc_server_.stop(grace=1.0)  # type: ignore[attr-defined]
        if http_server is not None and http_task is not None:
            http_server.should_exit = True
            await http_task
        self.pipeline.close()
        self.outputs.shutdown(max(1.0, deadline - time.monotonic()))
        _logger.info(
            "drained",
            extra={
                "exported": self.spans.exported,
                "lost": self.spans.lost,
                "seconds": round(time.monotonic() - started, 3),
            },
        )

    def _finish(self, deadline: float) -> None:
        if self.processor is not None:
            self.processor.retire(timeout=max(0.1, deadline - time.monotonic()))
        if isinstance(self._judge, ResilientJudge):
            # Built here (rate 0), so not the processor's to close.
            self._judge.close()
        for relay in self.relays.values():
            relay.shutdown(timeout=max(1.0, deadline - time.monotonic()))


def run_service(options: ServeOptions, judge: Judge | None = None) -> int:
    """Build and run a service in a fresh event loop; returns the exit code."""
    service = ServeService(options, judge)
    return asyncio.run(service.run())
