"""Claims that rest only on a history no tool vouched for are not counted as found.

An agent's record may hold contexts that only a tool result in the chat history gave, a
result no tool span ragpulse saw vouches for (``ragpulse.adapter.history_unvouched`` in
the record's attributes, ``ragpulse.adapters._provenance``): the client wrote it, and may
have made it up. A claim a judge found SUPPORTED or INFERRED whose evidence lies in such a
context is read as NOT_FOUND, its evidence and quote kept so the report shows where it
came from, its reason saying why. Pure data, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ragpulse import semconv
from ragpulse.evaluation.types import ClaimVerdict, RagRecord, Verdict

__all__ = ["UNVOUCHED_REASON", "unvouched_claims", "unvouched_contexts", "without_unvouched"]

UNVOUCHED_REASON = (
    "its only evidence is a tool result in the chat history that no tool span vouches for"
)


def unvouched_contexts(record: RagRecord) -> frozenset[int]:
    """The record's contexts that only unvouched history gave (0-based)."""
    marked = record.attributes.get(semconv.RAG_ADAPTER_HISTORY_UNVOUCHED)
    if not isinstance(marked, tuple | list):
        return frozenset()
    return frozenset(i for i in marked if isinstance(i, int) and not isinstance(i, bool))


def _rests_on(verdict: ClaimVerdict, unvouched: frozenset[int]) -> bool:
    return (
        verdict.verdict in (Verdict.SUPPORTED, Verdict.INFERRED)
        and verdict.evidence is not None
        and verdict.evidence.context_index in unvouched
    )


def without_unvouched(
    claims: Sequence[ClaimVerdict], record: RagRecord
) -> tuple[ClaimVerdict, ...]:
    """``claims`` with each one resting only on unvouched history read as NOT_FOUND."""
    unvouched = unvouched_contexts(record)
    if not unvouched:
        return tuple(claims)
    return tuple(
        dataclasses.replace(claim, verdict=Verdict.NOT_FOUND, reason=UNVOUCHED_REASON)
        if _rests_on(claim, unvouched)
        else claim
        for claim in claims
    )


def unvouched_claims(claims: Sequence[ClaimVerdict], record: RagRecord) -> int:
    """How many of the (already read) ``claims`` were found only in unvouched history."""
    unvouched = unvouched_contexts(record)
    return sum(
        1
        for claim in claims
        if unvouched
        and claim.verdict is Verdict.NOT_FOUND
        and claim.evidence is not None
        and claim.evidence.context_index in unvouched
    )
