"""What ``ragpulse serve`` does not take on trust: results it did not compute, units it judged.

A received span may already carry ``ragpulse.eval.*`` results (scores, a status,
claims), written by another evaluator or by anyone who can reach the port. They
are removed before the span goes on, and the span is marked with how many were
(``ragpulse.serve.eval_stripped``): scores that leave ``ragpulse serve`` are the
ones it computed. The capture markers that share the prefix (``ragpulse.eval.unit``,
``ragpulse.eval.force``) say what a span is, not how it scored, and are kept.

The same holds for the logs and metrics serve relays: a received
``gen_ai.evaluation.result`` event, or ``ragpulse.evaluation.score`` metric, is a result
serve did not compute and is dropped (``ragpulse.serve.relayed_results_dropped``), and any
other relayed log record loses its ``ragpulse.eval.*`` results as a span does. A
``ragpulse.feedback`` event is the application's own and goes on, its comment and label
scrubbed of credentials, as every text serve writes is (``privacy.scrub_secrets``).

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

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as PbLogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from ragpulse import semconv
from ragpulse._secrets import scrub_secrets

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


def strip_message_results(pb: PbSpan | PbLogRecord) -> bool:
    """Remove the ``ragpulse.eval.*`` results from a received span's or relayed log record's
    message; True if any were.

    The message gains ``ragpulse.serve.eval_stripped``, the count removed.
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


def _keep_only(repeated: Any, kept: list[Any]) -> None:
    """Leave only ``kept`` in a repeated message field (copied first: the originals go with
    the field's old contents)."""
    copies = [type(item)() for item in kept]
    for copy, item in zip(copies, kept, strict=True):
        copy.CopyFrom(item)
    del repeated[:]
    repeated.extend(copies)


# What a relayed body must contain for vetting to change it; a body without any of these
# goes on as it came, unread.
_RELAYED_MARKS = (b"ragpulse.", b"gen_ai.evaluation.")
_EVENT_NAME_KEY = "event.name"  # where SDKs before LogRecord.event_name put the name
_FEEDBACK_TEXTS = frozenset({semconv.FEEDBACK_COMMENT, semconv.FEEDBACK_LABEL})


def may_need_vetting(body: bytes | None) -> bool:
    """False when a relayed protobuf ``body`` holds nothing ``vet_logs`` or
    ``vet_metrics`` would change (``None``, a decoded JSON body: it may)."""
    return body is None or any(mark in body for mark in _RELAYED_MARKS)


def _event_name(record: PbLogRecord) -> str:
    if record.event_name:
        return str(record.event_name)
    for pair in record.attributes:
        if pair.key == _EVENT_NAME_KEY:
            return str(pair.value.string_value)
    return ""


def _scrub_feedback(record: PbLogRecord) -> bool:
    changed = False
    for pair in record.attributes:
        if pair.key in _FEEDBACK_TEXTS and pair.value.HasField("string_value"):
            scrubbed = scrub_secrets(pair.value.string_value)
            if scrubbed != pair.value.string_value:
                pair.value.string_value = scrubbed
                changed = True
    return changed


def vet_logs(request: ExportLogsServiceRequest, *, results: bool) -> int:
    """Make a relayed logs request fit to leave serve; the records dropped, or -1 when only
    attributes changed (0: nothing did).

    ``results`` (serve evaluates): received evaluation events are dropped and other
    records lose their ``ragpulse.eval.*`` results. Feedback texts are scrubbed of
    credentials whatever ``results`` is.
    """
    dropped = 0
    changed = False
    for resource in request.resource_logs:
        for scope in resource.scope_logs:
            kept = []
            for record in scope.log_records:
                name = _event_name(record)
                if results and name == semconv.GEN_AI_EVALUATION_RESULT_EVENT:
                    dropped += 1
                    continue
                if results and strip_message_results(record):
                    changed = True
                if name == semconv.FEEDBACK_EVENT and _scrub_feedback(record):
                    changed = True
                kept.append(record)
            if len(kept) != len(scope.log_records):
                _keep_only(scope.log_records, kept)
    return dropped if dropped else (-1 if changed else 0)


_RESULT_METRICS = frozenset({semconv.EVALUATION_SCORE_METRIC, semconv.EVALUATION_LABELS_METRIC})


def vet_metrics(request: ExportMetricsServiceRequest, *, results: bool) -> int:
    """Drop received ``ragpulse.evaluation.score`` and ``ragpulse.evaluation.labels`` metrics
    from a relayed metrics request (when ``results``: serve evaluates); the metrics dropped."""
    if not results:
        return 0
    dropped = 0
    for resource in request.resource_metrics:
        for scope in resource.scope_metrics:
            kept = [m for m in scope.metrics if m.name not in _RESULT_METRICS]
            if len(kept) != len(scope.metrics):
                dropped += len(scope.metrics) - len(kept)
                _keep_only(scope.metrics, kept)
    return dropped


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
