"""What ``ragpulse serve`` does not take on trust: results it did not compute, units it judged.

A received span may already carry ``ragpulse.eval.*`` results (scores, a status,
claims), written by another evaluator or by anyone who can reach the port. They
are removed before the span goes on, and the span is marked with how many were
(``ragpulse.serve.eval_stripped``): scores that leave ``ragpulse serve`` are the
ones it computed. The capture markers that share the prefix (``ragpulse.eval.unit``,
``ragpulse.eval.force``) say what a span is, not how it scored, and are kept.

A sender that retries after a timeout, or a Collector that replays its queue,
sends a unit again. ``SeenUnits`` remembers the units taken within a window (a
bounded number of them): a copy received again is not forwarded or judged a
second time.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from ragpulse import semconv

_CAPTURE_MARKERS = frozenset({semconv.RAG_UNIT, semconv.RAG_FORCE_EVALUATION})


def _is_result(key: str) -> bool:
    return key.startswith(semconv.EVAL_PREFIX) and key not in _CAPTURE_MARKERS


def strip_results(pb: PbSpan, attributes: dict[str, Any]) -> None:
    """Remove the ``ragpulse.eval.*`` results from a received span and its decoded attributes.

    ``pb`` is the message the span is forwarded from and ``attributes`` what was
    decoded from it; both lose the results and gain the count removed.
    """
    removed = [key for key in attributes if _is_result(key)]
    if not removed:
        return
    for key in removed:
        del attributes[key]
    kept = [pair for pair in pb.attributes if not _is_result(pair.key)]
    del pb.attributes[:]
    pb.attributes.extend(kept)
    mark = KeyValue(key=semconv.SERVE_EVAL_STRIPPED)
    mark.value.int_value = len(removed)
    pb.attributes.append(mark)
    attributes[semconv.SERVE_EVAL_STRIPPED] = len(removed)


def strip_message_results(pb: PbSpan) -> bool:
    """Remove the ``ragpulse.eval.*`` results from a received span's message; True if any were.

    The span gains ``ragpulse.serve.eval_stripped``, the count removed.
    """
    attributes = pb.attributes
    removed = sum(1 for pair in attributes if _is_result(pair.key))
    if not removed:
        return False
    kept = [pair for pair in attributes if not _is_result(pair.key)]
    del attributes[:]
    attributes.extend(kept)
    mark = KeyValue(key=semconv.SERVE_EVAL_STRIPPED)
    mark.value.int_value = removed
    attributes.append(mark)
    return True


class SeenUnits:
    """Units taken within ``window`` seconds, at most ``max_units`` of them.

    Not thread-safe: the pipeline's worker thread is its only caller.
    """

    def __init__(
        self, window: float, max_units: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if window < 0 or max_units < 1:
            raise ValueError("the dedupe window and bound must be positive")
        self._window = window
        self._max = max_units
        self._clock = clock
        # Insertion order is age: the first entry is always the next to expire.
        self._seen: OrderedDict[tuple[int, int], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def first_time(self, trace_id: int, span_id: int) -> bool:
        """True the first time a unit is seen within the window (it is remembered then)."""
        now = self._clock()
        seen = self._seen
        while seen:
            oldest = next(iter(seen.values()))
            if now - oldest < self._window and len(seen) < self._max:
                break
            seen.popitem(last=False)
        key = (trace_id, span_id)
        if key in seen:
            return False
        seen[key] = now
        return True
