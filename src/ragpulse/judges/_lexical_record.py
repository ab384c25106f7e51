"""Yes/no facts of JSON record contexts, and the claims that speak of them.

A context that is a JSON object (a business listing, a product record, a profile)
states its yes/no facts as flags: ``"OutdoorSeating": true``, ``"WiFi": null``,
``"Ambience": {"casual": false}``. An answer that paraphrases the record ("offers
outdoor seating", "has no WiFi", "a casual atmosphere") names the flag by the words
of its key, and its polarity must agree with the value: ``true`` needs a positive
statement, ``false`` a negated one, and ``null`` says the record does not know, so
any statement either way is not found in it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FlagMention", "RecordFlag", "flag_mentions", "parse_record", "record_flags"]

# Key words that say nothing about which fact a flag is ("GoodForGroups" is about groups).
_WEAK_KEY_WORDS = frozenset({"good", "for", "has", "have", "is", "accept", "accepts", "allow"})
# A nested flag named by one short word ("lot" under "BusinessParking") is only matched
# when a word of its parent key is in the claim too; longer leaf words stand alone.
_MIN_STANDALONE_LEAF = 5
# Keys run together ("TakeOut" as "takeout") are matched from this many letters.
_MIN_SQUASHED = 4
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nor|without|lacks?|lacking|cannot|\w+n['’]t)\b", re.IGNORECASE
)
# A contrast ends the reach of a negation: "no WiFi, but it takes reservations".
_CONTRAST = re.compile(r"\b(?:but|however|while|whereas|although|though|yet)\b|[;,]", re.I)
_AND = re.compile(r"\band\b|&", re.IGNORECASE)
_WORDS = re.compile(r"\w+")
# "WiFi is not offered", "reservations are not really needed": the word, then a verb or
# two, then the negation.
_NEGATION_AFTER_WORDS = 5
_LETTERS = re.compile(r"[^a-z]+")
# JSON records are small; bigger texts are not walked (bounds the work).
_MAX_RECORD_CHARS = 200_000


@dataclass(frozen=True, slots=True)
class RecordFlag:
    """One yes/no (or unknown) fact of a JSON record."""

    key: str
    """The key as written in the record."""
    words: tuple[str, ...]
    """Normalised content words of the key that name the fact."""
    squashed: str
    """Those words' letters run together, to match "takeout" against "TakeOut"."""
    parents: frozenset[str]
    """Normalised words of the flag group's key ("Ambience"), if the flag is in one."""
    value: bool | None


@dataclass(frozen=True, slots=True)
class FlagMention:
    """A flag a claim speaks of, and whether the claim says it the record's way."""

    flag: RecordFlag
    negated: bool

    @property
    def agrees(self) -> bool | None:
        """True or False against a yes/no value; None when the record leaves it unknown."""
        if self.flag.value is None:
            return None
        return self.flag.value != self.negated


def _is_flag(value: object) -> bool:
    return isinstance(value, bool) or value is None


def _leaves(obj: object, group: str, depth: int = 0) -> Iterator[tuple[str, str, bool | None]]:
    """(key, group, value) of every flag; group is the key of a dict made only of flags.

    Only such groups ("Ambience", "BusinessParking") qualify a flag's name; a container
    of anything ("attributes") does not. A ``null`` counts as an unknown yes/no fact only
    beside real yes/no values; elsewhere (``"hours": null``) it is just a missing value.
    """
    if depth > 8:
        return
    if isinstance(obj, dict):
        has_bools = any(isinstance(v, bool) for v in obj.values())
        for key, value in obj.items():
            if isinstance(value, bool) or (value is None and has_bools):
                yield str(key), group, value
            elif isinstance(value, dict):
                pure = all(_is_flag(v) for v in value.values())
                yield from _leaves(value, str(key) if pure else "", depth + 1)
            elif isinstance(value, list):
                for item in value:
                    yield from _leaves(item, "", depth + 1)


