"""``ForwardingSink``: the exporting end of ``ragpulse serve``, on the outputs layer's ``Delivery``.

The sink is a ``SpanProcessor`` in front of one ``ragpulse.outputs.delivery.Delivery``, the
same retrying, byte-bounded queue ``configure()``'s exporters use. Units come
through ``on_end`` (as SDK spans); everything forwarded unchanged comes through
``forward_raw`` as the bytes it arrived in. Delivery merges what queues up
behind the request in flight into one request up to ``export_max_batch_bytes``
(below the 4 MiB a Collector's gRPC receiver takes by default), so many small
requests become few, and none the destination refuses; raw bytes over the bound
are cut first (``split_request``), resources and scopes kept.

The SDK's ``BatchSpanProcessor`` drops spans when its queue is full, which is
right inside an application and wrong in a relay: here the bound is applied at
the door (``ByteBudget`` refuses requests with a retryable answer), and
Delivery's own buffer is sized above it. A failed export is retried with
backoff until it succeeds, ``export_buffer_seconds`` pass (then it is dropped
and counted, as the Collector's exporters do after ``max_elapsed_time``) or the
shutdown deadline passes; the budget gets the bytes back either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from opentelemetry.context import Context
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ragpulse.outputs.delivery import Delivery, ExitDeadline, OnDrop
from ragpulse.outputs.refusal import take_refusal
from ragpulse.serve._byte_budget import ByteBudget
from ragpulse.serve._encode import Item, RawSpans, item_count, items_bytes, split_request
from ragpulse.settings import Settings

_logger = logging.getLogger("ragpulse.serve.export")
T = TypeVar("T")

MAX_BATCH_ITEMS = 512
"""Items merged into one forwarded request at most (spans, or received requests)."""
LINGER = 0.1
"""Seconds a small export waits for others to join it: evaluated units finish one by one,
and one request each would cost more than the spans in it."""


def relay_delivery(
    signal: str,
    send: Callable[[Sequence[T]], bool],
    measure: Callable[[Sequence[T], int], int],
    budget: ByteBudget,
    *,
    max_batch_bytes: int,
    max_retry_seconds: float,
    shutdown_timeout: float,
    deadline: ExitDeadline | None,
    on_drop: OnDrop | None,
    close: Callable[[], None],
    on_settled: Callable[[Sequence[Any], bool], None],
    refused: Callable[[], str | None] | None = None,
) -> Delivery[T]:
    """The ``Delivery`` of what serve relays: bounded by ``budget``, merging what queues up."""
    return Delivery(
        signal,
        send,
        measure,
        max_batch_bytes=max_batch_bytes,
        # The budget bounds what is held (and counts it as held in memory, more than
        # the encoded bytes counted here): the delivery buffer never evicts before it.
        max_buffer_bytes=max(budget.max_bytes, max_batch_bytes),
        max_buffer_age=max_retry_seconds,
        shutdown_timeout=shutdown_timeout,
        deadline=deadline,
        on_drop=on_drop,
        close=close,
        coalesce=MAX_BATCH_ITEMS,
        linger=LINGER,
        on_settled=on_settled,
        refused=refused,
    )


class ForwardingSink(SpanProcessor):
    """Forwards spans and received bytes to ``exporter`` through a ``Delivery``."""

    def __init__(
        self,
        exporter: SpanExporter,
        budget: ByteBudget,
        *,
        max_batch_bytes: int = Settings.export_max_batch_bytes,
        max_retry_seconds: float = Settings.export_buffer_seconds,
        shutdown_timeout: float = Settings.shutdown_timeout,
        deadline: ExitDeadline | None = None,
        on_drop: OnDrop | None = None,
        on_exported: Callable[[int], None] | None = None,
        on_failure: Callable[[int], None] | None = None,
        on_lost: Callable[[int], None] | None = None,
    ) -> None:
        self._exporter = exporter
        self._budget = budget
        self._max_batch_bytes = max_batch_bytes
        self._on_exported = on_exported
        self._on_failure = on_failure
        self._on_lost = on_lost
        self._exported = 0
        self._lost = 0
        self.delivery: Delivery[Item] = relay_delivery(
            "traces",
            self._send,
            items_bytes,
            budget,
            max_batch_bytes=max_batch_bytes,
            max_retry_seconds=max_retry_seconds,
            shutdown_timeout=shutdown_timeout,
            deadline=deadline,
            on_drop=on_drop,
            close=self._close_exporter,
            on_settled=self._settled,
            refused=lambda: take_refusal(self._exporter),
        )

    @property
    def queued(self) -> int:
        """Encoded bytes waiting for delivery."""
        return self.delivery.queued_bytes

    @property
    def exported(self) -> int:
        """Spans delivered so far."""
        return self._exported

    @property
    def lost(self) -> int:
        """Spans given up on: at shutdown, or refused for ``max_retry_seconds``."""
        return self._lost

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self.delivery.put([span])

    def forward_raw(self, raw: RawSpans, request: ExportTraceServiceRequest | None = None) -> None:
        """Queue received spans that go out as they came (cut to the byte bound).

        ``request``: ``raw.data`` decoded, when the caller has it (saves a decode when the
        bytes must be cut).
        """
        if len(raw.data) <= self._max_batch_bytes:
            self.delivery.put([raw])
            return
        whole = request if request is not None else ExportTraceServiceRequest.FromString(raw.data)
        parts = split_request(whole, self._max_batch_bytes)
        # Each part holds its share of the request's reserved bytes; the shares add up.
        given = 0
        items: list[Item] = []
        for index, part in enumerate(parts):
            count = sum(len(ss.spans) for rs in part.resource_spans for ss in rs.scope_spans)
            last = index == len(parts) - 1
            share = raw.size - given if last else raw.size * count // max(raw.count, 1)
            given += share
            items.append(RawSpans(part.SerializeToString(), count, share))
        for item in items:
            self.delivery.put([item])

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until everything handed in so far is delivered (or the timeout passes)."""
        return self.delivery.flush(timeout_millis / 1000.0)

    def shutdown(self, timeout: float = Settings.shutdown_timeout) -> None:  # type: ignore[override]
        """Deliver what is queued within ``timeout``, then stop and shut the exporter down."""
        self.delivery.shutdown(timeout)

    # --- delivery's callbacks (its sending thread) -----------------------------------------

    def _send(self, items: Sequence[Item]) -> bool:
        ok = self._exporter.export(items) is SpanExportResult.SUCCESS  # type: ignore[arg-type]
        if not ok and self._on_failure is not None:
            self._on_failure(sum(item_count(item) for item in items))
        return ok

    def _settled(self, items: Sequence[Any], delivered: bool) -> None:
        spans = sum(item_count(item) for item in items)
        self._budget.release(item for item in items if type(item) is not RawSpans)
        raw = sum(item.size for item in items if type(item) is RawSpans)
        if raw:
            self._budget.give_back(raw)
        if delivered:
            self._exported += spans
            if self._on_exported is not None:
                self._on_exported(spans)
        else:
            self._lost += spans
            if self._on_lost is not None:
                self._on_lost(spans)

    def _close_exporter(self) -> None:
        try:
            self._exporter.shutdown()
        except Exception:
            _logger.debug("exporter shutdown failed", exc_info=True)
