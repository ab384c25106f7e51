"""Extent: a quantity one side leaves without bound and the other bounds with a number.

"A lifetime warranty" against "a 2-year limited warranty", "unlimited storage" against
"5 GB of storage", "the code never expires" against "codes expire after 30 days": the
claim keeps the passage's words and changes no number, but says of the same thing that it
has no bound where the passage gives one (or the reverse). Both sides are read from their
words:

- an **unbounded extent** is a word that says a quantity has no end: an adjective
  (``lifetime``, ``lifelong``, ``unlimited``, ``limitless``, ``infinite``, ``permanent``,
  ``perpetual``, ``indefinite``), an adverb (``forever``, ``permanently``,
  ``perpetually``, ``indefinitely``), or a negated end ("no limit", "never expires",
  "does not expire", "no expiry", "no data cap"; "not limited to" lists, it does not
  unbound). One denied in its clause ("no lifetime warranty", "is not unlimited", "does
  not come with a lifetime warranty") states no extent;
- a **bounded quantity** is a number with its unit or the thing it counts ("2-year",
  "30 days", "5 GB", "up to 3 devices"); a year ("the 2019 season") dates, it does not
  bound;
- the **head** is what the extent word qualifies: the words an adjective precedes
  ("lifetime *warranty*"), or the one it follows when nothing does ("the warranty is
  lifetime"); the words either side of an adverb ("*lasts* forever"); and the word a
  negated end names with its neighbours ("*codes* never *expire*", "no *data* cap"). The
  two sides speak of the same thing when a head word stands within a few words of the
  other side's number, in one sentence.

The alignment that places the claim in its passage is the judge's own (``_align``): this
module only reads the two token lists that alignment puts side by side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragpulse.judges.lexical._polarity import in_negated_clause
from ragpulse.judges.lexical._tokens import FUNCTION_WORDS, Token, is_month, tokenize

__all__ = [
    "Extent",
    "bounds",
    "is_quantity",
    "may_state_extent",
    "states",
    "unbounded_extents",
]


def _norms(words: str) -> frozenset[str]:
    return frozenset(t.norm for t in tokenize(words, names=False))


# Words of no end, by how they attach to what they qualify.
_ADJECTIVES = _norms(
    "lifetime lifelong unlimited limitless infinite permanent perpetual indefinite"
)
_ADVERBS = _norms("forever permanently perpetually indefinitely")
# Words naming an end, which a negation before them unbounds ("no limit", "never expires").
_ENDS = _norms("limit limits limited cap caps capped expire expires expired expiry expiration")
_TRIGGERS = _ADJECTIVES | _ADVERBS | _ENDS
_NOT = "not"
# "not limited to" introduces a list; it leaves nothing unbounded.
_LIST_AFTER = "to"
# Tokens between a negation and the end it negates ("no data cap": one word between).
_END_REACH = 2
# How far (in tokens) a head word is looked for beside the extent word that names it.
_HEAD_REACH = 3
# How far (in tokens) from the other side's number a head word may stand.
_NUMBER_REACH = 4
# Four digits in this range, written without a separator, are a year: it dates what it
# stands beside ("the 2019 season"); "1500 mAh" and "1,900 pages" are counts.
_YEAR = re.compile(r"(?:18|19|20)\d\d")
_SENTENCE_BREAK = re.compile(r"[.!?;\n]")
_CLAUSE_BREAK = re.compile(r"[.!?;:,()\n\u2013\u2014]")


@dataclass(frozen=True, slots=True)
class Extent:
    """An unbounded extent a text states."""

    word: str
    """The normalised word that carries it ("lifetime", "expire")."""
    first: int
    """The token index where its phrase starts (the negation of a negated end)."""
    at: int
    """The token index of its word."""
    last: int
    """The token index where its phrase ends (with the heads after it: "unlimited data")."""
    heads: frozenset[str]
    """The normalised words it qualifies."""
    end: bool = False
    """Whether it is a negated end ("no limit"), whose word alone states no extent."""


def unbounded_extents(
    tokens: Sequence[Token], text: str, start: int = 0, stop: int | None = None
) -> list[Extent]:
    """The unbounded extents ``tokens[start:stop]`` (all tokens of ``text``, stop words
    too) state, leaving out those a negation earlier in their clause denies."""
    stop = len(tokens) if stop is None else min(stop, len(tokens))
    found: list[Extent] = []
    if not may_state_extent(t.norm for t in tokens[start : stop + _END_REACH]):
        return found
    for i in range(start, stop):
        norm, first, at, heads = tokens[i].norm, i, i, []
        if norm in _ADJECTIVES:
            heads = _words_near(tokens, i, text, step=1)
            heads = heads or _words_near(tokens, i, text, step=-1, most=1)
        elif norm in _ADVERBS:
            heads = _words_near(tokens, i, text, step=-1, most=1)
            heads += _words_near(tokens, i, text, step=1, most=1)
        elif norm == _NOT and (end := _negated_end(tokens, i, text)) is not None:
            heads = [j for j in range(i + 1, end + 1) if _is_word(tokens[j])]
            heads += _words_near(tokens, i, text, step=-1, most=1)
            heads += _words_near(tokens, end, text, step=1, most=1)
            at = end
        if heads and not in_negated_clause(tokens, first, text):
            found.append(
                Extent(
                    tokens[at].norm,
                    first,
                    at,
                    max(at, *heads),
                    frozenset(tokens[j].norm for j in heads),
                    end=first != at,
                )
            )
    return found


def may_state_extent(norms: Iterable[str]) -> bool:
    """Whether words (normalised) hold one an unbounded extent needs: a cheap test before
    reading a text's extents."""
    return not _TRIGGERS.isdisjoint(norms)


