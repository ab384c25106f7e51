"""Send evaluations to Arize Phoenix's annotations API, so its annotation views show them.

Phoenix keeps the OpenInference ``annotations.N.annotation.*`` span attributes as
attributes; its annotation columns and filters read annotation records, which only
its REST API creates. ``PhoenixAnnotations`` posts one record per metric, keyed by
the evaluated span's id, from a thread of its own with a bounded queue:

    ragpulse.configure(on_evaluation=PhoenixAnnotations("http://localhost:6006"))

A batch Phoenix could not take (unreachable, a timeout, 408, 429 or 5xx) is retried
with the exporters' backoff for up to ``retry_seconds``, so a Phoenix that is slow to
start or restarting costs no annotations; one it refuses (another 4xx) is given up at
once. ``shutdown`` keeps to its timeout and counts what it could not send as dropped.

As an ``on_evaluation`` hook it receives the evaluation as exported
(``ragpulse.signals.privacy.export_evaluation``): explanations name the failing claims and
their verdicts, and hold no text the content policy keeps in.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragpulse._secrets import register_secret
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.outputs.delivery import backoff_after
from ragpulse.settings import Settings
from ragpulse.signals.emit import DEFAULT_THRESHOLDS, MAX_EXPLANATION, label_for

_logger = logging.getLogger("ragpulse.phoenix")

ANNOTATION_IDENTIFIER = "ragpulse"

DEFAULT_REQUEST_TIMEOUT = 5.0
"""Seconds one POST to Phoenix may take."""
DEFAULT_RETRY_SECONDS = Settings.export_buffer_seconds
"""Seconds a batch is retried before it is given up (as the exporters keep theirs)."""
DEFAULT_FLUSH_TIMEOUT = 10.0
"""Seconds ``flush`` and ``shutdown`` wait when given no timeout."""

# Phoenix may take these later; any other refusal is final for that batch.
_RETRIED_STATUSES = frozenset({408, 429})


class _Outcome(enum.Enum):
    SENT = "sent"
    RETRY = "retry"  # unreachable, a timeout, 408, 429 or 5xx: Phoenix may take it later
    REFUSED = "refused"  # another refusal: sending it again would be refused again


@dataclass(frozen=True)
class AnnotationStats:
    """What the sink has done so far."""

    sent: int
    """Annotations Phoenix accepted."""
    dropped: int
    """Annotations never sent: the queue was full, the sink closed, or shutdown's timeout passed."""
    failed_batches: int
    """Batches given up: refused by Phoenix, or still failing after ``retry_seconds``."""
    queued: int
    """Annotations waiting to be sent."""
    retries: int = 0
    """Requests sent again after a failure that Phoenix may recover from."""


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
        retry_seconds: seconds a batch Phoenix could not take is retried, with
            exponential backoff, before it is given up and counted in ``failed_batches``.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        api_key: str | None = None,
        thresholds: Mapping[str, float] | None = None,
        max_queue_size: int = 10_000,
        batch_size: int = 100,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
    ) -> None:
        base = endpoint or os.environ.get("PHOENIX_COLLECTOR_ENDPOINT") or "http://127.0.0.1:6006"
        self._url = base.rstrip("/") + "/v1/span_annotations"
        self._api_key = api_key or os.environ.get("PHOENIX_API_KEY")
        register_secret(self._api_key)
        self._thresholds = dict(thresholds) if thresholds is not None else dict(DEFAULT_THRESHOLDS)
        self._max_queue_size = max_queue_size
        self._batch_size = batch_size
        self._timeout = timeout
        self._retry_seconds = max(0.0, retry_seconds)
        # One condition guards the queue, the batch being sent and the counters; the HTTP
        # request is made outside it, so the evaluation worker that calls us never waits
        # on the network.
        self._cond = threading.Condition()
        self._queue: deque[dict[str, Any]] = deque()
        # The batch taken off the queue and not yet sent or given up (kept across retries).
        self._batch: list[dict[str, Any]] = []
        self._sent = 0
        self._dropped = 0
        self._failed_batches = 0
        self._retries = 0
        self._closing_at: float | None = None
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
            if self._closed or self._closing_at is not None:
                self._dropped += len(items)
                return
            room = self._max_queue_size - len(self._queue)
            if room < len(items):
                self._dropped += len(items) - max(room, 0)
                items = items[: max(room, 0)]
            self._queue.extend(items)
            self._cond.notify_all()

    @property
    def stats(self) -> AnnotationStats:
        """Counters: sent, dropped, failed batches, queued (the batch being sent included)."""
        with self._cond:
            return AnnotationStats(
                self._sent,
                self._dropped,
                self._failed_batches,
                len(self._queue) + len(self._batch),
                self._retries,
            )

    def flush(self, timeout: float = DEFAULT_FLUSH_TIMEOUT) -> bool:
        """Wait until everything queued so far was sent or given up; False on timeout."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._queue or self._batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return False
                self._cond.wait(remaining)
        return True

    def shutdown(self, timeout: float = DEFAULT_FLUSH_TIMEOUT) -> None:
        """Send what is queued within ``timeout``, retries included; count the rest as dropped.

        Takes at most ``timeout`` seconds: a request still under way then is left to its
        own ``timeout`` on the sink's daemon thread.
        """
        grace = max(0.0, timeout)
        with self._cond:
            if self._closed:
                return
            # Backoff waits and request timeouts end at this deadline from now on.
            closing_at = self._closing_at = time.monotonic() + grace
            self._cond.notify_all()
        self.flush(grace)
        with self._cond:
            self._closed = True
            self._dropped += len(self._queue) + len(self._batch)
            self._queue.clear()
            self._batch = []
            self._cond.notify_all()
        self._thread.join(timeout=max(0.0, closing_at - time.monotonic()))

    def _run(self) -> None:
        attempt = 0
        failing_since = 0.0
        while True:
            with self._cond:
                while not self._queue and not self._batch and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                if not self._batch:
                    count = min(self._batch_size, len(self._queue))
                    self._batch = [self._queue.popleft() for _ in range(count)]
                batch = self._batch
                timeout = self._request_timeout()
            outcome, reason = self._post(batch, timeout)
            now = time.monotonic()
            if outcome is _Outcome.RETRY and attempt == 0:
                failing_since = now
                _logger.warning(
                    "ragpulse: Phoenix annotations not sent (%s); retrying with backoff for "
                    "up to %gs",
                    reason,
                    self._retry_seconds,
                )
            if outcome is _Outcome.RETRY and now - failing_since < self._retry_seconds:
                attempt += 1
                with self._cond:
                    if self._batch is not batch:  # shutdown counted it as dropped meanwhile
                        return
                    self._retries += 1
                    self._wait_before_retry(now + random.uniform(0.5, 1.0) * backoff_after(attempt))
                continue
            if outcome is not _Outcome.SENT:
                _logger.warning(
                    "ragpulse: gave up %d Phoenix annotation(s) after %d attempt(s) (%s)",
                    len(batch),
                    attempt + 1,
                    reason,
                )
            elif attempt:
                _logger.info("ragpulse: Phoenix annotations sent after %d attempt(s)", attempt + 1)
            attempt = 0
            with self._cond:
                if self._batch is not batch:
                    return
                if outcome is _Outcome.SENT:
                    self._sent += len(batch)
                else:
                    self._failed_batches += 1
                self._batch = []
                self._cond.notify_all()

    def _wait_before_retry(self, wake_at: float) -> None:
        """Back off until ``wake_at``, the shutdown deadline, or the close (called under the lock).

        Past the shutdown deadline nothing is sent again: the thread waits for the close.
        """
        while not self._closed:
            until = wake_at if self._closing_at is None else min(wake_at, self._closing_at)
            left = until - time.monotonic()
            if left <= 0:
                if self._closing_at is None or time.monotonic() < self._closing_at:
                    return
                self._cond.wait()
            else:
                self._cond.wait(left)

    def _request_timeout(self) -> float:
        """The per-request timeout, cut to the shutdown deadline (called under the lock)."""
        if self._closing_at is None:
            return self._timeout
        return max(0.1, min(self._timeout, self._closing_at - time.monotonic()))

    def _post(self, batch: list[dict[str, Any]], timeout: float) -> tuple[_Outcome, str]:
        """One request; what came of it and, when it was not sent, why."""
        body = json.dumps({"data": batch}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
            exc.close()
        except (urllib.error.URLError, OSError) as exc:
            return _Outcome.RETRY, str(exc)
        except ValueError as exc:  # an endpoint that is no URL: no retry will help
            return _Outcome.REFUSED, str(exc)
        if 200 <= status < 300:
            return _Outcome.SENT, ""
        if status in _RETRIED_STATUSES or status >= 500:
            return _Outcome.RETRY, f"HTTP {status}"
        return _Outcome.REFUSED, f"HTTP {status}"
