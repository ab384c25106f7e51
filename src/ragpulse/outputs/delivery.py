"""Exporters that survive a backend restart: retry, a bounded buffer, and batches that fit.

The SDK's batch processors hand a batch to their exporter and forget it; an
OTLP exporter retries for its own ``timeout`` (10 s) and then drops the batch,
while the processor's queue, blocked behind it, overflows. A backend restarted
for 30 s lost a third of the spans that way. ``DeliveringSpanExporter``,
``DeliveringLogExporter`` and ``DeliveringMetricExporter`` wrap the OTLP
exporters with one concern each signal shares (``Delivery``):

- ``export`` never blocks: the batch is split so that no request exceeds
  ``max_batch_bytes`` encoded (a gRPC receiver refuses more than 4 MiB and, with
  it, every other span of that request), and queued;
- one daemon thread sends the queue in order, and retries the head with
  exponential backoff and jitter while the backend is down;
- the queue is bounded by bytes and by age; what falls out of it, or cannot be
  sent by the shutdown deadline, is counted by ``on_drop`` (the
  ``ragpulse.evaluator.export.dropped`` counter) and logged once per outage;
- ``force_flush`` returns False unless everything queued was delivered in time and
  the backend refused no export since the last flush (a 401 to everything is not a
  successful flush; a traces-only backend's 404 to logs is its way of not taking them),
  and ``shutdown`` waits no longer than its timeout (and the ``ExitDeadline``
  shared by all signals), so an unreachable endpoint cannot hold the process.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ragpulse import semconv
from ragpulse.outputs.refusal import refuses_the_signal, take_refusal

__all__ = [
    "DROP_BUFFER_FULL",
    "DROP_EXPIRED",
    "DROP_REFUSED",
    "DROP_SHUTDOWN",
    "DROP_TOO_LARGE",
    "DROP_UNWRITABLE",
    "DeliveringLogExporter",
    "DeliveringMetricExporter",
    "DeliveringSpanExporter",
    "Delivery",
    "ExitDeadline",
    "Flushes",
    "backoff_after",
]

_logger = logging.getLogger("ragpulse.export")

DROP_BUFFER_FULL = "buffer_full"
"""The buffer held ``max_buffer_bytes``: the oldest export made room."""
DROP_EXPIRED = "expired"
"""An export was retried for ``max_buffer_age`` seconds without success."""
DROP_TOO_LARGE = "too_large"
"""One item alone encodes to more than ``max_batch_bytes``: no receiver would take it."""
DROP_SHUTDOWN = "shutdown"
"""Still queued when the shutdown deadline passed, or exported after shutdown."""
DROP_REFUSED = "refused"
"""The backend refused the export for good (OTLP's non-retryable failures: a traces-only
backend's 404 or 405 to logs and metrics, 400, 401, gRPC UNIMPLEMENTED...): not retried."""

DROP_UNWRITABLE = "unwritable"
"""The output file cannot be written (a directory, a path under ``/proc``, no permission, a
full disk): what was exported to it is lost."""

BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 5.0
_DROP_LOG_INTERVAL = 60.0

T = TypeVar("T")
OnDrop = Callable[[str, str, int], None]
"""``on_drop(signal, reason, count)``: called (never under a lock) for what is dropped."""
OnSettled = Callable[[Sequence[Any], bool], None]
"""``on_settled(items, delivered)``: called (never under a lock, on the sending thread or the
caller's) once for every item put, when it was delivered (True) or dropped (False)."""


class Flushes(Protocol):
    """What a setup flushes and shuts down with itself: a ``Delivery``, or an output file
    (``ragpulse.outputs.files``), whose ``flush`` is False while what it is given is lost."""

    def flush(self, timeout: float) -> bool: ...

    def shutdown(self, timeout: float | None = None) -> bool: ...


class ExitDeadline:
    """One deadline shared by every signal's shutdown, so exit waits for one grace, not three."""

    def __init__(self) -> None:
        self._at: float | None = None

    def start(self, seconds: float) -> None:
        """From now, shutdowns have ``seconds`` in all (an earlier deadline stands)."""
        at = time.monotonic() + max(0.0, seconds)
        self._at = at if self._at is None else min(self._at, at)

    def remaining(self, default: float) -> float:
        """Seconds left, or ``default`` when no deadline was started."""
        if self._at is None:
            return default
        return max(0.0, self._at - time.monotonic())


@dataclass
class _Chunk(Generic[T]):
    items: Sequence[T]
    size: int
    queued_at: float


def backoff_after(attempt: int) -> float:
    """Seconds to wait after the ``attempt``-th failure in a row: doubling, capped.

    The exponent is capped too: past the cap the doubling no longer matters, and a
    sender that retried without waiting (a close past its deadline) for a thousand
    attempts would otherwise overflow a float and end the sending thread.
    """
    return min(BACKOFF_MAX, BACKOFF_INITIAL * 2.0 ** min(max(attempt - 1, 0), 32))


class Delivery(Generic[T]):
    """A bounded, retried, in-order queue of export requests for one signal.

    ``send(items) -> bool`` performs one request (the wrapped exporter);
    ``measure(items, limit) -> int`` gives its encoded size in bytes, exactly when it is
    near or over ``limit``, else an upper bound of it. With ``coalesce``, exports queued
    behind the one being sent are merged into one request up to ``max_batch_bytes`` (and
    ``coalesce`` items): a relay that puts each received request on its own sends as few
    requests as its backend's pace allows, and none that backend would refuse.
    ``linger`` seconds an export may wait for others to join it while less than half a
    request is queued (a relay whose items arrive one by one sends one request per
    ``linger``, not one per item). ``on_settled`` hears about every item's end, delivered
    or dropped. ``refused()``, asked on the sending thread after a request failed, says why
    the backend refused it for good (``ragpulse.outputs.refusal``), or None: a refused request is
    dropped at once (``DROP_REFUSED``) rather than retried until it expires. ``unit`` names
    what ``measure`` counts and ``counted_in`` where drops are counted, in its log lines.
    """

    def __init__(
        self,
        signal: str,
        send: Callable[[Sequence[T]], bool],
        measure: Callable[[Sequence[T], int], int],
        *,
        max_batch_bytes: int,
        max_buffer_bytes: int,
        max_buffer_age: float,
        shutdown_timeout: float,
        deadline: ExitDeadline | None = None,
        on_drop: OnDrop | None = None,
        close: Callable[[], None] | None = None,
        coalesce: int = 0,
        linger: float = 0.0,
        on_settled: OnSettled | None = None,
        refused: Callable[[], str | None] | None = None,
        unit: str = "bytes",
        counted_in: str = semconv.METRIC_EXPORT_DROPPED,
    ) -> None:
        self.signal = signal
        self._unit = unit
        self._counted_in = counted_in
        self._refused = refused
        self._coalesce = coalesce
        self._linger = linger
        self._on_settled = on_settled
        self._send = send
        self._measure = measure
        self._close = close
        self._max_batch_bytes = max_batch_bytes
        self._max_buffer_bytes = max_buffer_bytes
        self._max_age = max_buffer_age
        self._shutdown_timeout = shutdown_timeout
        self._deadline = deadline or ExitDeadline()
        self._on_drop = on_drop
        self._init_state()
        if hasattr(os, "register_at_fork"):
            # A child starts with an empty queue and its own thread (the parent sends its own).
            ref = weakref.WeakMethod(self._init_state)
            os.register_at_fork(after_in_child=lambda: (m := ref()) is not None and m())

    def _init_state(self) -> None:
        # One condition guards the queue, its byte count and the flags. It is never held
        # while sending, measuring or calling ``on_drop``.
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[_Chunk[T]] = deque()
        self._bytes = 0
        self._sending = False
        self._lingering = False
        self._flushing = 0
        self._closing_at: float | None = None
        self._closed = False
        self._failing_since: float | None = None
        self._dropped_in_outage = 0
        self._refused_since_flush = False
        """An export was refused for good since the last ``flush`` (it then says False)."""
        self._last_drop_log = -_DROP_LOG_INTERVAL
        self._refusals_logged: set[str] = set()
        self._retries = 0
        self._thread = threading.Thread(
            target=self._run, name=f"ragpulse-export-{self.signal}", daemon=True
        )
        self._thread.start()

    # --- what the wrapping exporters call ----------------------------------------------

    def put(self, items: Sequence[T]) -> bool:
        """Queue ``items`` for delivery; False when any of them was dropped at once."""
        if not items:
            return True
        if self._closed or self._closing_at is not None:
            self._dropped(DROP_SHUTDOWN, items)
            return False
        chunks, too_large = self._split(list(items))
        if too_large:
            self._dropped(DROP_TOO_LARGE, too_large)
        evicted: list[T] = []
        now = time.monotonic()
        with self._cond:
            for items_, size in chunks:
                self._queue.append(_Chunk(items_, size, now))
                self._bytes += size
            # Make room by dropping the oldest exports, never the one being sent.
            first = 1 if self._sending else 0
            while self._bytes > self._max_buffer_bytes and len(self._queue) > first:
                old = self._queue[first]
                del self._queue[first]
                self._bytes -= old.size
                evicted.extend(old.items)
            # A sender lingering for company is woken only by enough of it: waking it for
            # every span that joins (evaluated units come one by one) costs a thread switch each.
            if not self._lingering or self._company_enough():
                self._cond.notify_all()
        if evicted:
            self._dropped(DROP_BUFFER_FULL, evicted)
        return not (too_large or evicted)

    def flush(self, timeout: float) -> bool:
        """Wait until everything queued so far was delivered; False if ``timeout`` passed
        first, or if the backend refused an export for good since the last flush (other
        than by not taking this signal at all: ``refuses_the_signal``)."""
        end = time.monotonic() + max(0.0, timeout)
        with self._cond:
            # A flush sends what lingers at once.
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._queue or self._sending:
                    left = end - time.monotonic()
                    if left <= 0 or self._closed:
                        return False
                    self._cond.wait(left)
                refused, self._refused_since_flush = self._refused_since_flush, False
                return not refused
            finally:
                self._flushing -= 1

    def shutdown(self, timeout: float | None = None) -> bool:
        """Deliver what is queued within the timeout (and the exit deadline), then stop.

        What is still queued then is dropped and counted. Returns True when nothing was.
        """
        wanted = self._shutdown_timeout if timeout is None else min(timeout, self._shutdown_timeout)
        # A handle's shutdown starts the exit deadline with the grace it was given (which
        # may be longer than the default): that grace is then the bound, not the SDK's
        # timeout nor the default one.
        grace = self._deadline.remaining(wanted)
        with self._cond:
            if self._closed:
                return True
            self._closing_at = time.monotonic() + grace
            self._cond.notify_all()
        delivered = self.flush(grace)
        with self._cond:
            self._closed = True
            left = [item for chunk in self._queue for item in chunk.items]
            self._queue.clear()
            self._bytes = 0
            self._cond.notify_all()
        if left:
            self._dropped(DROP_SHUTDOWN, left)
        self._close_exporter(max(0.0, self._deadline.remaining(0.5)))
        return delivered and not left

    @property
    def lingering(self) -> bool:
        """True while the sender waits for more to join what is queued (``linger``)."""
        return self._lingering

    @property
    def queued_bytes(self) -> int:
        """Encoded bytes waiting for delivery (what ``measure`` counts)."""
        return self._bytes

    @property
    def retries(self) -> int:
        """Requests sent again after a failure worth retrying."""
        return self._retries

    # --- internals ---------------------------------------------------------------------

    def _split(self, items: list[T]) -> tuple[list[tuple[list[T], int]], list[T]]:
        """``items`` cut into requests of at most ``max_batch_bytes``; and those that fit none."""
        size = self._measure(items, self._max_batch_bytes)
        if size <= self._max_batch_bytes:
            return [(items, size)], []
        if len(items) == 1:
            _logger.warning(
                "ragpulse: dropped one %s item of %d bytes encoded: over the %d-byte request "
                "limit (export_max_batch_bytes)",
                self.signal,
                size,
                self._max_batch_bytes,
            )
            return [], items
        middle = len(items) // 2
        left, left_dropped = self._split(items[:middle])
        right, right_dropped = self._split(items[middle:])
        return left + right, left_dropped + right_dropped

    def _run(self) -> None:
        attempt = 0
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                if self._coalesce:
                    self._wait_for_company()
                    if self._closed:
                        return
                    if not self._queue:
                        continue
                    self._merge_head()
                chunk = self._queue[0]
                self._sending = True
            token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
            try:
                ok = bool(self._send(chunk.items))
            except Exception:  # the wrapped exporter must not end delivery
                _logger.debug("ragpulse: %s export raised", self.signal, exc_info=True)
                ok = False
            finally:
                detach(token)
            # A request the backend refused for good leaves the queue as a delivered one does.
            refused = None if ok else self._why_refused()
            expired: list[T] = []
            taken = False  # the chunk left the queue here (not cleared by a shutdown)
            with self._cond:
                if ok or refused is not None:
                    if self._queue and self._queue[0] is chunk:
                        self._queue.popleft()
                        self._bytes -= chunk.size
                        taken = True
                    attempt = 0
                else:
                    attempt += 1
                    now = time.monotonic()
                    while self._queue and now - self._queue[0].queued_at > self._max_age:
                        old = self._queue.popleft()
                        self._bytes -= old.size
                        expired.extend(old.items)
                    if self._queue and self._queue[0] is chunk:
                        self._retries += 1
            # Still sending until what this step took off the queue is counted: a flush that
            # returns has seen every callback of what it waited for.
            try:
                if refused is not None:
                    if taken:
                        if not refuses_the_signal(refused):
                            # Noted while still sending: a waiting flush then says False.
                            with self._cond:
                                self._refused_since_flush = True
                        self._refused_dropped(refused, chunk.items)
                elif ok:
                    if taken:
                        self._settled(chunk.items, True)
                    self._recovered()
                else:
                    self._failed()
                    if expired:
                        self._dropped(DROP_EXPIRED, expired)
            finally:
                with self._cond:
                    self._sending = False
                    self._cond.notify_all()
            if ok or refused is not None:
                continue
            delay = random.uniform(0.5, 1.0) * backoff_after(attempt)
            with self._cond:
                if self._closing_at is not None:
                    delay = min(delay, max(0.0, self._closing_at - time.monotonic()))
                if not self._closed:
                    self._cond.wait(delay)

    def _refused_dropped(self, why: str, items: Sequence[T]) -> None:
        """Drop what the backend refused for good: counted, and logged once per reason."""
        if why not in self._refusals_logged:
            self._refusals_logged.add(why)
            _logger.warning(
                "ragpulse: the %s endpoint refuses them (%s): dropping what it refuses, "
                "not retrying it; counted in %s",
                self.signal,
                why,
                self._counted_in,
            )
        self._dropped(DROP_REFUSED, items)

    def _why_refused(self) -> str | None:
        if self._refused is None:
            return None
        try:
            return self._refused()
        except Exception:
            _logger.debug("ragpulse: reading a %s refusal failed", self.signal, exc_info=True)
            return None

    def _wait_for_company(self) -> None:
        """Under the condition: wait (at most ``linger`` from the head's arrival) while the
        queue holds less than half a request, unless shutting down or flushing."""
        if self._linger <= 0:
            return
        deadline = self._queue[0].queued_at + self._linger
        while (
            self._queue
            and not self._closed
            and self._closing_at is None
            and not self._flushing
            and not self._company_enough()
        ):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._lingering = True
            try:
                self._cond.wait(left)
            finally:
                self._lingering = False

    def _company_enough(self) -> bool:
        """Under the condition: the queue holds half a request or ``coalesce`` exports."""
        return self._bytes >= self._max_batch_bytes // 2 or len(self._queue) >= self._coalesce

    def _merge_head(self) -> None:
        """Merge the exports queued behind the head into it while they fit one request.

        Under the condition; never while the head is being sent (it is not, here).
        """
        queue = self._queue
        while len(queue) > 1:
            head, second = queue[0], queue[1]
            if head.size + second.size > self._max_batch_bytes:
                return
            if len(head.items) + len(second.items) > self._coalesce:
                return
            queue.popleft()
            queue[0] = _Chunk([*head.items, *second.items], head.size + second.size, head.queued_at)

    def _settled(self, items: Sequence[T], delivered: bool) -> None:
        if self._on_settled is None or not items:
            return
        try:
            self._on_settled(items, delivered)
        except Exception:
            _logger.debug("ragpulse: %s settle hook failed", self.signal, exc_info=True)

    def _failed(self) -> None:
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            _logger.warning(
                "ragpulse: %s export failed; retrying with backoff, keeping up to %d %s for %gs",
                self.signal,
                self._max_buffer_bytes,
                self._unit,
                self._max_age,
            )

    def _recovered(self) -> None:
        if self._failing_since is None:
            return
        outage = time.monotonic() - self._failing_since
        dropped, self._dropped_in_outage = self._dropped_in_outage, 0
        self._failing_since = None
        _logger.info(
            "ragpulse: %s export delivering again after %.1fs; %d item(s) dropped meanwhile",
            self.signal,
            outage,
            dropped,
        )

    def _dropped(self, reason: str, items: Sequence[T]) -> None:
        # One line per outage (or per minute of drops outside one), never one per batch.
        count = len(items)
        self._settled(items, False)
        self._dropped_in_outage += count
        now = time.monotonic()
        if now - self._last_drop_log >= _DROP_LOG_INTERVAL:
            self._last_drop_log = now
            _logger.warning(
                "ragpulse: dropping %s (%s, %d item(s) so far); counted in %s",
                self.signal,
                reason,
                self._dropped_in_outage,
                self._counted_in,
            )
        if self._on_drop is not None:
            try:
                self._on_drop(self.signal, reason, count)
            except Exception:
                _logger.debug("ragpulse: counting dropped exports failed", exc_info=True)

    def _close_exporter(self, timeout: float) -> None:
        # The wrapped exporter's shutdown aborts its retries, but may block on a connection:
        # it runs on its own daemon thread, and exit does not wait past the deadline for it.
        if self._close is None:
            return
        closer = threading.Thread(
            target=self._close, name=f"ragpulse-export-{self.signal}-close", daemon=True
        )
        try:
            closer.start()
        except RuntimeError:  # at interpreter shutdown no thread may start
            self._close()
            return
        closer.join(timeout)


def _shutdown_of(exporter: Any) -> Callable[[], None]:
    def close() -> None:
        try:
            exporter.shutdown()
        except Exception:
            _logger.debug("ragpulse: exporter shutdown failed", exc_info=True)

    return close


# --- encoded size, bounded from above without encoding ----------------------------------------
# Encoding a batch to learn its size costs as much as the export itself (85 ms for 512 spans
# of ten 100-character attributes). These bounds read the same fields in a few microseconds
# and are never below the protobuf size: every string counts its UTF-8 bytes, every field a
# generous tag-and-length overhead. A batch that looks too big is measured exactly before
# it is split, so the bound only decides when the exact measure is needed.
_PER_ITEM = 160  # ids, times, kind, status, flags and their tags
_PER_VALUE = 12  # tag, length and AnyValue wrapper of one value
_PER_BATCH = 16 * 1024  # resource and scope, once per group, generously


def _value_size(value: object) -> int:
    kind = type(value)
    if kind is int or kind is float or kind is bool:
        return _PER_VALUE + 10  # at most a 10-byte varint or an 8-byte double
    if isinstance(value, str):
        return _PER_VALUE + (
            len(value) if value.isascii() else len(value.encode("utf-8", "replace"))
        )
    if isinstance(value, bytes | bytearray):
        return _PER_VALUE + len(value)
    if isinstance(value, Mapping):
        return _PER_VALUE + sum(_value_size(k) + _value_size(v) for k, v in value.items())
    if isinstance(value, Sequence):
        return _PER_VALUE + sum(_value_size(item) for item in value)
    return _PER_VALUE + 10  # a number or a bool: at most a 10-byte varint or 8-byte double


def _attributes_size(attributes: Mapping[str, object] | None) -> int:
    if not attributes:
        return 0
    # The SDK's BoundedAttributes answers each item through a lock and a method call; the
    # dict behind it holds the same items. Strings and numbers, nearly every attribute, are
    # counted here without a call each (a scored span carries thirty).
    backing = getattr(attributes, "_dict", attributes)
    if not isinstance(backing, Mapping):
        backing = attributes
    size = 2 * _PER_VALUE * len(backing)
    for key, value in backing.items():
        if isinstance(key, str) and key.isascii():
            size += len(key)
        else:
            size += _value_size(key) - _PER_VALUE
        kind = type(value)
        if isinstance(value, str):
            size += len(value) if value.isascii() else len(value.encode("utf-8", "replace"))
        elif kind is int or kind is float or kind is bool:
            size += 10
        else:
            size += _value_size(value) - _PER_VALUE
    return size


def span_size_bound(spans: Sequence[ReadableSpan]) -> int:
    """An upper bound of ``encode_spans(spans).ByteSize()``, without encoding."""
    return _PER_BATCH + sum(span_bound(span) for span in spans)


def span_bound(span: ReadableSpan) -> int:
    """An upper bound of the bytes one span adds to an export request, its resource and
    scope left out (``span_size_bound`` counts those once per batch)."""
    size = _PER_ITEM + _value_size(span.name) + _attributes_size(span.attributes)
    size += _value_size(span.status.description or "")
    if span.context is not None and span.context.trace_state:
        size += _value_size(span.context.trace_state.to_header())
    for event in span.events:
        size += _PER_ITEM + _value_size(event.name) + _attributes_size(event.attributes)
    for link in span.links:
        size += _PER_ITEM + _attributes_size(link.attributes)
        if link.context.trace_state:
            size += _value_size(link.context.trace_state.to_header())
    return size


def log_size_bound(records: Sequence[ReadableLogRecord]) -> int:
    """An upper bound of ``encode_logs(records).ByteSize()``, without encoding."""
    size = _PER_BATCH
    for record in records:
        log = record.log_record
        size += _PER_ITEM + _value_size(log.body) + _attributes_size(log.attributes)
        size += _value_size(log.severity_text or "") + _value_size(log.event_name or "")
    return size


def _measured(bound: Callable[[Sequence[T]], int], exact: Callable[[Sequence[T]], int]) -> Any:
    """A batch's size: ``bound`` when it is small enough not to matter, else ``exact``."""

    def measure(items: Sequence[T], limit: int) -> int:
        estimate = bound(items)
        return estimate if estimate <= limit else exact(items)

    return measure


class DeliveringSpanExporter(SpanExporter):
    """Wraps a ``SpanExporter``: never blocks, retries, splits, counts what it drops."""

    def __init__(self, exporter: SpanExporter, **options: Any) -> None:
        self.exporter = exporter
        """The wrapped exporter (an OTLP span exporter)."""

        def send(spans: Sequence[ReadableSpan]) -> bool:
            return exporter.export(spans) is SpanExportResult.SUCCESS

        self.delivery: Delivery[ReadableSpan] = Delivery(
            "traces",
            send,
            _measured(span_size_bound, lambda spans: encode_spans(spans).ByteSize()),
            close=_shutdown_of(exporter),
            refused=lambda: take_refusal(exporter),
            **options,
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = self.delivery.put(spans)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.delivery.flush(timeout_millis / 1000.0)

    def shutdown(self, timeout_millis: float = 30_000) -> None:
        self.delivery.shutdown(timeout_millis / 1000.0)


class DeliveringLogExporter(LogRecordExporter):
    """Wraps a ``LogRecordExporter`` the same way (the evaluation events)."""

    def __init__(self, exporter: LogRecordExporter, **options: Any) -> None:
        self.exporter = exporter
        """The wrapped exporter (an OTLP log exporter)."""

        def send(records: Sequence[ReadableLogRecord]) -> bool:
            return exporter.export(records) is LogRecordExportResult.SUCCESS

        self.delivery: Delivery[ReadableLogRecord] = Delivery(
            "logs",
            send,
            _measured(log_size_bound, lambda records: encode_logs(records).ByteSize()),
            close=_shutdown_of(exporter),
            refused=lambda: take_refusal(exporter),
            **options,
        )

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        ok = self.delivery.put(batch)
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.delivery.flush(timeout_millis / 1000.0)

    def shutdown(self, timeout_millis: float = 30_000) -> None:
        self.delivery.shutdown(timeout_millis / 1000.0)


class DeliveringMetricExporter(MetricExporter):
    """Wraps a ``MetricExporter``: each snapshot is retried and bounded like spans.

    A snapshot is one request; metric exporters split their own data points
    (``max_export_batch_size``), so a snapshot is not split here.
    """

    def __init__(self, exporter: MetricExporter, **options: Any) -> None:
        super().__init__(
            preferred_temporality=exporter._preferred_temporality,
            preferred_aggregation=exporter._preferred_aggregation,
        )
        self.exporter = exporter
        """The wrapped exporter (an OTLP metric exporter)."""

        def send(snapshots: Sequence[MetricsData]) -> bool:
            return all(
                exporter.export(snapshot) is MetricExportResult.SUCCESS for snapshot in snapshots
            )

        self.delivery: Delivery[MetricsData] = Delivery(
            "metrics",
            send,
            # Snapshots are not split; their size only counts toward the buffer's bound.
            lambda snapshots, limit: sum(encode_metrics(s).ByteSize() for s in snapshots),
            close=_shutdown_of(exporter),
            refused=lambda: take_refusal(exporter),
            **{**options, "max_batch_bytes": 1 << 62},
        )

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        ok = self.delivery.put([metrics_data])
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.delivery.flush(timeout_millis / 1000.0)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.delivery.shutdown(timeout_millis / 1000.0)
