"""``ServePipeline``: what one received export request goes through, whichever receiver took it.

admit (``ByteBudget``) → route on the protobuf (``_route``: sampled by trace id,
forced, copies dropped, results stripped) → the spans that go on as they came are
forwarded as bytes (the traces ``Relay``, ``ragpulse.outputs.relay``); the spans of
sampled traces are converted (OTLP → ``ReadableSpan``) and assembled
(``TraceAssembler``), and each unit goes to the ``EvaluatingSpanProcessor`` with its
record, then to the same relay. The retrieval spans of sampled traces go to the
processor too, before their unit (``hold_retrieval``), so they leave with it carrying
their documents' scores.
The answer follows the OTLP protocol: accepted (with the count of spans
rejected as unreadable, the partial success), or refused with a retryable
reason and a delay when the buffer is full or the service is draining.

The receivers run on the service's event loop; everything a request costs in
proportion to its size (gunzip, decoding, routing, conversion, assembly) runs on
the pipeline's one worker thread (``ServePipeline.call``), so ``/healthz``,
``/readyz`` and SIGTERM are answered at once whatever a request holds, and the
assembler stays single-threaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

from ragpulse import semconv
from ragpulse.outputs.relay import Relay
from ragpulse.outputs.relayed import LOGS, METRICS, TRACES, RelayedSignal
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.serve._assembly import TraceAssembler, is_unit
from ragpulse.serve._byte_budget import HELD_PER_WIRE_BYTE, ByteBudget, held_bytes
from ragpulse.serve._convert import ReceivedSpan, count_spans, to_readable_spans
from ragpulse.serve._log_content import take_content_events
from ragpulse.serve._route import route
from ragpulse.serve._trust import SeenUnits, may_need_vetting, vet_logs, vet_metrics
from ragpulse.settings import Settings

# Memory held per received byte, before the first request shows it (RAG-shaped spans of
# ~180 wire bytes hold ~2.6 KB each).
_FIRST_HELD_RATIO = 14.0
_RATIO_WEIGHT = 0.2

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(frozen=True)
class Outcome:
    """The answer to one export request."""

    accepted: int = 0
    rejected: int = 0
    """Spans refused for good (invalid ids): the OTLP partial success."""
    message: str = ""
    refused: str | None = None
    """Set when the whole request must be retried: ``buffer_full`` or ``draining``."""
    retry_after: float = Settings.serve_retry_after


class ServeMetrics:
    """The relay's own counters (``ragpulse.serve.*``)."""

    def __init__(self, meter_provider: metrics.MeterProvider | None, budget: ByteBudget) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("ragpulse.serve")
        self.received = meter.create_counter(
            semconv.METRIC_SERVE_SPANS_RECEIVED, unit="{span}", description="Spans accepted"
        )
        self.refused = meter.create_counter(
            semconv.METRIC_SERVE_SPANS_REFUSED,
            unit="{span}",
            description="Spans refused with a retryable answer, by reason",
        )
        self.rejected = meter.create_counter(
            semconv.METRIC_SERVE_SPANS_REJECTED,
            unit="{span}",
            description="Spans rejected for good (unreadable), reported as partial success",
        )
        self.exported = meter.create_counter(
            semconv.METRIC_SERVE_SPANS_EXPORTED, unit="{span}", description="Spans delivered"
        )
        self.export_failures = meter.create_counter(
            semconv.METRIC_SERVE_EXPORT_FAILURES,
            unit="{span}",
            description="Spans in export attempts that failed (each retried)",
        )
        self.dropped = meter.create_counter(
            semconv.METRIC_SERVE_SPANS_DROPPED,
            unit="{span}",
            description="Spans given up on after retrying (export_buffer_seconds) or at shutdown",
        )
        self.released = meter.create_counter(
            semconv.METRIC_SERVE_ASSEMBLY_RELEASED,
            unit="{span}",
            description="Units released to evaluation by reason: complete, timeout, evicted, drain",
        )
        self.duplicates = meter.create_counter(
            semconv.METRIC_SERVE_UNITS_DUPLICATE,
            unit="{span}",
            description="Units received again within the dedupe window: not forwarded or judged",
        )
        self.content_events_dropped = meter.create_counter(
            semconv.METRIC_SERVE_CONTENT_EVENTS_DROPPED,
            unit="{event}",
            description=(
                "GenAI content log events of sampled traces not read with their trace, by "
                "reason: late (its units were released), bounds (the per-trace bound)"
            ),
        )
        self.results_dropped = meter.create_counter(
            semconv.METRIC_SERVE_RESULTS_DROPPED,
            unit="{record}",
            description="Received evaluation results serve did not compute, not relayed, by signal",
        )

        def buffer(_: CallbackOptions) -> list[Observation]:
            return [Observation(budget.used)]

        meter.create_observable_gauge(
            semconv.METRIC_SERVE_BUFFER_BYTES,
            callbacks=[buffer],
            unit="By",
            description="Bytes held between receiving and exporting",
        )
        self._assembly_traces = 0
        self._released: dict[str, int] = {}

        def traces(_: CallbackOptions) -> list[Observation]:
            return [Observation(self._assembly_traces)]

        meter.create_observable_gauge(
            semconv.METRIC_SERVE_ASSEMBLY_TRACES,
            callbacks=[traces],
            unit="{trace}",
            description="Traces waiting in assembly",
        )

    def count_released(self, reason: str, units: int) -> None:
        """Count units released from assembly; added to the counter by ``observe_assembly``.

        Adding to an SDK counter costs more than assembling a small trace: the counts of
        one request (or one tick) are added once per reason.
        """
        self._released[reason] = self._released.get(reason, 0) + units

    def observe_assembly(self, traces: int) -> None:
        """Remember the assembly size for the next collection; add the units released."""
        self._assembly_traces = traces
        if self._released:
            released, self._released = self._released, {}
            for reason, units in released.items():
                self.released.add(units, {"reason": reason})


