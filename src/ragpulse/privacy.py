"""What of an evaluation may leave the process: the content policy and secret scrubbing.

The judge sees the raw answer, reference and contexts. Everything ragpulse sends out
about an evaluation (span attributes, the claims JSON, explanations, log events,
Phoenix annotations, ``ragpulse eval`` output) is made from ``export_evaluation``'s
result, which has passed the process's ``ContentPolicy``:

- content on, no hook: texts as they are, capped;
- a ``redact`` hook: every text (claims, evidence, explanations, error messages)
  passes through it;
- content off: no text at all, only lengths and offsets (a claim reads
  ``[withheld: 42 chars]`` and keeps its ``answer_start``/``answer_end``).

Whatever the policy, anything shaped like a credential (the configured API keys, a
bearer token, an ``sk-…`` key, ``api_key=…``) is replaced before it leaves, in
explanations and in ragpulse's own log lines.

Explanations are rebuilt here from the verdicts, so they name the failing claims and
their verdicts in a form the policy allows: ``#3 NOT_FOUND "…"`` with content,
``#3 NOT_FOUND (answer chars 40-78)`` without.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from ragpulse.capture._content import ContentPolicy, get_policy
from ragpulse.evaluation.types import (
    CORRECTNESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
    Verdict,
)

__all__ = [
    "REDACTED_SECRET",
    "export_evaluation",
    "export_text",
    "register_secret",
    "scrub_secrets",
    "withheld",
]

REDACTED_SECRET = "[redacted secret]"
"""What a credential found in a message is replaced with."""

_WITHHELD = "[withheld: {n} chars]"
_WITHHELD_RE = re.compile(r"\[withheld: \d+ chars\]")
_FREE_WITHHELD_RE = re.compile(r"[a-z_]+ \(message \[withheld: \d+ chars\]\)")

# Environment variables whose values are credentials ragpulse or its judges may use.
SECRET_ENVIRONMENT_VARIABLES = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "PHOENIX_API_KEY",
    "RAGPULSE_JUDGE_API_KEY",
)
# Shorter values are not scrubbed as literals: replacing every "test" in a message would
# garble it and protect nothing a pattern below does not already catch.
_MIN_SECRET_LENGTH = 8

_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization headers and bearer tokens, whatever follows the scheme.
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=*-]{6,}"), r"\1 " + REDACTED_SECRET),
    # OpenAI-style keys, including the masked form of its 401 message (sk-abc1***wxyz).
    (re.compile(r"\bsk-[A-Za-z0-9_*-]{6,}"), REDACTED_SECRET),
    # key=value / "key": "value" for the usual credential names.
    (
        re.compile(
            r"(?i)\b((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|"
            r"authorization|x-api-key)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&)}\]]{4,}"
        ),
        r"\1" + REDACTED_SECRET,
    ),
)

_registered: set[str] = set()
_registered_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a credential (an API key given in code) so it is scrubbed from messages."""
    if value and len(value) >= _MIN_SECRET_LENGTH:
        with _registered_lock:
            _registered.add(value)


def _known_secrets(extra: Iterable[str]) -> list[str]:
    with _registered_lock:
        found = set(_registered)
    for name in SECRET_ENVIRONMENT_VARIABLES:
        value = os.environ.get(name)
        if value:
            found.add(value)
    found.update(extra)
    # Longest first, so a key that contains another is replaced whole.
    return sorted((s for s in found if len(s) >= _MIN_SECRET_LENGTH), key=len, reverse=True)


