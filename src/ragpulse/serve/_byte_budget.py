"""``ByteBudget``: the bound on what ``ragpulse serve`` holds between receiving and exporting.

Every accepted request adds what holding it costs in memory (``held_bytes``: the
decoded message and the Python objects of its spans, not its size on the wire,
which is several times smaller); each span gives its share back when it is
exported (or handed to the exporter for the last time at shutdown). A request
that would pass the bound is refused with a retryable answer, so the sender's
exporter or Collector keeps it and retries: memory stays flat under overload
and no span is dropped on the floor.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from opentelemetry.sdk.trace import ReadableSpan

HELD_SPAN_BYTES = 2048
"""Memory one converted span holds besides its texts: the SDK span and its context,
attribute dict, the references the assembler, processor, sink and this budget keep.
Measured with ``bench/serve_memory.py`` (resident memory per span of short spans)."""
HELD_PER_WIRE_BYTE = 2
"""Each received byte is held twice: in the decoded protobuf message (forwarded as it
came) and, for texts, in the Python string decoded from it."""


def held_bytes(wire: int, spans: int) -> int:
    """Memory ``spans`` converted spans of a ``wire``-byte request hold until exported."""
    return HELD_PER_WIRE_BYTE * wire + HELD_SPAN_BYTES * spans


class ByteBudget:
    """Bytes held by the service, within ``max_bytes``.

    Thread-safe: requests are admitted on the receiving thread and released on
    the exporting thread.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.max_bytes = max_bytes
        self._used = 0
        self._shares: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """Bytes held now."""
        return self._used

    @property
    def spans(self) -> int:
        """Spans held now."""
        return len(self._shares)

    def reserve(self, size: int) -> bool:
        """Take ``size`` bytes if they fit; False takes nothing (the request is refused).

        An empty service takes any one request, however large, so a request bigger
        than the bound is never refused forever.
        """
        size = max(size, 1)
        with self._lock:
            if self._used and self._used + size > self.max_bytes:
                return False
            self._used += size
        return True

    def assign(self, spans: Sequence[ReadableSpan], size: int, reserved: int | None = None) -> None:
        """Spread ``size`` over ``spans``, each to be given back on export.

        ``reserved``: what ``reserve`` took for them, when that was an estimate; the
        difference is taken or given back now.
        """
        size = max(size, 1)
        reserved = size if reserved is None else max(reserved, 1)
        if not spans:
            self.give_back(reserved)
            return
        share, remainder = divmod(size, len(spans))
        with self._lock:
            self._used += size - reserved
            shares = self._shares
            for index, span in enumerate(spans):
                context = span.context
                key = (context.trace_id, context.span_id) if context is not None else (0, id(span))
                # A span received twice (a sender retried after a timeout) keeps one
                # entry holding both shares, released with its one export.
                shares[key] = shares.get(key, 0) + share + (remainder if index == 0 else 0)

    def hold(self, size: int) -> None:
        """Take ``size`` bytes whether they fit or not (what serve made itself: it cannot be
        refused to a sender), to be given back like the rest."""
        with self._lock:
            self._used += size

    def give_back(self, size: int) -> None:
        """Return reserved bytes that no span took."""
        with self._lock:
            self._used -= size

    def release(self, spans: Iterable[ReadableSpan]) -> None:
        """Give back the bytes of exported spans (spans never admitted are ignored)."""
        freed = 0
        with self._lock:
            shares = self._shares
            for span in spans:
                context = span.context
                if context is None:
                    continue
                freed += shares.pop((context.trace_id, context.span_id), 0)
            self._used -= freed
