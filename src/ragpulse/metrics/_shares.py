"""Small helpers the metric modules share: shares of verdicts and the lists they quote."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragpulse.evaluation.types import ClaimVerdict, EvalStatus, MetricResult, Verdict

if TYPE_CHECKING:
    from ragpulse.metrics._spec import Exported

__all__ = [
    "COVERED",
    "NO_CLAIMS_TEXT",
    "covered_share",
    "names",
    "no_claims",
    "quote",
    "share_explanation",
    "share_result",
    "uncovered",
]

COVERED = (Verdict.SUPPORTED, Verdict.INFERRED)
NO_CLAIMS_TEXT = "the answer has no claims to check"


def covered_share(verdicts: Sequence[ClaimVerdict]) -> float | None:
    """SUPPORTED / items; ``None`` without items."""
    if not verdicts:
        return None
    return sum(1 for v in verdicts if v.verdict is Verdict.SUPPORTED) / len(verdicts)


def uncovered(items: Sequence[ClaimVerdict]) -> list[int]:
    """Indexes of the items neither SUPPORTED nor INFERRED."""
    return [i for i, item in enumerate(items) if item.verdict not in COVERED]


def no_claims(name: str) -> MetricResult:
    """``name`` undefined: the answer has no claims to check."""
    return MetricResult(name, None, NO_CLAIMS_TEXT, EvalStatus.NO_CLAIMS)


def quote(text: str) -> str:
    """``'text'`` on one line, whole.

    A quote is never cut here: the content policy's redaction hook must see whole texts
    (a card number cut in half no longer matches its pattern), so explanations are cut
    only as they leave, after redaction (``ragpulse.signals.privacy``).
    """
    return "'" + " ".join(text.split()) + "'"


def names(verdicts: Sequence[ClaimVerdict], limit: int = 3) -> str:
    """``'a', 'b' and 2 more``: whole texts (cut only as they leave, after redaction)."""
    shown = [quote(v.claim.text) for v in verdicts[:limit]]
    more = len(verdicts) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def share_result(
    name: str, items: Sequence[ClaimVerdict], noun: str, missed_as: str
) -> MetricResult:
    """``2 of 3 <noun>; <missed_as>: 'a'``: the covered share of ``items`` as a result."""
    missed = [items[i] for i in uncovered(items)]
    text = f"{len(items) - len(missed)} of {len(items)} {noun}"
    if missed:
        text += f"; {missed_as}: {names(missed)}"
    return MetricResult(name, (len(items) - len(missed)) / len(items), text)


def share_explanation(items: Sequence[ClaimVerdict], noun: str, ex: Exported, of: str) -> str:
    """The same under the content policy: the items not covered, as it allows them quoted."""
    missed = uncovered(items)
    return f"{len(items) - len(missed)} of {len(items)} {noun}" + ex.failing(items, missed, of)
