"""Negation in prose: a claim that says the opposite of the sentence it restates.

"Personalised items cannot be returned" restated as "personalised items can be returned"
keeps every content word; only the negation before the verb differs. The sentence near
the aligned window that shares most of the claim's words (and most of them) is the one
the claim restates; a word that sentence denies with a negated verb ("cannot", "is not",
"never") and the claim affirms is a contradiction. The other way round is called on the
same terms where the negation is all the claim adds: the claim denies a word with a
negated verb, the sentence states it with no negation anywhere in it, and every content
word of the claim is in the sentence ("Personalised items cannot be returned" for
"Personalised items can be returned"). A claim with words of its own may restate the
sentence in part ("The store does not open on Sundays" for "The store opens Monday to
Saturday"), and a negated noun or a number ("no incidents" for "0 incidents", "no
charger" for "bring your own charger") is no negated verb, so neither is called.

A claim that restates a condition ("only if it arrives damaged", "unless ...") is left
alone: its polarity is the condition's, not the sentence's. "Not only" is no negation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragpulse.judges.lexical._tokens import Token, is_content

__all__ = ["PolarityFlip", "in_negated_clause", "polarity_flip"]

# Tokens between a negation and the word it negates ("cannot be returned", "is not
# refundable", "no late fee").
_NEGATION_REACH = 3
_NOT = "not"
# Words by which a sentence may deny without "not" (a structured value "waterproof: false").
_NEGATIVE = frozenset({_NOT, "false", "noth", "neither", "0"})
# Any negation in a sentence's text, however the tokens read it ("doesn’t", "n't").
_ANY_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|neither|nor|cannot|without)\b|n['\u2019]t\b", re.IGNORECASE
)
# A word after "not" that undoes it ("not only ... but also").
_NOT_UNDONE = frozenset({"only", "just", "merely"})
# Words by which a claim restates a condition rather than a plain statement.
_CONDITION = frozenset({"only", "if", "unless", "except", "otherwise"})
_SENTENCE_END = re.compile(r"[.!?;\n]")
_BREAK = re.compile(r"[.!?;:,()\n\u2013\u2014]")
_VERBAL = re.compile(r"not|never|cannot|\w+n['\u2019]t", re.IGNORECASE)
# A sentence must share this many of the claim's words, and this share of them, to be
# the one it restates.
_MIN_SHARED = 2
_MIN_SHARE = 0.6
# An adverb between a negation and its verb does not stop it ("does not directly cause").
_ADVERB = "ly"


@dataclass(frozen=True, slots=True)
class PolarityFlip:
    """A claim word the restated sentence negates and the claim does not, or the reverse."""

    word: str
    start: int
    """Character range of the sentence in its context."""
    end: int


def _negated(
    tokens: Sequence[Token], at: int, first: int, text: str, *, verbal_only: bool = False
) -> bool:
    """Whether a negation among the ``_NEGATION_REACH`` tokens before ``at`` reaches it.

    A negation reaches the first content word after it, not across punctuation. With
    ``verbal_only``, only a negated verb counts ("cannot", "is not", "never"), not a
    negated noun ("no adapter", "without a cable"), which a claim may restate in other
    words ("supply your own adapter").
    """
    for i in range(at - 1, max(first, at - _NEGATION_REACH) - 1, -1):
        token = tokens[i]
        if _BREAK.search(text, token.end, tokens[i + 1].start):
            return False
        if token.norm == _NOT:
            if tokens[i + 1].norm in _NOT_UNDONE:
                return False
            return not verbal_only or _VERBAL.fullmatch(text, token.start, token.end) is not None
        if is_content(token) and not token.norm.endswith(_ADVERB):
            return False
    return False


def in_negated_clause(tokens: Sequence[Token], at: int, text: str) -> bool:
    """Whether a negation earlier in the clause of ``tokens[at]`` may reach it.

    Read loosely on the claim's side ("does not seem to accommodate"): a flip is only
    called where the claim surely affirms what the context denies.
    """
    for i in range(at - 1, -1, -1):
        if _BREAK.search(text, tokens[i].end, tokens[i + 1].start):
            return False
        if tokens[i].norm == _NOT:
            return True
    return False


def _sentences(tokens: Sequence[Token], text: str, first: int, last: int) -> list[range]:
    """The token ranges of the sentences that ``tokens[first:last + 1]`` touches."""
    while first > 0 and not _SENTENCE_END.search(text, tokens[first - 1].end, tokens[first].start):
        first -= 1
    while last + 1 < len(tokens) and not _SENTENCE_END.search(
        text, tokens[last].end, tokens[last + 1].start
    ):
        last += 1
    ends = [m.start() for m in _SENTENCE_END.finditer(text, tokens[first].end, tokens[last].start)]
    sentences = []
    start = first
    at = 0
    for i in range(first + 1, last + 1):
        if at < len(ends) and ends[at] < tokens[i].start:
            sentences.append(range(start, i))
            start = i
            while at < len(ends) and ends[at] < tokens[i].start:
                at += 1
    sentences.append(range(start, last + 1))
    return sentences


def polarity_flip(
    claim: str,
    said: Sequence[Token],
    tokens: Sequence[Token],
    text: str,
    first: int,
    last: int,
) -> PolarityFlip | None:
    """Where the sentence ``claim`` (whose tokens are ``said``) restates in the window
    ``tokens[first:last + 1]`` of ``text`` gives one of its words the opposite polarity;
    None when they agree."""
    if not tokens or not 0 <= first <= last < len(tokens):
        return None
    if any(t.norm in _CONDITION for t in said):
        return None
    claim_polarity: dict[str, set[bool]] = {}
    denied: set[str] = set()
    """Claim words a negated verb of the claim reaches for sure."""
    claim_words: set[str] = set()
    for i, token in enumerate(said):
        if not is_content(token):
            continue
        claim_words.add(token.norm)
        if not token.key:
            claim_polarity.setdefault(token.norm, set()).add(in_negated_clause(said, i, claim))
            if _negated(said, i, 0, claim, verbal_only=True):
                denied.add(token.norm)
    if not claim_polarity:
        return None
    # Between sentences sharing as many words, the one with the claim's first word (its
    # subject, as a rule) is the one it restates.
    subject = next(iter(claim_polarity))
    best: range | None = None
    best_shared = (_MIN_SHARED - 1, True)
    for sentence in _sentences(tokens, text, first, last):
        norms = {tokens[i].norm for i in sentence}
        shared = (len(norms & claim_polarity.keys()), subject in norms)
        if shared > best_shared:
            best, best_shared = sentence, shared
    if best is None or best_shared[0] < _MIN_SHARE * len(claim_polarity):
        return None
    stated: dict[str, set[bool]] = {}
    for i in best:
        if tokens[i].norm in claim_polarity:
            stated.setdefault(tokens[i].norm, set()).add(
                _negated(tokens, i, best.start, text, verbal_only=True)
            )
    # Only what the sentence denies and the claim affirms: a negative claim may restate
    # an affirmative sentence in other words ("0 incidents" as "no incidents").
    for word, polarity in stated.items():
        if polarity == {True} and claim_polarity[word] == {False}:
            return PolarityFlip(word, tokens[best.start].start, tokens[best[-1]].end)
    # The reverse: the claim adds a negated verb to what the sentence states plainly.
    span = (tokens[best.start].start, tokens[best[-1]].end)
    plain = not any(tokens[i].norm in _NEGATIVE for i in best) and not _ANY_NEGATION.search(
        text, *span
    )
    if denied and plain and claim_words <= {tokens[i].norm for i in best}:
        for word in denied:
            if stated.get(word) == {False} and claim_polarity[word] == {True}:
                return PolarityFlip(word, tokens[best.start].start, tokens[best[-1]].end)
    return None