class ServePipeline:
    """Admits, routes, converts and assembles export requests; one instance per service.

    ``relays``: one per signal, by name. Spans go on through the traces relay; log and
    metric export requests are admitted the same way and passed on whole.

    ``sampler`` None: evaluation is off and every request goes on whole, as it came.
    """

    def __init__(
        self,
        budget: ByteBudget,
        assembler: TraceAssembler,
        serve_metrics: ServeMetrics,
        *,
        sampler: EvalSampler | None = None,
        retry_after: float = Settings.serve_retry_after,
        relays: Mapping[str, Relay],
        seen: SeenUnits | None = None,
        hold_retrieval: Callable[[ReadableSpan], None] | None = None,
    ) -> None:
        self.budget = budget
        self._relays = relays
        self._seen = seen
        self._hold_retrieval = hold_retrieval
        self._spans = relays[TRACES.name]
        self._sampler = sampler
        self.assembler = assembler
        self.metrics = serve_metrics
        self._retry_after = retry_after
        self.draining = False
        self._held_ratio = _FIRST_HELD_RATIO if sampler is not None else HELD_PER_WIRE_BYTE
        """Memory held per wire byte, as recent requests showed (for the admission estimate)."""
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragpulse-serve-work")

    async def call(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``fn`` on the pipeline's worker thread and wait for it without blocking the loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        """Stop the worker thread once the work queued on it is done."""
        self._worker.shutdown(wait=True)

    def receive(
        self,
        request: ExportTraceServiceRequest,
        size: int,
        protocol: str,
        body: bytes | None = None,
    ) -> Outcome:
        """Take one decoded request of ``size`` bytes; never raises for bad spans.

        ``body``: the protobuf ``request`` was decoded from, when it came as protobuf;
        spans forwarded as they came are sent as these very bytes where they can be.
        """
        labels = {"protocol": protocol}
        refused = None
        # Admission must stay cheap, before decoding: reserve what this many bytes have
        # held lately, then settle on what they hold once routed.
        estimate = max(1, int(size * self._held_ratio))
        if self.draining:
            refused = semconv.SERVE_REFUSED_DRAINING
        elif not self.budget.reserve(estimate):
            refused = semconv.SERVE_REFUSED_BUFFER_FULL
        if refused is not None:
            # Counted before conversion: a refusal must stay cheap under overload.
            self.metrics.refused.add(count_spans(request), {**labels, "reason": refused})
            return Outcome(refused=refused, retry_after=self._retry_after)
        if self._sampler is None:
            # Evaluation off: the request goes out as it came, never converted.
            count = count_spans(request)
            data = body if body is not None else request.SerializeToString()
            self._spans.forward(data, count, estimate, request)
            self.metrics.received.add(count, labels)
            return Outcome(accepted=count)
        routed = route(request, body, self._sampler, self._seen)
        if routed.duplicates:
            self.metrics.duplicates.add(routed.duplicates, labels)
        raw_held = 0
        if routed.raw is not None:
            raw_held = len(routed.raw)
            whole = request if routed.raw is body else None
            self._spans.forward(routed.raw, routed.raw_count, raw_held, whole)
        spans: list[ReadableSpan] = []
        if routed.convert is not None:
            spans = to_readable_spans(routed.convert).spans
        held = routed.held
        units = [span for span in spans if is_unit(span) or (held and _key(span) in held)]
        units_held = held_bytes(sum(_wire_size(unit) for unit in units), len(units))
        # The units hold their share until exported; the raw bytes theirs until delivered.
        if units:
            self.budget.assign(units, units_held, reserved=estimate - raw_held)
        else:
            self.budget.give_back(estimate - raw_held)
        self._held_ratio += _RATIO_WEIGHT * (
            (raw_held + units_held) / max(size, 1) - self._held_ratio
        )
        accepted = routed.raw_count + len(units)
        self.metrics.received.add(accepted, labels)
        if routed.rejected:
            self.metrics.rejected.add(routed.rejected, labels)
        add = self.assembler.add
        hold_retrieval = self._hold_retrieval or self._spans.on_end
        for span in spans:
            if held and _key(span) in held:
                # Waiting in the processor before its unit can be released to it.
                hold_retrieval(span)
            add(span)
        self.metrics.observe_assembly(self.assembler.traces)
        return Outcome(
            accepted=accepted, rejected=routed.rejected, message="; ".join(routed.errors)
        )

    def receive_relayed(
        self, signal: RelayedSignal, request: Any, body: bytes | None = None
    ) -> Outcome:
        """Take one decoded logs or metrics request and pass it on as it came (``body``: its
        protobuf).

        Admitted like spans: refused (retryably) while draining or when its bytes do not
        fit the budget, which holds them until they are delivered or dropped.
        """
        data = self._vetted(signal, request, body)
        if self.draining:
            return Outcome(refused=semconv.SERVE_REFUSED_DRAINING, retry_after=self._retry_after)
        if not self.budget.reserve(len(data)):
            return Outcome(refused=semconv.SERVE_REFUSED_BUFFER_FULL, retry_after=self._retry_after)
        count = signal.count(request)
        if signal.name == LOGS.name and self._sampler is not None:
            # Read before the request is handed on: the relay may merge it into another.
            self._take_content(request, body)
        self._relays[signal.name].forward(data, count, len(data), request)
        return Outcome(accepted=count)

    def _take_content(self, request: Any, body: bytes | None) -> None:
        """Hand the GenAI content events of sampled traces to the assembler, which reads
        them onto their spans (the events of other traces are only relayed)."""
        assert self._sampler is not None
        dropped = take_content_events(self.assembler, request, body, self._sampler.in_sample)
        for reason, n in dropped.items():
            self.metrics.content_events_dropped.add(n, {"reason": reason})
        self.metrics.observe_assembly(self.assembler.traces)

    def _vetted(self, signal: RelayedSignal, request: Any, body: bytes | None) -> bytes:
        """The bytes to relay: ``body`` as it came, unless vetting changed the request (a
        result serve did not compute dropped, a feedback text scrubbed)."""
        if not may_need_vetting(body):
            assert body is not None
            return body
        evaluating = self._sampler is not None
        if signal.name == LOGS.name:
            changed = vet_logs(request, results=evaluating)
        elif signal.name == METRICS.name:
            changed = vet_metrics(request, results=evaluating)
        else:
            changed = 0
        if changed > 0:
            self.metrics.results_dropped.add(changed, {semconv.ATTR_EXPORT_SIGNAL: signal.name})
        if changed or body is None:
            return bytes(request.SerializeToString())
        return body

    def tick(self) -> None:
        """Release timed-out units (called by the service's timer)."""
        self.assembler.expire()
        self.metrics.observe_assembly(self.assembler.traces)

    def drain(self) -> None:
        """Release every unit still assembling (the service is draining)."""
        self.assembler.drain()
        self.metrics.observe_assembly(self.assembler.traces)


def _key(span: ReadableSpan) -> tuple[bytes, bytes]:
    context = span.context
    if context is None:
        return (b"", b"")
    return (context.trace_id.to_bytes(16, "big"), context.span_id.to_bytes(8, "big"))


def _wire_size(span: ReadableSpan) -> int:
    return int(span.otlp.ByteSize()) if isinstance(span, ReceivedSpan) else 0
