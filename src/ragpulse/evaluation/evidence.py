"""Evidence verification: a quoted span counts only if it really occurs in its context.

Matching folds whitespace runs and letter case, so a judge that re-wraps lines or
changes capitalisation still verifies, while the recorded offsets always point
into the original, unmodified context text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragpulse.evaluation.types import Context, Evidence

__all__ = ["locate", "verify"]

# Quotes longer than this are not searched: no honest evidence span is that long,
# and the pattern compile and scan cost grows with it.
MAX_QUOTE_CHARS = 20_000


def _quote_pattern(quote: str) -> re.Pattern[str] | None:
    """A pattern matching ``quote`` with any whitespace run between its tokens."""
    tokens = quote.split()
    if not tokens:
        return None
    return re.compile(r"\s+".join(re.escape(token) for token in tokens), re.IGNORECASE)


def locate(quote: str, text: str) -> tuple[int, int] | None:
    """Offsets of quote in text after whitespace- and case-folding.

    The offsets index the ORIGINAL text, so ``text[start:end]`` is the span as written.
    """
    if not quote or not text or len(quote) > MAX_QUOTE_CHARS:
        return None
    pattern = _quote_pattern(quote)
    if pattern is None:
        return None
    match = pattern.search(text)
    if match is None:
        return None
    return match.start(), match.end()


def verify(
    quote: str | None, contexts: Sequence[Context], context_index: int | None
) -> Evidence | None:
    """Evidence if the quote occurs in ``contexts[context_index]``.

    When ``context_index`` is None, the first context that contains the quote is used.
    None otherwise: empty quote, index out of range, or quote not found.
    """
    if not quote or not quote.strip():
        return None
    if context_index is None:
        candidates: Sequence[int] = range(len(contexts))
    elif 0 <= context_index < len(contexts):
        candidates = (context_index,)
    else:
        return None
    for index in candidates:
        context = contexts[index]
        found = locate(quote, context.text)
        if found is not None:
            start, end = found
            return Evidence(
                context_index=index,
                start=start,
                end=end,
                text=context.text[start:end],
                context_id=context.id,
            )
    return None
