"""Widening words: a claim that states more generally than its passage.

"Return shipping is free for members" restated as "return shipping is free for
everyone", "business class may be booked with approval" as "is allowed automatically":
every content word of the passage is there, and one word more makes the claim universal.
A word of universal scope ("always", "everyone", "automatically", "all", "every",
"any", "unlimited") that no context uses is not stated when the passage it restates
sets a condition or a limit ("unless", "only", "if", "may", "must", "requires",
"approval", "members", "up to", "at most"): the claim drops that condition. Without
one the word is harmless wording ("all three regions").

"Everyone else" and "all other" are not universal, and "each", "every", "all" and "any"
state one scope: a passage saying "each item" states "every item".

A superlative ("the fastest", "the cheapest", "the best") that no prose context uses is
not stated either: it compares with everything else, which a sentence rarely does in
passing. Against data (``superlatives=False``) it is what a summary computes ("the
lowest reading"), and is left to the numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ragpulse.judges.lexical._tokens import Token, tokenize

__all__ = ["sentence_bounds", "widening_words"]

_UNIVERSAL = frozenset(
    t.norm
    for t in tokenize(
        "always automatically everyone everybody everything all every any anyone anything "
        "unlimited regardless whatever whenever",
        names=False,
    )
)
# One scope, however it is worded.
_EACH = frozenset({"each", "every", "all", "any"})
# Words after a universal word that narrow it ("everyone else", "all other plans").
_NARROWING = frozenset({"else", "other", "others"})
_CONDITION = re.compile(
    r"\b(?:unless|only|if|except|may|must|requir\w*|approv\w*|eligible|members?|"
    r"subject\s+to|up\s+to|at\s+(?:most|least)|limit\w*|maximum|minimum)\b",
    re.IGNORECASE,
)
# Superlatives: "-est" words that are not one ("interest", "request", "west", ...).
_SUPERLATIVE = re.compile(r"[a-z]{2,}est|best|worst", re.IGNORECASE)
_NOT_SUPERLATIVE = frozenset(
    {"interest", "request", "west", "test", "rest", "guest", "quest", "contest", "protest",
     "suggest", "digest", "arrest", "harvest", "forest", "honest", "modest", "invest",
     "manifest", "latest", "nest", "chest", "pest", "vest", "crest", "zest", "attest",
     "detest", "infest", "ingest", "congest", "conquest", "midwest", "northwest",
     "southwest", "behest", "earnest", "inquest", "priest", "bequest", "unrest"}
)  # fmt: skip
_SENTENCE_END = re.compile(r"[.!?\n]")
# How far (in characters) a window is extended to its sentences' ends.
_SENTENCE_REACH = 400


def widening_words(
    claim: str,
    claim_tokens: Sequence[Token],
    stated: Callable[[str], bool],
    passage: str,
    *,
    superlatives: bool = True,
) -> frozenset[str]:
    """Normalised claim words that widen what ``passage`` says.

    ``claim_tokens`` are all the claim's tokens (stop words too), ``stated`` whether the
    contexts use a normalised word, ``passage`` the text the claim restates.
    """
    widening: set[str] = set()
    conditioned: bool | None = None
    for i, token in enumerate(claim_tokens):
        if stated(token.norm) or (token.norm in _EACH and any(stated(w) for w in _EACH)):
            continue
        following = claim_tokens[i + 1].norm if i + 1 < len(claim_tokens) else ""
        raw = claim[token.start : token.end].lower()
        if token.norm in _UNIVERSAL and following not in _NARROWING:
            if conditioned is None:
                conditioned = _CONDITION.search(passage) is not None
            if conditioned:
                widening.add(token.norm)
        elif superlatives and _SUPERLATIVE.fullmatch(raw) and raw not in _NOT_SUPERLATIVE:
            widening.add(token.norm)
    return frozenset(widening)


def sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """``text[start:end]`` extended to the sentences it touches."""
    lo = max(0, start - _SENTENCE_REACH)
    before = max((m.end() for m in _SENTENCE_END.finditer(text, lo, start)), default=lo)
    after = _SENTENCE_END.search(text, end, end + _SENTENCE_REACH)
    return before, min(len(text), end + _SENTENCE_REACH) if after is None else after.end()
