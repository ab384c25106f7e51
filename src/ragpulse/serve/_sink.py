"""``ForwardingSink``: the exporting end of ``ragpulse serve``; never drops a span.

Its exporter is one of ``ragpulse.serve._export``'s forwarders, which also take
whole received requests (``RawSpans``) when evaluation is off.

The SDK's ``BatchSpanProcessor`` drops spans when its queue is full, which is
right inside an application and wrong in a relay: here the bound is applied at
the door (``ByteBudget`` refuses requests with a retryable answer), so this
queue only needs to keep order and batch. A failed export is retried with
backoff until it succeeds, ``max_retry_seconds`` pass (then it is dropped and
counted, as the Collector's exporters do after ``max_elapsed_time``) or the
shutdown deadline passes; the bytes of a batch
go back to the budget once it is delivered.

A batch is bounded in spans (``max_batch``) and in encoded bytes
(``max_batch_bytes``, below the 4 MiB a Collector's gRPC receiver takes by
default), so small requests from many senders are never merged into one the
destination refuses; a request passed through whole is cut to the same bound.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ragpulse._guard import Guard
from ragpulse.serve._budget import ByteBudget
from ragpulse.serve._export import Item, RawSpans, item_bytes, item_count, split_request
from ragpulse.settings import Settings

_logger = logging.getLogger("ragpulse.serve.export")
# Internal errors are logged throttled: one export failing in a loop is one line and a count.
_guard = Guard("ragpulse.serve.export")

DEFAULT_MAX_BATCH = 512
DEFAULT_MAX_BATCH_BYTES = Settings.export_max_batch_bytes
DEFAULT_SCHEDULE_DELAY = 0.1
DEFAULT_MAX_RETRY_SECONDS = 120.0
_FIRST_BACKOFF = 0.25
_MAX_BACKOFF = 5.0


class ForwardingSink(SpanProcessor):
    """Batches spans to ``exporter`` on one thread, retrying failures; thread-safe ``on_end``."""

    def __init__(
        self,
        exporter: SpanExporter,
        budget: ByteBudget,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        schedule_delay: float = DEFAULT_SCHEDULE_DELAY,
        on_exported: Callable[[int], None] | None = None,
        on_failure: Callable[[int], None] | None = None,
        on_lost: Callable[[int], None] | None = None,
        max_retry_seconds: float = DEFAULT_MAX_RETRY_SECONDS,
    ) -> None:
        self._exporter = exporter
        self._budget = budget
        self._max_batch = max_batch
        self._max_batch_bytes = max_batch_bytes
        self._delay = schedule_delay
        self._on_exported = on_exported
        self._on_failure = on_failure
        self._on_lost = on_lost
        self._max_retry_seconds = max_retry_seconds
        self._queue: deque[tuple[Item, int]] = deque()
        """Items with the bytes each adds to a request."""
        self._queued_spans = 0
        self._queued_bytes = 0
        # The condition's lock guards the queue and the in-flight count; it is never
        # held while exporting, so on_end (any thread) never waits on the network.
        self._cond = threading.Condition()
        self._in_flight = 0
        self._stop = False
        self._give_up_at: float | None = None
        self._stopping = threading.Event()
        self._exported = 0
        self._lost = 0
        self._thread = threading.Thread(target=self._run, name="ragpulse-serve-export", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        """Spans waiting for export (not counting the batch being sent)."""
        return self._queued_spans

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
        self._put(span, 1)

    def forward_raw(self, raw: RawSpans) -> None:
        """Queue a received request that goes out unchanged (cut to the byte bound)."""
        parts = split_request(raw.request, self._max_batch_bytes)
        if len(parts) == 1:
            self._put(raw, raw.count)
            return
        # Each part holds its share of the request's reserved bytes; the shares add up.
        given = 0
        for index, part in enumerate(parts):
            count = sum(len(ss.spans) for rs in part.resource_spans for ss in rs.scope_spans)
            share = raw.size - given if index == len(parts) - 1 else raw.size * count // raw.count
            given += share
            self._put(RawSpans(part, count, share), count)

    def _put(self, item: Item, spans: int) -> None:
        size = item_bytes(item)
        with self._cond:
            self._queue.append((item, size))
            self._queued_spans += spans
            self._queued_bytes += size
            if self._full():
                self._cond.notify_all()

    def _full(self) -> bool:
        return self._queued_spans >= self._max_batch or self._queued_bytes >= self._max_batch_bytes

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until every span handed in so far is delivered (or the timeout passes)."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        with self._cond:
            self._cond.notify_all()
            while self._queue or self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.05))
        return True

    def shutdown(self, timeout: float = 30.0) -> None:  # type: ignore[override]
        """Deliver what is queued within ``timeout``, then stop and shut the exporter down."""
        with self._cond:
            self._give_up_at = time.monotonic() + timeout
            self._stop = True
            self._cond.notify_all()
        self._stopping.set()
        self._thread.join(timeout + 1.0)
        try:
            self._exporter.shutdown()
        except Exception:
            _logger.debug("exporter shutdown failed", exc_info=True)

    def _take(self) -> list[Item] | None:
        with self._cond:
            if not self._queue and not self._stop:
                self._cond.wait(self._delay)
            if not self._queue:
                return None if self._stop else []
            if not self._full() and not self._stop:
                # Let a batch fill for one delay; a full one goes at once.
                self._cond.wait_for(lambda: self._full() or self._stop, self._delay)
            batch: list[Item] = []
            taken = 0
            size = 0
            while self._queue:
                item, item_size = self._queue[0]
                if batch and (taken >= self._max_batch or size + item_size > self._max_batch_bytes):
                    break
                self._queue.popleft()
                batch.append(item)
                taken += item_count(item)
                size += item_size
            self._queued_spans -= taken
            self._queued_bytes -= size
            self._in_flight = taken
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if batch:
                self._deliver(batch)
            with self._cond:
                self._in_flight = 0
                self._cond.notify_all()

    def _release(self, batch: Sequence[Item]) -> None:
        self._budget.release(item for item in batch if isinstance(item, ReadableSpan))
        raw = sum(item.size for item in batch if isinstance(item, RawSpans))
        if raw:
            self._budget.give_back(raw)

    def _deliver(self, batch: Sequence[Item]) -> None:
        spans = sum(item_count(item) for item in batch)
        backoff = _FIRST_BACKOFF
        # A batch the destination refuses for longer than this (a request it will never
        # take, a backend gone for good) is dropped and counted, so it cannot wedge the
        # relay: meanwhile the full buffer has been refusing senders, who keep their data.
        retry_until = time.monotonic() + self._max_retry_seconds
        while True:
            try:
                ok = self._exporter.export(batch) is SpanExportResult.SUCCESS  # type: ignore[arg-type]
            except Exception:
                _guard.exception("export raised")
                ok = False
            if ok:
                self._exported += spans
                self._release(batch)
                if self._on_exported is not None:
                    self._on_exported(spans)
                return
            if self._on_failure is not None:
                self._on_failure(spans)
            give_up_at = self._give_up_at
            now = time.monotonic()
            shutting_down = give_up_at is not None and now >= give_up_at
            if shutting_down or now >= retry_until:
                self._lost += spans
                self._release(batch)
                if self._on_lost is not None:
                    self._on_lost(spans)
                _logger.error(
                    "gave up exporting spans at shutdown"
                    if shutting_down
                    else "gave up exporting spans after retrying",
                    extra={"spans": spans, "lost_total": self._lost},
                )
                return
            _logger.warning(
                "export failed, retrying", extra={"spans": spans, "retry_in_s": backoff}
            )
            sleep = backoff * random.uniform(0.8, 1.2)
            if give_up_at is not None:
                sleep = min(sleep, max(0.0, give_up_at - now))
            if self._stopping.is_set():
                time.sleep(sleep)  # draining: the deadline above bounds these retries
            else:
                self._stopping.wait(sleep)
            backoff = min(backoff * 2, _MAX_BACKOFF)
