"""The offline judge's view of the retrieved passages: relevance, and the reference in them.

- A passage's relevance to the question is the share of a question part's content words
  it holds, for the part it covers best (0-1). It sees that a passage talks about what
  was asked, not that it answers it.
- The reference's claims are judged against the passages the way answer claims are
  (numbers and names exact, most words present), with the question as shared premise
  ("Paris." answers "What is the capital of France?"): context recall. A claim the
  question alone covers needs one of its own words in a passage.
- A passage helps (context precision) when, judged alone, it supports a reference claim;
  without a reference, when its relevance is at least one half. Only the first
  ``MAX_PASSAGES_ALONE`` passages are judged alone; later ones count by relevance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragpulse.evaluation.types import ClaimVerdict, ContextJudgement, RagRecord, Verdict
from ragpulse.evaluation.vector import question_parts
from ragpulse.judges.lexical._checkable import (
    IndexedContext,
    align_name_forms,
    checkable_claims,
    focus_words,
    premise_of,
)

if TYPE_CHECKING:
    from ragpulse.judges.lexical._claim_judge import ClaimJudge

__all__ = ["MAX_PASSAGES_ALONE", "helping", "lexical_contexts", "word_relevance"]

MAX_PASSAGES_ALONE = 32
"""Passages judged one by one against the reference's claims (bounds the work)."""
_RELEVANT = 0.5
_FAITHFUL = (Verdict.SUPPORTED, Verdict.INFERRED)


def _relevance(parts: Sequence[frozenset[str]], context: IndexedContext) -> float | None:
    scored = [sum(1 for w in words if w in context.positions) / len(words) for words in parts]
    return max(scored) if scored else None


def word_relevance(question: str | None, indexed: Sequence[IndexedContext]) -> list[float | None]:
    """Each passage's relevance to the question by its words (``None`` without a question)."""
    parts = [w for w in (focus_words(p) for p in question_parts(question)) if w]
    return [_relevance(parts, ctx) for ctx in indexed]


def helping(support: Sequence[ClaimVerdict], passages: int) -> list[bool | None]:
    """Per passage, whether it holds the evidence of a supported reference claim."""
    helps: list[bool | None] = [False] * passages
    for verdict in support:
        evidence = verdict.evidence
        if verdict.verdict in _FAITHFUL and evidence and evidence.context_index < passages:
            helps[evidence.context_index] = True
    return helps


def lexical_contexts(
    judge: ClaimJudge,
    record: RagRecord,
    indexed: Sequence[IndexedContext],
    *,
    alone: bool = True,
) -> tuple[tuple[ContextJudgement, ...], tuple[ClaimVerdict, ...] | None]:
    """Each passage's relevance and help, and the reference's claims against the passages.

    ``alone=False`` skips judging each passage alone (context precision is not asked):
    with a reference, a passage then helps when a supported claim's evidence lies in it.
    """
    relevance = word_relevance(record.question, indexed)
    support: tuple[ClaimVerdict, ...] | None = None
    helps: list[bool | None] = [None if r is None else r >= _RELEVANT for r in relevance]
    if record.reference and record.reference.strip():
        premise = premise_of(record.question, judge.max_context_chars, index=len(indexed))
        pool = [*indexed, *(() if premise is None else (premise,))]
        contexts = [ctx.context for ctx in pool]
        claims = align_name_forms(checkable_claims(record.reference), list(indexed))
        verdicts = []
        for claim in claims:
            verdict = judge._judge_claim(claim, pool, contexts)
            # Content tokens only (``CheckableClaim.tokens``): one must be in a passage.
            said = any(t.norm in ctx.positions for ctx in indexed for t in claim.tokens)
            if verdict.verdict in _FAITHFUL and not said:
                verdict = ClaimVerdict(
                    verdict.claim, Verdict.NOT_FOUND, reason="only the question states it"
                )
            verdicts.append(verdict)
        support = tuple(verdicts)
        helps = helping(support, len(indexed))
        for i, ctx in enumerate(indexed[:MAX_PASSAGES_ALONE] if alone else ()):
            single = [ctx, *(() if premise is None else (premise,))]
            helps[i] = bool(helps[i]) or any(
                judge._judge_claim(claim, single, contexts).verdict in _FAITHFUL
                for claim, verdict in zip(claims, support, strict=True)
                if verdict.verdict in _FAITHFUL
            )
    judged = tuple(
        ContextJudgement(ctx.index, ctx.context.id, relevance[i], helps[i])
        for i, ctx in enumerate(indexed)
    )
    return judged, support
