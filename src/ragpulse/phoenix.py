"""Send evaluations to Arize Phoenix's annotations API, so its annotation views show them.

Phoenix keeps the OpenInference ``annotations.N.annotation.*`` span attributes as
attributes; its annotation columns and filters read annotation records, which only
its REST API creates. ``PhoenixAnnotations`` posts one record per metric, keyed by
the evaluated span's id, from a thread of its own with a bounded queue:

    ragpulse.configure(on_evaluation=PhoenixAnnotations("http://localhost:6006"))

As an ``on_evaluation`` hook it receives the evaluation as exported
(``ragpulse.privacy.export_evaluation``): explanations name the failing claims and
their verdicts, and hold no text the content policy keeps in.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragpulse.emit import DEFAULT_THRESHOLDS, MAX_EXPLANATION, label_for
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.privacy import register_secret

_logger = logging.getLogger("ragpulse.phoenix")

ANNOTATION_IDENTIFIER = "ragpulse"


@dataclass(frozen=True)
class AnnotationStats:
    """What the sink has done so far."""

    sent: int
    dropped: int
    failed_batches: int
    queued: int


def _metadata(evaluation: Evaluation) -> dict[str, Any]:
    """The judge, the status, the answerability and the slices: what Phoenix can filter on."""
    metadata: dict[str, Any] = {"judge": evaluation.judge, "status": evaluation.status.value}
    if evaluation.abstained is not None:
        metadata["abstained"] = evaluation.abstained
    if evaluation.answerable is not None:
        metadata["answerable"] = evaluation.answerable
    metadata.update({f"slice.{name}": value for name, value in evaluation.slices.items()})
    return metadata


def annotations_for(
    record: RagRecord, evaluation: Evaluation, thresholds: Mapping[str, float]
) -> list[dict[str, Any]]:
    """Phoenix ``SpanAnnotationData`` items for one evaluation: one per defined metric."""
    context = record.span_context
    if context is None:
        return []
    span_id = format(context.span_id, "016x")
    items: list[dict[str, Any]] = []
    for name, result in evaluation.metrics.items():
        if result.score is None:
            continue
        outcome: dict[str, Any] = {"score": float(result.score)}
        label = label_for(result.score, thresholds.get(name))
        if label is not None:
            outcome["label"] = label
        if result.explanation:
            outcome["explanation"] = result.explanation[:MAX_EXPLANATION]
        items.append(
            {
                "span_id": span_id,
                "name": name,
                "annotator_kind": evaluation.annotator_kind,
                "result": outcome,
                "identifier": ANNOTATION_IDENTIFIER,
                "metadata": _metadata(evaluation),
            }
        )
    return items


class PhoenixAnnotations:
    """An ``on_evaluation`` hook that posts scores to Phoenix's ``/v1/span_annotations``.

    Args:
        endpoint: Phoenix's base URL (``PHOENIX_COLLECTOR_ENDPOINT`` or
            ``http://127.0.0.1:6006`` by default).
        api_key: sent as a bearer token when Phoenix has authentication on
            (``PHOENIX_API_KEY`` by default).
        thresholds: per-metric pass/fail thresholds for the label.
        max_queue_size: annotations waiting to be sent; past it they are dropped and counted.
        batch_size: annotations per request.
        timeout: seconds per request.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        api_key: str | None = None,
        thresholds: Mapping[str, float] | None = None,
        max_queue_size: int = 10_000,
        batch_size: int = 100,
        timeout: float = 5.0,
    ) -> None:
        base = endpoint or os.environ.get("PHOENIX_COLLECTOR_ENDPOINT") or "http://127.0.0.1:6006"
        self._url = base.rstrip("/") + "/v1/span_annotations"
        self._api_key = api_key or os.environ.get("PHOENIX_API_KEY")
        register_secret(self._api_key)
        self._thresholds = dict(thresholds) if thresholds is not None else dict(DEFAULT_THRESHOLDS)
        self._max_queue_size = max_queue_size
        self._batch_size = batch_size
        self._timeout = timeout
        # One condition guards the queue and the counters; the HTTP request is made
        # outside it, so the evaluation worker that calls us never waits on the network.
        self._cond = threading.Condition()
        self._queue: deque[dict[str, Any]] = deque()
        self._in_flight = 0
        self._sent = 0
        self._dropped = 0
        self._failed_batches = 0
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name="ragpulse-phoenix-annotations", daemon=True
        )
        self._thread.start()

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        """Queue the evaluation's annotations; never blocks, never raises."""
        items = annotations_for(record, evaluation, self._thresholds)
        if not items:
            return
        with self._cond:
            if self._closed:
                self._dropped += len(items)
                return
            room = self._max_queue_size - len(self._queue)
            if room < len(items):
                self._dropped += len(items) - max(room, 0)
                items = items[: max(room, 0)]
            self._queue.extend(items)
            self._cond.notify()

    @property
    def stats(self) -> AnnotationStats:
        """Counters: sent, dropped (queue full or closed), failed batches, queued."""
        with self._cond:
            return AnnotationStats(
                self._sent, self._dropped, self._failed_batches, len(self._queue)
            )

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued so far was sent (or failed); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def shutdown(self, timeout: float = 10.0) -> None:
        """Send what is queued within ``timeout``, then stop the thread."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=max(timeout, 0.1))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue and self._closed:
                    return
                batch = [
                    self._queue.popleft() for _ in range(min(self._batch_size, len(self._queue)))
                ]
                self._in_flight = len(batch)
            ok = self._post(batch)
            with self._cond:
                self._in_flight = 0
                if ok:
                    self._sent += len(batch)
                else:
                    self._failed_batches += 1
                self._cond.notify_all()

    def _post(self, batch: list[dict[str, Any]]) -> bool:
        body = json.dumps({"data": batch}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return 200 <= int(response.status) < 300
        except (urllib.error.URLError, OSError, ValueError) as exc:
            _logger.warning("ragpulse: Phoenix annotations not sent (%s)", exc)
            return False