def scrub_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials replaced by ``[redacted secret]``.

    Replaced: the ``secrets`` given, keys registered with ``register_secret``, the
    values of ``OPENAI_API_KEY``, ``AZURE_OPENAI_API_KEY``, ``PHOENIX_API_KEY`` and
    ``RAGPULSE_JUDGE_API_KEY``, and anything shaped like a bearer token, an ``sk-…`` key
    or an ``api_key=…`` pair.
    """
    for secret in _known_secrets(secrets):
        if secret in text:
            text = text.replace(secret, REDACTED_SECRET)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def withheld(text: str) -> str:
    """The stand-in for a text that content policy keeps in: its length only."""
    return _WITHHELD.format(n=len(text))


def export_text(text: str, policy: ContentPolicy | None = None) -> str:
    """One text as it may leave the process: scrubbed, then redacted and capped, or withheld."""
    policy = policy or get_policy()
    if _WITHHELD_RE.fullmatch(text):
        return text  # already exported
    if not policy.capture_content:
        return withheld(text)
    return scrub_secrets(policy.export_text(scrub_secrets(text)))


def _optional_text(text: str | None, policy: ContentPolicy) -> str | None:
    if text is None:
        return None
    return export_text(text, policy) if policy.capture_content else None


def _export_verdict(verdict: ClaimVerdict, policy: ContentPolicy) -> ClaimVerdict:
    claim = replace(verdict.claim, text=export_text(verdict.claim.text, policy))
    evidence = verdict.evidence
    if evidence is not None:
        evidence = replace(evidence, text=export_text(evidence.text, policy))
    return replace(
        verdict,
        claim=claim,
        evidence=evidence,
        quote=_optional_text(verdict.quote, policy),
        reason=_optional_text(verdict.reason, policy),
    )


# --- explanations -------------------------------------------------------------------

_LISTED_CLAIMS = 8
_QUOTE_CHARS = 120


def _shown(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _QUOTE_CHARS:
        text = text[: _QUOTE_CHARS - 1] + "…"
    return f'"{text}"'


def _where(start: int | None, end: int | None, of: str) -> str:
    return f"({of} chars {start}-{end})" if start is not None and end is not None else f"({of})"


def _describe(
    number: int, verdict: ClaimVerdict, policy: ContentPolicy, *, of: str = "answer"
) -> str:
    """``#3 NOT_FOUND "text"`` or, without content, ``#3 NOT_FOUND (answer chars 4-9)``."""
    label = verdict.verdict.value
    if verdict.verdict is Verdict.SUPPORTED and verdict.evidence is None:
        label += " (quote not verified)"
    claim = verdict.claim
    if policy.capture_content:
        text = f"#{number} {label} {_shown(claim.text)}"
    else:
        text = f"#{number} {label} {_where(claim.answer_start, claim.answer_end, of)}"
    evidence = verdict.evidence
    if verdict.verdict is Verdict.CONTRADICTED and evidence is not None:
        text += f" against context {evidence.context_index + 1}"
        if policy.capture_content:
            text += f" {_shown(evidence.text)}"
        else:
            text += f" chars {evidence.start}-{evidence.end}"
    return text


def _listed(items: Sequence[str]) -> str:
    shown = "; ".join(items[:_LISTED_CLAIMS])
    more = len(items) - _LISTED_CLAIMS
    return shown + (f"; and {more} more" if more > 0 else "")


def _failing(
    claims: Sequence[ClaimVerdict], failed: Iterable[int], policy: ContentPolicy, of: str
) -> str:
    items = [_describe(i + 1, claims[i], policy, of=of) for i in failed]
    return f"; failing claims: {_listed(items)}" if items else ""


def _claims_explanation(
    name: str,
    result: MetricResult,
    evaluation: Evaluation,
    claims: Sequence[ClaimVerdict],
    reference_claims: Sequence[ClaimVerdict],
    policy: ContentPolicy,
) -> str:
    total = len(claims)
    if name == GROUNDEDNESS:
        grounded = sum(1 for c in claims if c.grounded)
        head = f"{grounded} of {total} claims supported by a verified span"
        failed = [i for i, c in enumerate(claims) if not c.grounded]
        return head + _failing(claims, failed, policy, "answer")
    if name == CORRECTNESS:
        if policy.capture_content and result.explanation:
            # The judge's own account names answer claims the reference lacks, which the
            # evaluation does not keep as verdicts; it passes the same policy as the rest.
            return export_text(result.explanation, policy)
        covered = sum(
            1 for c in reference_claims if c.verdict in (Verdict.SUPPORTED, Verdict.INFERRED)
        )
        head = f"{covered} of {len(reference_claims)} reference claims covered by the answer"
        missing = [
            i
            for i, c in enumerate(reference_claims)
            if c.verdict not in (Verdict.SUPPORTED, Verdict.INFERRED)
        ]
        return head + _failing(reference_claims, missing, policy, "reference")
    faithful = sum(1 for c in claims if c.verdict in (Verdict.SUPPORTED, Verdict.INFERRED))
    if name == FAITHFULNESS:
        head = f"{faithful} of {total} claims supported or inferred from the contexts"
    else:
        score = "undefined" if result.score is None else f"{result.score:.2f}"
        head = f"{name} {score}; {faithful} of {total} claims supported or inferred"
    failed = [
        i for i, c in enumerate(claims) if c.verdict in (Verdict.NOT_FOUND, Verdict.CONTRADICTED)
    ]
    return head + _failing(claims, failed, policy, "answer")