def states(word: str, tokens: Sequence[Token], positions: dict[str, list[int]]) -> bool:
    """Whether a text (its tokens, and their positions by word) uses the extent ``word``:
    the word itself, or for an end ("limit", "expire") the end negated."""
    at = positions.get(word, ())
    if word not in _ENDS:
        return bool(at)
    return any(t.norm == _NOT for p in at for t in tokens[max(0, p - _END_REACH) : p])


def is_quantity(tokens: Sequence[Token], i: int, text: str) -> bool:
    """Whether ``tokens[i]`` is a number bounding a quantity: a duration ("30 days" is
    one token), or a number written with the unit or thing it counts."""
    token = tokens[i]
    if not token.number or is_month(text[token.start : token.end]):
        return False
    if _is_duration(token.norm):
        return True
    if i + 1 >= len(tokens) or (i > 0 and tokens[i - 1].start == token.start):
        return False  # nothing after it, or a part of a date or clock time ("5:30")
    unit = tokens[i + 1]
    if unit.start == token.start or not _is_word(unit):
        return False
    if _YEAR.fullmatch(text, token.start, token.end):
        return False
    return _JOINED.fullmatch(text, token.end, unit.start) is not None


def bounds(heads: frozenset[str], tokens: Sequence[Token], at: int, text: str) -> bool:
    """Whether a word of ``heads`` stands within a few tokens of ``tokens[at]`` (a number),
    in its sentence: the number bounds what the heads name."""
    lo, hi = max(0, at - _NUMBER_REACH), min(len(tokens) - 1, at + _NUMBER_REACH)
    for j in range(lo, hi + 1):
        if j == at or tokens[j].norm not in heads:
            continue
        left, right = (tokens[j], tokens[at]) if j < at else (tokens[at], tokens[j])
        if not _SENTENCE_BREAK.search(text, left.end, right.start):
            return True
    return False


def _words_near(
    tokens: Sequence[Token], at: int, text: str, *, step: int, most: int = 2
) -> list[int]:
    """Where the first ``most`` words are within ``_HEAD_REACH`` tokens of ``tokens[at]`` on
    one side (``step``), within its clause."""
    found: list[int] = []
    j = at + step
    while 0 <= j < len(tokens) and abs(j - at) <= _HEAD_REACH and len(found) < most:
        left, right = (tokens[j - step], tokens[j]) if step > 0 else (tokens[j], tokens[j - step])
        if _CLAUSE_BREAK.search(text, left.end, right.start):
            break
        if _is_word(tokens[j]):
            found.append(j)
        j += step
    return found


def _negated_end(tokens: Sequence[Token], at: int, text: str) -> int | None:
    """The index of the end word the negation ``tokens[at]`` denies ("no limit"), if any."""
    for j in range(at + 1, min(len(tokens), at + 1 + _END_REACH)):
        if _CLAUSE_BREAK.search(text, tokens[j - 1].end, tokens[j].start):
            return None
        if tokens[j].norm in _ENDS:
            following = tokens[j + 1].norm if j + 1 < len(tokens) else ""
            return None if following == _LIST_AFTER else j
    return None


def _is_word(token: Token) -> bool:
    """Whether ``token`` is a word that names something (not a number, a negation or a
    grammatical word; "data" and "text" are words here, though the judge's stop words)."""
    return not token.number and token.norm != _NOT and token.norm not in FUNCTION_WORDS


def _is_duration(norm: str) -> bool:
    """Whether ``norm`` is a duration as the tokenizer writes it (seconds, "2592000s")."""
    return norm.endswith("s") and norm[:-1].replace(".", "", 1).isdecimal()


_JOINED = re.compile(r"[\s-]{0,2}")
