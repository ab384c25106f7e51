"""Send evaluations to Arize Phoenix's annotations API, so its annotation views show them.

Phoenix keeps the OpenInference ``annotations.N.annotation.*`` span attributes as
attributes; its annotation columns and filters read annotation records, which only
its REST API creates. ``PhoenixAnnotations`` posts one record per metric, keyed by
the evaluated span's id, through the outputs' ``Delivery`` (its own bounded queue and
sending thread, as each exporter has):

    ragpulse.configure(on_evaluation=PhoenixAnnotations("http://localhost:6006"))

A batch Phoenix could not take (unreachable, a timeout, 408, 429 or 5xx) is retried
with the exporters' backoff until it is ``retry_seconds`` old, so a Phoenix that is slow
to start or restarting costs no annotations; one it refuses (another 4xx,
``ragpulse.outputs.refusal.rest_refusal``) is given up at once. ``shutdown`` keeps to its
timeout and counts what it could not send as dropped. Its defaults are ``Settings``'
(``phoenix_*``, ``export_buffer_seconds``).

As an ``on_evaluation`` hook it receives the evaluation as exported
(``ragpulse.signals.privacy.export_evaluation``): explanations name the failing claims and
their verdicts, and hold no text the content policy keeps in.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse._secrets import register_secret
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.judges._labels import kind_named, label_thresholds
from ragpulse.outputs.delivery import (
    DROP_EXPIRED,
    DROP_REFUSED,
    Delivery,
)
from ragpulse.outputs.refusal import Refusals, rest_refusal
from ragpulse.settings import Settings
from ragpulse.signals.emit import MAX_EXPLANATION, label_for

_logger = logging.getLogger("ragpulse.phoenix")

ANNOTATION_IDENTIFIER = "ragpulse"


@dataclass(frozen=True)
class AnnotationStats:
    """What the sink has done so far."""

    sent: int
    """Annotations Phoenix accepted."""
    dropped: int
    """Annotations never sent: the queue was full, the sink closed, or shutdown's timeout passed."""
    failed_batches: int
    """Batches given up: refused by Phoenix, or still failing ``retry_seconds`` after they
    were queued (the batches that expired together count as one)."""
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
        thresholds: per-metric pass/fail thresholds for the label; by default those the
            judge that made each evaluation declares (none where it declines a label).
        max_queue_size: annotations waiting to be sent; past it the oldest are dropped and
            counted.
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
        max_queue_size: int = Settings.phoenix_max_queue_size,
        batch_size: int = Settings.phoenix_batch_size,
        timeout: float = Settings.phoenix_timeout,
        retry_seconds: float = Settings.export_buffer_seconds,
    ) -> None:
        base = endpoint or os.environ.get("PHOENIX_COLLECTOR_ENDPOINT") or "http://127.0.0.1:6006"
        self._url = base.rstrip("/") + "/v1/span_annotations"
        self._api_key = api_key or os.environ.get("PHOENIX_API_KEY")
        register_secret(self._api_key)
        # None: each evaluation's labels follow the judge that made it (its declaration).
        self._thresholds = dict(thresholds) if thresholds is not None else None
        self._timeout = timeout
        self._refusals = Refusals()
        # Guards the counters: drops are counted on the caller's thread (a closed hook) and
        # on the sending thread.
        self._lock = threading.Lock()
        self._sent = 0
        self._dropped = 0
        self._failed_batches = 0
        self._closing_at: float | None = None
        batch = max(1, batch_size)
        self.delivery: Delivery[dict[str, Any]] = Delivery(
            "annotations",
            self._post,
            _count,
            # Counted in annotations, not bytes: a request holds at most ``batch_size``, the
            # queue ``max_queue_size``; what queues up behind a request joins the next one.
            max_batch_bytes=batch,
            max_buffer_bytes=max(max_queue_size, batch),
            max_buffer_age=max(0.0, retry_seconds),
            shutdown_timeout=math.inf,
            on_drop=self._count_drop,
            coalesce=batch,
            on_settled=self._settled,
            refused=self._refusals.take,
            unit="annotations",
            counted_in="PhoenixAnnotations.stats",
        )

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        """Queue the evaluation's annotations; never blocks, never raises."""
        thresholds = self._thresholds
        if thresholds is None:
            thresholds = label_thresholds(kind_named(evaluation.judge))
        items = annotations_for(record, evaluation, thresholds)
        if items:
            self.delivery.put(items)

    @property
    def stats(self) -> AnnotationStats:
        """Counters: sent, dropped, failed batches, queued (the batch being sent included)."""
        with self._lock:
            return AnnotationStats(
                self._sent,
                self._dropped,
                self._failed_batches,
                self.delivery.queued_bytes,
                self.delivery.retries,
            )

    def flush(self, timeout: float = Settings.phoenix_flush_timeout) -> bool:
        """Wait until everything queued so far was sent or given up; False on timeout."""
        return self.delivery.flush(timeout)

    def shutdown(self, timeout: float = Settings.phoenix_flush_timeout) -> None:
        """Send what is queued within ``timeout``, retries included; count the rest as dropped.

        Takes at most ``timeout`` seconds: a request still under way then is left to its
        own ``timeout`` on the sending daemon thread.
        """
        # Request timeouts end at this deadline from now on (backoff waits end there too).
        self._closing_at = time.monotonic() + max(0.0, timeout)
        self.delivery.shutdown(timeout)

    # --- delivery's callbacks ----------------------------------------------------------------

    def _count_drop(self, signal: str, reason: str, count: int) -> None:
        with self._lock:
            if reason in (DROP_REFUSED, DROP_EXPIRED):
                self._failed_batches += 1
            else:  # the queue was full, the hook closed, or shutdown's timeout passed
                self._dropped += count

    def _settled(self, items: Sequence[Any], delivered: bool) -> None:
        if delivered:
            with self._lock:
                self._sent += len(items)

    def _request_timeout(self) -> float:
        """The per-request timeout, cut to the shutdown deadline."""
        closing_at = self._closing_at
        if closing_at is None:
            return self._timeout
        return max(0.1, min(self._timeout, closing_at - time.monotonic()))

    def _post(self, batch: Sequence[dict[str, Any]]) -> bool:
        """One request (on the sending thread); its refusal, if any, noted for the delivery."""
        self._refusals.note(None)
        body = json.dumps({"data": list(batch)}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._request_timeout()) as response:
                status = int(response.status)
                reason = str(response.reason or "")
        except urllib.error.HTTPError as exc:
            status, reason = exc.code, str(exc.reason or "")
            exc.close()
        except (urllib.error.URLError, OSError) as exc:  # unreachable, a timeout: retried
            _logger.debug("ragpulse: Phoenix annotations not sent (%s)", exc)
            return False
        except ValueError as exc:  # an endpoint that is no URL: no retry will help
            self._refusals.note(f"not a URL: {exc}")
            return False
        if 200 <= status < 300:
            return True
        self._refusals.note(rest_refusal(status, reason))
        return False


def _count(items: Sequence[Any], limit: int) -> int:
    return len(items)
