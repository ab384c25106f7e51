"""``ragpulse.feedback()``: a person's verdict on a request, as a log event linked to its span.

The event (``ragpulse.feedback``) carries the trace id and span id of the request it
judges on the log record itself, so any OTLP pipeline keeps the link, and it leaves
through the logger provider ``configure()`` set up, beside the judge's own
``gen_ai.evaluation.result`` events. ``ragpulse calibrate`` and ``ragpulse report`` read
it back and set it beside the judge's verdict.

Everything a caller can get wrong is checked before anything is written, and said in
one ``ValueError``: the request is the caller's to fix, so no half-written event leaves.
The comment is a text like any other: it passes the content policy (scrubbed of
credentials, redacted, capped; only its length, and keyed hash, without content).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from typing import Any

from opentelemetry import _logs, trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, TraceFlags

from ragpulse import semconv
from ragpulse._guard import Guard
from ragpulse._version import __version__
from ragpulse.capture._content import ContentPolicy, get_policy
from ragpulse.metrics import METRICS
from ragpulse.outputs import exit as _exit
from ragpulse.signals.privacy import export_text

__all__ = ["MAX_LABEL_CHARS", "feedback", "feedback_attributes", "target_context", "write_feedback"]

MAX_LABEL_CHARS = 64
"""Longest ``label=``: a label is a category (``thumbs_down``, ``wrong_source``), exported as
given; words belong in ``comment=``, which the content policy covers."""

_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
_SPAN_ID = re.compile(r"[0-9a-fA-F]{16}")
_guard = Guard("ragpulse.feedback")


def _fail(message: str) -> ValueError:
    return ValueError(f"ragpulse.feedback(): {message}")


def _hex_id(text: str, pattern: re.Pattern[str], what: str) -> int:
    if not pattern.fullmatch(text) or int(text, 16) == 0:
        digits = 32 if pattern is _TRACE_ID else 16
        raise _fail(f"{what} must be {digits} hex digits, not all zero; got {text!r:.60}")
    return int(text, 16)


def target_context(target: object, trace_id: str | None = None) -> SpanContext:
    """The span context ``feedback()`` links its event to; ``ValueError`` for a bad target.

    ``target`` is a ``Span`` (live or ended: a ``ReadableSpan``), a ``SpanContext``, a
    16-hex-digit span id (with the
    32-hex-digit ``trace_id=``), or a 32-hex-digit trace id alone (the span id is then
    left unset, and readers take the trace's one evaluated request).
    """
    if isinstance(target, Span | ReadableSpan | SpanContext):
        if trace_id is not None:
            raise _fail("trace_id= goes with a span id string, not with a span or span context")
        context = target if isinstance(target, SpanContext) else target.get_span_context()
        if context is None or not context.is_valid:
            raise _fail("the span has no valid trace and span id (was it ever recorded?)")
        return context
    if not isinstance(target, str):
        raise _fail(
            "the first argument is a Span, a SpanContext, a hex span id (with trace_id=) "
            f"or a hex trace id, not {type(target).__name__}"
        )
    text = target.strip()
    if trace_id is None:
        if _SPAN_ID.fullmatch(text):
            raise _fail("a span id needs its trace: pass trace_id= (32 hex digits)")
        span_id, trace = 0, _hex_id(text, _TRACE_ID, "a trace id")
    else:
        if not isinstance(trace_id, str):
            raise _fail(f"trace_id= must be a hex string, not {type(trace_id).__name__}")
        span_id = _hex_id(text, _SPAN_ID, "a span id")
        trace = _hex_id(trace_id.strip(), _TRACE_ID, "trace_id=")
    return SpanContext(trace, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _known_metrics() -> Collection[str]:
    handle = _exit.live()
    settings = getattr(handle, "settings", None)
    configured = getattr(settings, "metrics", ())
    return {*METRICS, *configured}


def feedback_attributes(
    *,
    score: object = None,
    label: object = None,
    comment: object = None,
    metric: object = None,
    known_metrics: Collection[str] = METRICS,
    policy: ContentPolicy | None = None,
) -> dict[str, Any]:
    """The event's attributes, checked; ``ValueError`` naming the first bad argument."""
    if score is None and label is None:
        raise _fail("give a score= in [0, 1] or a label=")
    attributes: dict[str, Any] = {}
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise _fail(f"score= must be a number in [0, 1], not {type(score).__name__}")
        if not math.isfinite(score) or not 0.0 <= score <= 1.0:
            raise _fail(f"score= must be in [0, 1]; got {score!r}")
        attributes[semconv.FEEDBACK_SCORE] = float(score)
    if label is not None:
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL_CHARS:
            raise _fail(
                f"label= must be a non-empty string of at most {MAX_LABEL_CHARS} characters "
                "(put words in comment=)"
            )
        attributes[semconv.FEEDBACK_LABEL] = label.strip()
    if metric is not None:
        if not isinstance(metric, str) or metric not in known_metrics:
            raise _fail(f"unknown metric {metric!r}; known: {', '.join(sorted(known_metrics))}")
        attributes[semconv.FEEDBACK_METRIC] = metric
    if comment is not None:
        if not isinstance(comment, str):
            raise _fail(f"comment= must be a string, not {type(comment).__name__}")
        policy = policy or get_policy()
        if policy.capture_content:
            attributes[semconv.FEEDBACK_COMMENT] = export_text(comment, policy)
        else:  # its length, and its keyed hash when a hash_key is set: never the words
            exported: dict[str, Any] = {}
            policy.put_text(exported, (semconv.FEEDBACK_COMMENT,), comment)
            attributes.update(exported)
    return attributes


def write_feedback(
    provider: _logs.LoggerProvider, target: SpanContext, attributes: Mapping[str, Any]
) -> None:
    """Emit one ``ragpulse.feedback`` event linked to ``target`` through ``provider``."""
    context = trace.set_span_in_context(NonRecordingSpan(target))
    record = LogRecord(
        context=context,
        severity_number=SeverityNumber.INFO,
        event_name=semconv.FEEDBACK_EVENT,
        attributes=dict(attributes),
    )
    with _guard("ragpulse: could not emit a feedback event"):
        provider.get_logger("ragpulse", __version__).emit(record)


def feedback(
    target: Span | ReadableSpan | SpanContext | str,
    *,
    trace_id: str | None = None,
    score: float | None = None,
    label: str | None = None,
    comment: str | None = None,
    metric: str | None = None,
) -> None:
    """Record a person's verdict on an evaluated request, linked to its span.

    ``target`` is the request's span (``Span``, ``ReadableSpan`` or ``SpanContext``), its
    span id as 16 hex digits with ``trace_id=`` (32 hex digits), or the trace id alone.
    ``score`` is in [0, 1], 1 meaning good (``ragpulse calibrate`` counts 0.5 and above as
    a pass); ``label`` is a short category (``"pass"``/``"fail"`` count as verdicts without
    a score); ``metric`` names the metric judged (default: the answer as a whole);
    ``comment`` is free text, exported under the content policy. Raises ``ValueError``
    for bad arguments or before ``ragpulse.configure()``; never anything else.
    """
    context = target_context(target, trace_id)
    attributes = feedback_attributes(
        score=score, label=label, comment=comment, metric=metric, known_metrics=_known_metrics()
    )
    provider = getattr(_exit.live(), "logger_provider", None)
    if provider is None:
        raise _fail(
            "ragpulse is not configured (or was shut down): call ragpulse.configure() first"
        )
    write_feedback(provider, context, attributes)
