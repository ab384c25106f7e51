"""Small helpers the metric modules share: shares of verdicts and the lists they quote."""

from __future__ import annotations

from collections.abc import Sequence

from ragpulse.evaluation.types import ClaimVerdict, Verdict

__all__ = ["COVERED", "covered_share", "names", "uncovered"]

COVERED = (Verdict.SUPPORTED, Verdict.INFERRED)


def covered_share(verdicts: Sequence[ClaimVerdict]) -> float | None:
    """SUPPORTED / items; ``None`` without items."""
    if not verdicts:
        return None
    return sum(1 for v in verdicts if v.verdict is Verdict.SUPPORTED) / len(verdicts)


def uncovered(items: Sequence[ClaimVerdict]) -> list[int]:
    """Indexes of the items neither SUPPORTED nor INFERRED."""
    return [i for i, item in enumerate(items) if item.verdict not in COVERED]


def names(verdicts: Sequence[ClaimVerdict], limit: int = 3) -> str:
    """``'a', 'b' and 2 more``: whole texts (cut only as they leave, after redaction)."""
    shown = ["'" + " ".join(v.claim.text.split()) + "'" for v in verdicts[:limit]]
    more = len(verdicts) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