def parse_record(text: str) -> dict[str, Any] | None:
    """The JSON object a context is, or None for any other text (or one too big to read)."""
    stripped = text.strip()
    if not stripped.startswith("{") or len(stripped) > _MAX_RECORD_CHARS:
        return None
    try:
        obj = json.loads(stripped)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def record_flags(
    record: dict[str, Any], words_of: Callable[[str], Sequence[str]]
) -> tuple[RecordFlag, ...]:
    """The yes/no flags of a parsed JSON record (see ``parse_record``).

    ``words_of`` normalises a key into words the same way claims are normalised.
    """
    raw = [(key, [w for w in words_of(key) if w not in _WEAK_KEY_WORDS], parents, value)
           for key, parents, value in _leaves(record, "")]  # fmt: skip
    # A first word shared by several keys ("Restaurants...", "Business...") is a
    # namespace, not the fact: "RestaurantsReservations" is about reservations.
    firsts = Counter(words[0] for _, words, _, _ in raw if len(words) > 1)
    flags = []
    for key, words, parents, value in raw:
        if len(words) > 1 and firsts[words[0]] > 1:
            words = words[1:]
        if not words:
            continue
        parent_words = frozenset(words_of(parents)) if parents else frozenset()
        flags.append(RecordFlag(key, tuple(words), "".join(words), parent_words, value))
    return tuple(flags)


def _negated_at(claim: str, position: int) -> bool:
    """Whether a negation in the clause around ``position`` reaches it.

    The clause ends at a contrast ("no WiFi, but it takes reservations"). Inside it a
    negation before the word reaches it across a list ("no garage or street parking")
    but not across "and", which starts another statement ("casual and not trendy",
    "doesn't offer WiFi and has street parking"); a negation after the word reaches it
    when nothing but a few words stand between ("WiFi is not offered").
    """
    start = 0
    for match in _CONTRAST.finditer(claim, 0, position):
        start = match.end()
    following = _CONTRAST.search(claim, position)
    end = following.start() if following is not None else len(claim)
    before = None
    for match in _NEGATION.finditer(claim, start, position):
        before = match
    if before is not None and not _AND.search(claim, before.end(), position):
        return True
    after = _NEGATION.search(claim, position, end)
    if after is None:
        return False
    between = claim[position : after.start()]
    return not _AND.search(between) and len(_WORDS.findall(between)) <= _NEGATION_AFTER_WORDS


def flag_mentions(
    claim: str,
    claim_words: Sequence[tuple[str, int]],
    flags: Sequence[RecordFlag],
) -> list[FlagMention]:
    """The flags ``claim`` speaks of, each with the claim's polarity where it names it.

    ``claim_words`` are the claim's normalised words with their offsets in ``claim``.
    """
    if not flags or not claim_words:
        return []
    first_at: dict[str, int] = {}
    for word, offset in claim_words:
        first_at.setdefault(word, offset)
    squashed = _LETTERS.sub("", claim.lower())
    mentions = []
    for flag in flags:
        # The key's words run together are the more specific match ("takeout" is
        # about "TakeOut", while "take" alone may belong to "take reservations").
        position = -1
        if len(flag.squashed) >= _MIN_SQUASHED and flag.squashed in squashed:
            position = _squashed_offset(claim, flag.squashed)
        elif all(w in first_at for w in flag.words):
            position = max(first_at[w] for w in flag.words)
        if position < 0:
            continue
        lowercase = claim[position : position + 1].islower()
        standalone = len(flag.squashed) >= _MIN_STANDALONE_LEAF and lowercase
        if flag.parents and not standalone and not flag.parents & first_at.keys():
            continue
        mentions.append(FlagMention(flag, _negated_at(claim, position)))
    return mentions


def _squashed_offset(claim: str, squashed: str) -> int:
    """Offset in ``claim`` of the letter where ``squashed`` starts in its squashed form."""
    letters = [(i, c) for i, c in enumerate(claim.lower()) if "a" <= c <= "z"]
    text = "".join(c for _, c in letters)
    at = text.find(squashed)
    return letters[at][0] if at >= 0 else -1
