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

Each metric's module rebuilds its explanation from the exported verdicts
(``Metric.explain``, ``ragpulse.metrics``), naming the failing claims and their verdicts
in a form the policy allows through ``_Export.failing``: ``#3 NOT_FOUND "…"`` with
content, ``#3 NOT_FOUND (answer chars 40-78)`` without.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any, TypeVar

from ragpulse._secrets import scrubber
from ragpulse.capture._content import ContentPolicy, get_policy
from ragpulse.evaluation.types import (
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
    Verdict,
)
from ragpulse.metrics import _registry

__all__ = [
    "export_evaluation",
    "export_text",
    "withheld",
]

_WITHHELD = "[withheld: {n} chars]"
_WITHHELD_RE = re.compile(r"\[withheld: \d+ chars\]")
_FREE_WITHHELD_RE = re.compile(r"[a-z_]+ \(message \[withheld: \d+ chars\]\)")


def withheld(text: str) -> str:
    """The stand-in for a text that content policy keeps in: its length only."""
    return _WITHHELD.format(n=len(text))


_T = TypeVar("_T")


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}


def _field_names(cls: type[Any]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _copy(obj: _T, **changes: object) -> _T:
    """``dataclasses.replace`` without its per-call introspection (claims come by hundreds)."""
    cls: type[Any] = type(obj)
    values = {name: getattr(obj, name) for name in _field_names(cls)}
    values.update(changes)
    copied: _T = cls(**values)
    return copied


class _Export:
    """One export's policy and credential scrubber, shared by all of its texts."""

    def __init__(self, policy: ContentPolicy) -> None:
        self.policy = policy
        self.content = policy.capture_content
        self.scrub = scrubber()

    def text(self, text: str) -> str:
        if text.startswith("[withheld: ") and _WITHHELD_RE.fullmatch(text):
            return text  # already exported
        if not self.content:
            return withheld(text)
        # Scrubbed before the hook, so a hook that fails or keeps everything leaks no key.
        exported = self.policy.export_text(self.scrub(text))
        return withheld(text) if exported is None else exported

    def optional(self, text: str | None) -> str | None:
        return self.text(text) if text is not None and self.content else None

    def failing(self, items: Sequence[ClaimVerdict], failed: Sequence[int], of: str) -> str:
        """``; failing claims: #2 …`` for the items at ``failed`` (already exported)."""
        return _failing(items, failed, self, of)

    def free_text(self, evaluation: Evaluation, text: str | None) -> str | None:
        """A judge's free text (an error message, a reason to skip) under the policy."""
        return _free_explanation(evaluation, text, self)

    def verdict(self, verdict: ClaimVerdict) -> ClaimVerdict:
        claim = _copy(verdict.claim, text=self.text(verdict.claim.text))
        evidence = verdict.evidence
        if evidence is not None:
            evidence = _copy(evidence, text=self.text(evidence.text))
        return _copy(
            verdict,
            claim=claim,
            evidence=evidence,
            quote=self.optional(verdict.quote),
            reason=self.optional(verdict.reason),
        )


def export_text(text: str, policy: ContentPolicy | None = None) -> str:
    """One text as it may leave the process: scrubbed, then redacted and capped, or withheld."""
    return _Export(policy or get_policy()).text(text)


# --- explanations -------------------------------------------------------------------

_LISTED_CLAIMS = 8
_QUOTE_CHARS = 120
# The failing claims listed fit under the explanation cap of every signal (1024), head included.
_LISTING_BUDGET = 800


def _shown(text: str) -> str:
    text = " ".join(text[: 4 * _QUOTE_CHARS].split())
    if len(text) > _QUOTE_CHARS:
        text = text[: _QUOTE_CHARS - 1] + "…"
    return f'"{text}"'


def _where(start: int | None, end: int | None, of: str) -> str:
    return f"({of} chars {start}-{end})" if start is not None and end is not None else f"({of})"


def _describe(number: int, verdict: ClaimVerdict, ex: _Export, *, of: str = "answer") -> str:
    """``#3 NOT_FOUND "text"`` or, without content, ``#3 NOT_FOUND (answer chars 4-9)``."""
    label = verdict.verdict.value
    if verdict.verdict is Verdict.SUPPORTED and verdict.evidence is None:
        label += " (quote not verified)"
    claim = verdict.claim
    if ex.content:
        text = f"#{number} {label} {_shown(claim.text)}"
    else:
        text = f"#{number} {label} {_where(claim.answer_start, claim.answer_end, of)}"
    evidence = verdict.evidence
    if verdict.verdict is Verdict.CONTRADICTED and evidence is not None:
        text += f" against context {evidence.context_index + 1}"
        if ex.content:
            text += f" {_shown(evidence.text)}"
        else:
            text += f" chars {evidence.start}-{evidence.end}"
    return text


def _failing(claims: Sequence[ClaimVerdict], failed: Sequence[int], ex: _Export, of: str) -> str:
    """``; failing claims: #2 …; #5 …; and 3 more``, within the listing budget."""
    if not failed:
        return ""
    shown: list[str] = []
    size = 0
    for index in failed[:_LISTED_CLAIMS]:
        item = _describe(index + 1, claims[index], ex, of=of)
        if shown and size + len(item) > _LISTING_BUDGET:
            break
        shown.append(item)
        size += len(item) + 2
    more = len(failed) - len(shown)
    return "; failing claims: " + "; ".join(shown) + (f"; and {more} more" if more else "")


FREE_TEXT_CHARS = 300
"""Characters of a judge's free text (an error message) an explanation keeps, after redaction."""


def _free_explanation(evaluation: Evaluation, text: str | None, ex: _Export) -> str | None:
    """A judge's free text (an error message, a reason to skip) under the policy."""
    if evaluation.status is EvalStatus.NO_CLAIMS:
        return "the answer has no claims to check"
    if text is None:
        return None
    if ex.content:
        # Redacted whole, then cut: a cut first could split a secret the hook would match.
        exported = ex.text(text)
        if len(exported) > FREE_TEXT_CHARS:
            exported = exported[: FREE_TEXT_CHARS - 1] + "…"
        return exported
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
    return f"{len(claims)} claim{'' if len(claims) == 1 else 's'}: {parts}"


def export_evaluation(evaluation: Evaluation, policy: ContentPolicy | None = None) -> Evaluation:
    """The evaluation as it may leave the process, under ``policy`` (the process's by default).

    Scores, verdicts, counts, offsets and context indexes are kept; claim, evidence and
    quote texts pass ``export_text``; explanations are rebuilt from the verdicts so they
    name the failing claims in a form the policy allows. Applying it twice changes nothing.
    """
    ex = _Export(policy or get_policy())
    claims = tuple(ex.verdict(c) for c in evaluation.claims)
    reference_claims = tuple(ex.verdict(c) for c in evaluation.reference_claims)
    exported = replace(
        evaluation,
        claims=claims,
        reference_claims=reference_claims,
        question_parts=tuple(ex.verdict(c) for c in evaluation.question_parts),
        required_points=tuple(ex.verdict(c) for c in evaluation.required_points),
        reference_support=tuple(ex.verdict(c) for c in evaluation.reference_support),
        diagnosis_reason=evaluation.diagnosis_reason,  # ragpulse's own words, no request text
    )
    metrics: dict[str, MetricResult] = {}
    for name, result in evaluation.metrics.items():
        metric = _registry.get(name)
        if metric is not None and metric.explain is not None:
            # The metric's module rebuilds its explanation from texts that passed the policy.
            metrics[name] = replace(result, explanation=metric.explain(result, exported, ex))
            continue
        if metric is not None and not metric.content:
            # Its explanation is ragpulse's own words (counts and passage numbers).
            metrics[name] = result
            continue
        # No explanation of its own (or a metric unknown here): the judge's free text.
        explanation = _free_explanation(evaluation, result.explanation, ex)
        metrics[name] = replace(result, explanation=explanation)
    if claims and evaluation.status is EvalStatus.OK:
        overall: str | None = _summary(claims)
    elif evaluation.abstained and evaluation.status is not EvalStatus.ERROR:
        overall = evaluation.explanation  # ragpulse's own words on the abstention
    else:
        overall = _free_explanation(evaluation, evaluation.explanation, ex)
    return replace(exported, metrics=metrics, explanation=overall)


# --- ragpulse's own log lines ---------------------------------------------------------------
