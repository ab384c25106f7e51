"""``Relay``: what ``ragpulse serve`` forwards, one signal each, through the outputs' ``Delivery``.

Serve relays every signal an application sends it: spans (most as the bytes they came
in, the units it evaluated as SDK spans, rebuilt with their scores), log records (its
own evaluation events among them) and metrics. Each signal has one ``Relay`` in front of
one ``ragpulse.outputs.delivery.Delivery``, the same retrying, byte-bounded queue
``configure()``'s exporters use, and one ``Forwarder`` (``ragpulse.outputs.forwarders``):
the SDK's OTLP exporter of the same ``OTEL_EXPORTER_OTLP_*`` endpoint, protocol and
headers, or the signal's OTLP-JSON file. Content is relayed unchanged, as a Collector
relays it: ``capture_content`` and ``redact`` are the sender's to apply.

Delivery merges what queues up behind the request in flight into one request up to
``export_max_batch_bytes`` (below the 4 MiB a Collector's gRPC receiver takes by
default) and ``relay_max_batch_items``: many small requests become few, and none the
destination refuses; received bytes over the bound are cut first (``split_request``),
resources and scopes kept. A request the destination refuses for good is dropped at
once (``ragpulse.outputs.refusal``); any other failure is retried with backoff until it
succeeds, ``export_buffer_seconds`` pass (then it is dropped and counted, as the
Collector's exporters do after ``max_elapsed_time``) or the shutdown deadline passes.

The SDK's ``BatchSpanProcessor`` drops spans when its queue is full, which is right
inside an application and wrong in a relay: here the bound is applied at the door (the
caller's budget, ``Holding``, refuses requests with a retryable answer) and Delivery's
own buffer is sized above it. What each item holds in that budget is given back once it
is settled, delivered or dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from google.protobuf.message import Message
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ragpulse.outputs.delivery import Delivery, ExitDeadline, OnDrop
from ragpulse.outputs.forwarders import Forwarder
from ragpulse.outputs.refusal import take_refusal
from ragpulse.outputs.relayed import Item, Received, RelayedSignal, items_bytes, split_request
from ragpulse.settings import Settings

__all__ = ["Holding", "Relay"]

_logger = logging.getLogger("ragpulse.outputs.relay")


class Holding(Protocol):
    """The bound on what the relay's caller holds (serve's ``ByteBudget``)."""

    max_bytes: int

    def hold(self, size: int) -> None:
        """Take ``size`` bytes whether they fit or not."""

    def give_back(self, size: int) -> None:
        """Return ``size`` held bytes."""

    def release(self, spans: Iterable[ReadableSpan]) -> None:
        """Return what ``spans`` hold."""


class Relay(SpanProcessor):
    """Forwards one signal's records to ``forwarder`` through a ``Delivery``.

    Received requests come through ``forward`` (the bytes they came in), requests the
    caller made itself through ``forward_own``; the traces relay is also the span
    processor the evaluated units end in (``on_end``), so it is the evaluating
    processor's downstream.
    """

    def __init__(
        self,
        signal: RelayedSignal,
        forwarder: Forwarder,
        budget: Holding,
        *,
        max_batch_bytes: int = Settings.export_max_batch_bytes,
        max_retry_seconds: float = Settings.export_buffer_seconds,
        shutdown_timeout: float = Settings.shutdown_timeout,
        max_batch_items: int = Settings.relay_max_batch_items,
        linger: float = Settings.relay_linger,
        deadline: ExitDeadline | None = None,
        on_drop: OnDrop | None = None,
        on_exported: Callable[[int], None] | None = None,
        on_failure: Callable[[int], None] | None = None,
        on_lost: Callable[[int], None] | None = None,
    ) -> None:
        self.signal = signal
        self._forwarder = forwarder
        self._budget = budget
        self._max_batch_bytes = max_batch_bytes
        self._on_exported = on_exported
        self._on_failure = on_failure
        self._on_lost = on_lost
        self._exported = 0
        self._lost = 0
        self.delivery: Delivery[Item] = Delivery(
            signal.name,
            self._send,
            items_bytes,
            max_batch_bytes=max_batch_bytes,
            # The budget bounds what is held (and counts it as held in memory, more than
            # the encoded bytes counted here): the delivery buffer never evicts before it.
            max_buffer_bytes=max(budget.max_bytes, max_batch_bytes),
            max_buffer_age=max_retry_seconds,
            shutdown_timeout=shutdown_timeout,
            deadline=deadline,
            on_drop=on_drop,
            close=self._close_forwarder,
            coalesce=max_batch_items,
            linger=linger,
            on_settled=self._settled,
            refused=lambda: take_refusal(forwarder),
        )

    @property
    def queued(self) -> int:
        """Encoded bytes waiting for delivery."""
        return self.delivery.queued_bytes

    @property
    def exported(self) -> int:
        """Records delivered so far."""
        return self._exported

    @property
    def lost(self) -> int:
        """Records given up on: refused, retried for ``max_retry_seconds``, or at shutdown."""
        return self._lost

    def forward(self, data: bytes, count: int, held: int, request: Message | None = None) -> None:
        """Queue a received request (``data``: its bytes; ``count`` records holding ``held``
        bytes of the budget, given back once settled), cut to the byte bound.

        ``request``: ``data`` decoded, when the caller has it (saves a decode when the bytes
        must be cut).
        """
        if len(data) <= self._max_batch_bytes:
            self.delivery.put([Received(data, count, held)])
            return
        signal = self.signal
        whole = request if request is not None else signal.request.FromString(data)
        parts = split_request(whole, self._max_batch_bytes, signal)
        # Each part holds its share of the request's held bytes; the shares add up.
        given = 0
        items: list[Item] = []
        for index, part in enumerate(parts):
            records = signal.count(part)
            last = index == len(parts) - 1
            share = held - given if last else held * records // max(count, 1)
            given += share
            items.append(Received(part.SerializeToString(), records, share))
        for item in items:
            self.delivery.put([item])

    def forward_own(self, data: bytes, count: int) -> None:
        """Queue a request the caller made itself (serve's evaluation events) with those it
        relays; held in the budget like them, though never refused: it is small and stands
        for work already done."""
        self._budget.hold(len(data))
        self.delivery.put([Received(data, count, len(data))])

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        """Queue one span (the traces relay: an evaluated unit, a carrier, a span that
        waited in assembly), encoded when it leaves."""
        self.delivery.put([span])

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until everything handed in so far is delivered (or the timeout passes)."""
        return self.delivery.flush(timeout_millis / 1000.0)

    def shutdown(self, timeout: float = Settings.shutdown_timeout) -> None:  # type: ignore[override]
        """Deliver what is queued within ``timeout``, then stop and shut the forwarder down."""
        self.delivery.shutdown(timeout)

    # --- delivery's callbacks (its sending thread) -----------------------------------------

    def _send(self, items: Sequence[Item]) -> bool:
        ok = self._forwarder.send(items)
        if not ok and self._on_failure is not None:
            self._on_failure(_records(items))
        return ok

    def _settled(self, items: Sequence[Any], delivered: bool) -> None:
        records = 0
        held = 0
        spans: list[ReadableSpan] = []
        for item in items:
            if type(item) is Received:
                records += item.count
                held += item.held
            else:
                records += 1
                spans.append(item)
        if spans:
            self._budget.release(spans)
        if held:
            self._budget.give_back(held)
        if delivered:
            self._exported += records
            if self._on_exported is not None:
                self._on_exported(records)
        else:
            self._lost += records
            if self._on_lost is not None:
                self._on_lost(records)

    def _close_forwarder(self) -> None:
        try:
            self._forwarder.shutdown()
        except Exception:
            _logger.debug("relay forwarder shutdown failed", exc_info=True)


def _records(items: Sequence[Item]) -> int:
    return sum(item.count if type(item) is Received else 1 for item in items)
