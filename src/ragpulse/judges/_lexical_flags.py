"""Yes/no facts of structured contexts, and the claims that speak of them.

A structured context (see ``_lexical_structured``) states yes/no facts as values:
``"outdoor_seating": true``, ``Pets allowed: no``, ``"wifi": null``, a table cell
``yes``. An answer that paraphrases the data ("offers outdoor seating", "pets are not
allowed", "has no WiFi") names the fact by the words of its key, and its polarity must
agree with the value: ``true`` needs a positive statement, ``false`` a negated one,
and an unknown value says the data does not know, so any statement either way is not
found in it. Keys are read by their words whatever the schema; no key is special.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragpulse.judges._lexical_structured import Fact

__all__ = ["FlagMention", "RecordFlag", "flag_mentions", "record_flags"]

# A flag in a group named by one short word ("lot" in a group "parking") is only matched
# when a word of the group's key is in the claim too; longer words stand alone.
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


@dataclass(frozen=True, slots=True)
class RecordFlag:
    """One yes/no (or unknown) fact of a structured context."""

    key: str
    """The key as written in the context."""
    words: tuple[str, ...]
    """Normalised content words of the key that name the fact."""
    squashed: str
    """Those words' letters run together, to match "takeout" against "TakeOut"."""
    parents: frozenset[str]
    """Normalised words of the flag group's key, if the flag is in a group of flags."""
    value: bool | None
    fact: Fact
    """Where the context states it."""
    context_index: int = 0


@dataclass(frozen=True, slots=True)
class FlagMention:
    """A flag a claim speaks of, and whether the claim says it the data's way."""

    flag: RecordFlag
    negated: bool

    @property
    def agrees(self) -> bool | None:
        """True or False against a yes/no value; None when the data leaves it unknown."""
        if self.flag.value is None:
            return None
        return self.flag.value != self.negated


def record_flags(
    facts: Sequence[Fact], words_of: Callable[[str], Sequence[str]], context_index: int = 0
) -> tuple[RecordFlag, ...]:
    """The yes/no (and unknown) facts among ``facts``, named by the words of their keys.

    ``words_of`` normalises a key into words the same way claims are normalised. An
    unknown value counts as a yes/no fact only beside real yes/no values in its group;
    elsewhere (``"hours": null``) it is just a missing value.
    """
    raw = [
        (fact, list(words_of(fact.key)))
        for fact in facts
        if isinstance(fact.value, bool) or (fact.value is None and fact.beside_flags)
    ]
    # A first word shared by several keys ("Restaurants...", "Business...") is a
    # namespace, not the fact: "RestaurantsReservations" is about reservations.
    firsts = Counter(words[0] for _, words in raw if len(words) > 1)
    flags = []
    for fact, words in raw:
        if len(words) > 1 and firsts[words[0]] > 1:
            words = words[1:]
        if not words:
            continue
        value = fact.value if isinstance(fact.value, bool) else None
        parents = fact.path[-2] if fact.group and len(fact.path) > 1 else ""
        parent_words = frozenset(words_of(parents)) if parents else frozenset()
        flags.append(
            RecordFlag(
                fact.key, tuple(words), "".join(words), parent_words, value, fact, context_index
            )
        )
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
    A flag is named by all the words of its key, or, for a compound key of three or
    more words, by all but the first (often a namespace: "storeAcceptsCards").
    """
    if not flags or not claim_words:
        return []
    first_at: dict[str, int] = {}
    for word, offset in claim_words:
        first_at.setdefault(word, offset)
    # Letters of the claim run together, each mapped back to its offset in the claim.
    letters = [i for i, c in enumerate(claim.lower()) if "a" <= c <= "z"]
    squashed = "".join(claim[i].lower() for i in letters)
    mentions = []
    for flag in flags:
        # The key's words run together are the more specific match ("takeout" is
        # about "TakeOut", while "take" alone may belong to "take reservations").
        position = -1
        if len(flag.squashed) >= _MIN_SQUASHED and (at := squashed.find(flag.squashed)) >= 0:
            position = letters[at]
        elif all(w in first_at for w in flag.words):
            position = max(first_at[w] for w in flag.words)
        elif len(flag.words) >= 3 and all(w in first_at for w in flag.words[1:]):
            position = max(first_at[w] for w in flag.words[1:])
        if position < 0:
            continue
        lowercase = claim[position : position + 1].islower()
        standalone = len(flag.squashed) >= _MIN_STANDALONE_LEAF and lowercase
        if flag.parents and not standalone and not flag.parents & first_at.keys():
            continue
        mentions.append(FlagMention(flag, _negated_at(claim, position)))
    return mentions
