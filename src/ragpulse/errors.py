"""ragpulse's error vocabulary: evaluation statuses, error types and decision reasons.

Everything that names *why* an evaluation did not happen, or did not succeed, is
spelled here once: the ``ragpulse.eval.status`` values (``EvalStatus``), the
``ragpulse.eval.error.type`` values a judge or the pipeline produces, which of those
are worth a retry, and the reasons a request was or was not evaluated
(``ragpulse.decision.reason``). Attribute *names* live in ``ragpulse.semconv``.

A judge may also report an error type that is not listed here: an exception's class
name (``KeyError``) when a third-party judge breaks the never-raise contract, as
OpenTelemetry's ``error.type`` recommends.
"""

from __future__ import annotations

import enum

__all__ = [
    "AUTH_ERROR",
    "BAD_REQUEST",
    "BREAKER_OPEN",
    "CONNECTION_ERROR",
    "INVALID_INPUT",
    "INVALID_RESULT",
    "JUDGE_UNAVAILABLE",
    "OVER_BUDGET",
    "QUEUE_FULL",
    "RATE_LIMITED",
    "REASON_EVALUATED",
    "REASON_FORCED",
    "REASON_NOT_SAMPLED",
    "REASON_OVER_BUDGET",
    "REASON_QUEUE_FULL",
    "REASON_THROTTLED",
    "RECORD_LEVEL_ERRORS",
    "REFUSAL",
    "RETRYABLE_ERRORS",
    "SCHEMA_MISMATCH",
    "SERVER_ERROR",
    "SHUTDOWN",
    "THROTTLED",
    "TIMEOUT",
    "TOO_LARGE",
    "TRUNCATED",
    "UNEXPECTED",
    "UNREADABLE_INPUT",
    "EvalStatus",
]


class EvalStatus(str, enum.Enum):
    """Outcome of one evaluation, as written to ``ragpulse.eval.status``."""

    OK = "ok"
    """The judge answered with scores."""
    NO_CLAIMS = "no_claims"
    """The judge answered, but the answer makes no claim: the scores are undefined."""
    ERROR = "error"
    """The evaluation failed; ``ragpulse.eval.error.type`` says why."""
    PENDING = "pending"
    """The span left before its evaluation; the result follows as a carrier span."""
    SKIPPED = "skipped"
    """The evaluation was not attempted (queue full, budget spent, input too large)."""


# --- error types: the judge's server or connection --------------------------------------
TIMEOUT = "timeout"
"""The judge did not answer in time (its client's timeout, or ragpulse's)."""
RATE_LIMITED = "rate_limited"
"""The judge's server said 429; its ``Retry-After`` is honoured."""
SERVER_ERROR = "server_error"
"""The judge's server failed (5xx)."""
CONNECTION_ERROR = "connection_error"
"""The judge's server could not be reached."""
AUTH_ERROR = "auth_error"
"""The judge's server refused the credentials (401/403)."""

# --- error types: about one record, from a judge that is up ----------------------------
BAD_REQUEST = "bad_request"
"""The judge's server refused this request (4xx other than auth and rate limits)."""
REFUSAL = "refusal"
"""The model refused to judge this record, or a content filter stopped it."""
TRUNCATED = "truncated"
"""The model's reply ended before it was complete (``max_tokens``)."""
SCHEMA_MISMATCH = "schema_mismatch"
"""The model's reply does not have the shape that was asked for."""

# --- error types: the pipeline's own refusals and guards --------------------------------
BREAKER_OPEN = "breaker_open"
"""The judge was not called: its circuit breaker is open."""
OVER_BUDGET = "over_budget"
"""The judge was not called: the judge-token budget is spent (status ``skipped``)."""
TOO_LARGE = "too_large"
"""The record's answer, contexts and reference exceed the judge's input bound (``skipped``)."""
NO_EVIDENCE = "no_evidence"
"""An agent's answer with no evidence at all: no retrieved passage, no evidence tool result
(status ``skipped``), counted in the coverage metric."""
QUEUE_FULL = "queue_full"
"""The evaluation queue was full, by count or by bytes (status ``skipped``)."""
THROTTLED = "throttled"
"""Sampled at the configured rate, left out by the rate lowered to what the judge sustains
(status ``skipped``)."""
SHUTDOWN = "shutdown"
"""The unit ended after ragpulse began to shut down, so it was not evaluated (status
``skipped``)."""
INVALID_RESULT = "invalid_result"
"""The judge returned something that is not an ``Evaluation``."""
INVALID_INPUT = "invalid_input"
"""An offline input line could not be read as a record."""
UNREADABLE_INPUT = "unreadable_input"
"""A retrieved item or the answer could not be read from the app's objects (``skipped``):
judging without it would report a hallucination that is not there."""
JUDGE_UNAVAILABLE = "judge_unavailable"
"""The judge cannot run here (a local model's directory, files or labels are unusable);
the explanation names the file and what is wrong."""
UNEXPECTED = "unexpected"
"""A failure that fits no other type (the explanation says what happened)."""
METRIC_FAILED = "metric_failed"
"""One metric of an evaluation failed (a user's metric raised or left [0, 1], its call
failed): that metric's result is an error, the rest of the evaluation stands. Counted in
``ragpulse.evaluator.errors`` with the metric's name."""

RETRYABLE_ERRORS: frozenset[str] = frozenset(
    {TIMEOUT, RATE_LIMITED, SERVER_ERROR, CONNECTION_ERROR}
)
"""Error types worth another attempt after a backoff: the judge may answer next time."""

RECORD_LEVEL_ERRORS: frozenset[str] = frozenset({REFUSAL, TRUNCATED, SCHEMA_MISMATCH, BAD_REQUEST})
"""Error types about one record from a judge that is up and answering: not retried, and
they do not open the circuit breaker. Any other error counts as the judge being down."""

# --- decision reasons (ragpulse.decision.reason) ------------------------------------------
REASON_EVALUATED = "evaluated"
"""Sampled by rate and admitted by the budget."""
REASON_FORCED = "forced"
"""Forced by a rule (a route, a name, the force attribute, negative feedback)."""
REASON_NOT_SAMPLED = "not_sampled"
"""Left out by the sample rate."""
REASON_OVER_BUDGET = "over_budget"
"""Sampled, but the evaluations-per-minute budget was spent."""
REASON_QUEUE_FULL = QUEUE_FULL
"""Sampled, but the evaluation queue refused it."""
REASON_THROTTLED = THROTTLED
"""Sampled at the configured rate, but left out by the rate lowered to what the judge sustains."""