def _free_explanation(
    evaluation: Evaluation, text: str | None, policy: ContentPolicy
) -> str | None:
    """A judge's free text (an error message, a reason to skip) under the policy."""
    if evaluation.status is EvalStatus.NO_CLAIMS:
        return "the answer has no claims to check"
    if text is None:
        return None
    if policy.capture_content:
        return export_text(text, policy)
    if _FREE_WITHHELD_RE.fullmatch(text):
        return text  # already exported
    # Upstream messages can echo what was sent (a schema error quotes the reply, which
    # quotes the answer): without content, only their kind and length leave.
    kind = evaluation.error_type or evaluation.status.value
    return f"{kind} (message {withheld(text)})"


def _summary(claims: Sequence[ClaimVerdict]) -> str:
    counts = Counter(c.verdict for c in claims)
    parts = ", ".join(
        f"{counts[v]} {v.value.lower().replace('_', ' ')}" for v in Verdict if counts[v]
    )
    return f"{len(claims)} claims: {parts}"


def export_evaluation(evaluation: Evaluation, policy: ContentPolicy | None = None) -> Evaluation:
    """The evaluation as it may leave the process, under ``policy`` (the process's by default).

    Scores, verdicts, counts, offsets and context indexes are kept; claim, evidence and
    quote texts pass ``export_text``; explanations are rebuilt from the verdicts so they
    name the failing claims in a form the policy allows. Applying it twice changes nothing.
    """
    policy = policy or get_policy()
    claims = tuple(_export_verdict(c, policy) for c in evaluation.claims)
    reference_claims = tuple(_export_verdict(c, policy) for c in evaluation.reference_claims)
    metrics: dict[str, MetricResult] = {}
    for name, result in evaluation.metrics.items():
        if claims and result.status is EvalStatus.OK:
            explanation: str | None = _claims_explanation(
                name, result, evaluation, claims, reference_claims, policy
            )
        else:
            explanation = _free_explanation(evaluation, result.explanation, policy)
        metrics[name] = replace(result, explanation=explanation)
    if claims and evaluation.status is EvalStatus.OK:
        overall: str | None = _summary(claims)
    else:
        overall = _free_explanation(evaluation, evaluation.explanation, policy)
    return replace(
        evaluation,
        claims=claims,
        reference_claims=reference_claims,
        metrics=metrics,
        explanation=overall,
    )


# --- ragpulse's own log lines ---------------------------------------------------------------


class _ScrubbingRecordFactory:
    """Wraps the log record factory: ragpulse's records leave with credentials scrubbed.

    A record factory, not a filter: filters attach to one logger each, and an exception
    message from a judge's HTTP client can be logged by any ragpulse module.
    """

    def __init__(self, previous: Callable[..., logging.LogRecord]) -> None:
        self.previous = previous
        self._formatter = logging.Formatter()

    def __call__(self, *args: object, **kwargs: object) -> logging.LogRecord:
        record: logging.LogRecord = self.previous(*args, **kwargs)
        if not record.name.startswith("ragpulse"):
            return record
        try:
            record.msg = scrub_secrets(record.getMessage())
            record.args = None
            if record.exc_info and record.exc_info[0] is not None:
                record.exc_text = scrub_secrets(self._formatter.formatException(record.exc_info))
        except Exception:  # a log line must never fail the code that writes it
            pass
        return record


def _install_log_scrubbing() -> None:
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _ScrubbingRecordFactory):
        logging.setLogRecordFactory(_ScrubbingRecordFactory(factory))


_install_log_scrubbing()
