"""Yes/no facts of structured contexts, and the claims that speak of them.

A structured context (see ``lexical._structured``) states yes/no facts as values:
``"outdoor_seating": true``, ``Pets allowed: no``, ``"wifi": null``, a table cell
``yes``. An answer that paraphrases the data ("offers outdoor seating", "pets are not
allowed", "has no WiFi", "TLS is disabled", "non-express") names the fact by the words of
its key, and its polarity must agree with the value: ``true`` needs a positive
statement, ``false`` a negated one, and an unknown value says the data does not know,
so any statement either way is not found in it. Keys are read by their words whatever
the schema; no key is special.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ragpulse.judges.lexical._structured import Fact

__all__ = ["FlagIndex", "FlagMention", "RecordFlag", "flag_mentions", "index_flags", "record_flags"]

# A flag in a group named by one short word ("lot" in a group "parking") is only matched
# when a word of the group's key is in the claim too; longer words stand alone.
_MIN_STANDALONE_LEAF = 5
# Keys run together ("TakeOut" as "takeout") are matched from this many letters.
_MIN_SQUASHED = 4
# Words that state the negative of a yes/no value: a negation, a prefix ("non-express"),
# or a word for "off" ("TLS is disabled", "is switched off").
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nor|without|lacks?|lacking|cannot|false|\w+n['’]t|non|"
    r"disabled|deactivated|inactive|unavailable|unsupported|"
    r"(?:is|are|be|been|turned|switched|set\s+to)\s+off)\b",
    re.IGNORECASE,
)
# A contrast ends the reach of a negation: "no WiFi, but it takes reservations".
_CONTRAST = re.compile(r"\b(?:but|however|while|whereas|although|though|yet)\b|[;,]", re.I)
_AND = re.compile(r"\band\b|&", re.IGNORECASE)
_WORDS = re.compile(r"\w+")
# "WiFi is not offered", "reservations are not really needed": the word, then a verb or
# two, then the negation.
_NEGATION_AFTER_WORDS = 5
_LETTERS = re.compile(r"[^a-z]+")
_CLAUSE_REACH = 300
# Keys run together are matched against runs of up to this many adjacent claim words.
_SQUASHED_WORDS = 4
_ALPHA_WORD = re.compile(r"[A-Za-z]+")
_KEY_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


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
        # The key as written, letters only ("TakeOut" is "takeout", stop words and all).
        parts = [p.lower() for p in _KEY_PART.findall(fact.key)]
        if len(words) > 1 and firsts[words[0]] > 1:
            words = words[1:]
            parts = parts[1:]
        if not any(not w.replace(".", "").isdigit() for w in words):
            continue  # a key of numbers alone ("2019") names no yes/no fact a claim states
        value = fact.value if isinstance(fact.value, bool) else None
        parents = fact.path[-2] if fact.group and len(fact.path) > 1 else ""
        parent_words = frozenset(words_of(parents)) if parents else frozenset()
        flags.append(
            RecordFlag(
                fact.key, tuple(words), "".join(parts), parent_words, value, fact, context_index
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
    # A clause is short: only this far either side is read (keeps long claims linear).
    start = max(0, position - _CLAUSE_REACH)
    for match in _CONTRAST.finditer(claim, start, position):
        start = match.end()
    following = _CONTRAST.search(claim, position, position + _CLAUSE_REACH)
    end = following.start() if following is not None else min(len(claim), position + _CLAUSE_REACH)
    before = None
    for match in _NEGATION.finditer(claim, start, position):
        before = match
    if before is not None and not _AND.search(claim, before.end(), position):
        return True
    after = _NEGATION.search(claim, position, end)
    if after is not None and after.start() == position:
        # The fact's own word ("disabled: true" named as "is disabled") is no negation.
        after = _NEGATION.search(claim, after.end(), end)
    if after is None:
        return False
    between = claim[position : after.start()]
    return not _AND.search(between) and len(_WORDS.findall(between)) <= _NEGATION_AFTER_WORDS


@dataclass(frozen=True, slots=True)
class FlagIndex:
    """The flags of a record, indexed by word and by squashed form (one lookup per claim word)."""

    flags: tuple[RecordFlag, ...]
    by_word: Mapping[str, tuple[RecordFlag, ...]]
    by_squashed: Mapping[str, tuple[RecordFlag, ...]]
    prefixes: frozenset[str]
    """Every prefix of a squashed key: a run of claim words that is none stops growing."""

    def __bool__(self) -> bool:
        return bool(self.flags)


def index_flags(flags: Sequence[RecordFlag]) -> FlagIndex:
    """The flags with the indexes ``flag_mentions`` looks them up by."""
    by_word: dict[str, list[RecordFlag]] = {}
    by_squashed: dict[str, list[RecordFlag]] = {}
    for flag in flags:
        for word in set(flag.words):
            by_word.setdefault(word, []).append(flag)
        if len(flag.squashed) >= _MIN_SQUASHED:
            by_squashed.setdefault(flag.squashed, []).append(flag)
    return FlagIndex(
        tuple(flags),
        {k: tuple(v) for k, v in by_word.items()},
        {k: tuple(v) for k, v in by_squashed.items()},
        frozenset(key[:i] for key in by_squashed for i in range(1, len(key) + 1)),
    )


def _squashed_runs(claim: str, prefixes: frozenset[str]) -> dict[str, int]:
    """Runs of up to ``_SQUASHED_WORDS`` adjacent words, letters only and run together
    ("take-out" and "Take Out" give "takeout"), with the offset where each starts.

    Only runs that begin some key are grown (``prefixes``), so a claim costs a lookup
    or two per word.
    """
    words = [(m.group().lower(), m.start()) for m in _ALPHA_WORD.finditer(claim)]
    runs: dict[str, int] = {}
    for i, (_, start) in enumerate(words):
        joined = ""
        for word, _ in words[i : i + _SQUASHED_WORDS]:
            joined += word
            runs.setdefault(joined, start)
            if joined.endswith("s"):
                runs.setdefault(joined[:-1], start)
            if joined not in prefixes:
                break
    return runs


def flag_mentions(
    claim: str,
    claim_words: Sequence[tuple[str, int]],
    index: FlagIndex,
) -> list[FlagMention]:
    """The flags ``claim`` speaks of, each with the claim's polarity where it names it.

    ``claim_words`` are the claim's normalised words with their offsets in ``claim``.
    A flag is named by its key's words run together ("takeout" for "TakeOut"), by all
    the words of its key, or, for a compound key of three or more words, by all but
    the first (often a namespace: "storeAcceptsCards"). The work is a few lookups per
    claim word, whatever the number of flags.
    """
    if not index.flags or not claim_words:
        return []
    first_at: dict[str, int] = {}
    for word, offset in claim_words:
        first_at.setdefault(word, offset)
    runs = _squashed_runs(claim, index.prefixes)
    squashed_at: dict[int, int] = {}
    candidates: dict[int, RecordFlag] = {}
    for run, start in runs.items():
        for flag in index.by_squashed.get(run, ()):
            squashed_at.setdefault(id(flag), start)
            candidates[id(flag)] = flag
    for word in first_at:
        for flag in index.by_word.get(word, ()):
            candidates[id(flag)] = flag
    mentions = []
    for key, flag in candidates.items():
        # The key's words run together are the more specific match ("takeout" is
        # about "TakeOut", while "take" alone may belong to "take reservations").
        position = squashed_at.get(key, -1)
        if position < 0 and all(w in first_at for w in flag.words):
            position = max(first_at[w] for w in flag.words)
        elif position < 0 and len(flag.words) >= 3 and all(w in first_at for w in flag.words[1:]):
            position = max(first_at[w] for w in flag.words[1:])
        if position < 0:
            continue
        lowercase = claim[position : position + 1].islower()
        standalone = len(flag.squashed) >= _MIN_STANDALONE_LEAF and lowercase
        if flag.parents and not standalone and not flag.parents & first_at.keys():
            continue
        mentions.append(FlagMention(flag, _negated_at(claim, position)))
    # In the order the record lists them, as before.
    order = {id(f): i for i, f in enumerate(index.flags)}
    mentions.sort(key=lambda m: order[id(m.flag)])
    return mentions
