"""The local model judges' view of the retrieved passages.

Where entailment applies, the model reads it: each reference claim is checked against the
passages (context recall), and a passage helps (context precision) when it holds the
evidence of a reference claim the model finds entailed. Relevance to the question is not
entailment: it is the offline judge's word overlap (``lexical._context_view.word_relevance``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragpulse.evaluation.types import ClaimVerdict, Context, ContextJudgement, RagRecord
from ragpulse.judges.lexical._checkable import checkable_claims, index_context
from ragpulse.judges.lexical._context_view import helping, word_relevance

__all__ = ["local_contexts"]

_RELEVANT = 0.5


def local_contexts(
    record: RagRecord,
    passages: Sequence[Context],
    check: Callable[..., list[ClaimVerdict]],
    *,
    max_chars: int,
    recall: bool,
) -> tuple[tuple[ContextJudgement, ...], tuple[ClaimVerdict, ...] | None]:
    """Each passage's relevance and help; with ``recall``, the reference's claims checked."""
    indexed = [index_context(i, c, max_chars) for i, c in enumerate(passages)]
    relevance = word_relevance(record.question, indexed)
    helps: list[bool | None] = [None if r is None else r >= _RELEVANT for r in relevance]
    support: tuple[ClaimVerdict, ...] | None = None
    reference = record.reference or ""
    if recall and reference.strip():
        claims = [c.claim for c in checkable_claims(reference)]
        verdicts = check(reference, claims, passages, record.question) if passages else []
        support = tuple(verdicts)
        helps = helping(support, len(passages))
    judged = tuple(
        ContextJudgement(i, c.id, relevance[i], helps[i]) for i, c in enumerate(passages)
    )
    return judged, support
