"""Surface forms that say the same thing in fewer words, read from plain text.

- Acronyms: "United States", "U.S." and "US" name one thing; so do "National Insurance
  Contributions" and "NICs". Every text yields the letters of its all-capital words,
  its dotted abbreviations and the initials of its runs of capitalised words, so that
  a claim's name can be matched to a context's acronym and the other way round.
- Labels: "Step 6:" or "Question 2:" number the answer's own parts, not facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

__all__ = ["Acronym", "acronyms", "label_end"]

_MIN_LETTERS = 2
_MAX_LETTERS = 6
# An all-capital word, optionally plural ("NICs", "CEOs").
_CAPS_WORD = re.compile(r"\b([A-Z][A-Za-z]?[A-Z]{0,5})(s?)\b")
_DOTTED = re.compile(r"\b((?:[A-Z]\.){2,6})")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")
# Small words a name may have inside ("Bureau of Labor Statistics" is BLS).
_NAME_JOINERS = frozenset({"of", "for", "and", "the", "on", "de"})
_JOINER_OR_NAME = re.compile(r"\s+(?:(of|for|and|the|on|de)\s+)?([A-Z][a-z]+)\b")
# A capitalised word that opens a sentence is no part of a name's initials.
_NOT_INITIAL = frozenset(
    {"the", "a", "an", "this", "that", "these", "those", "in", "on", "at", "for", "and",
     "but", "it", "its", "he", "she", "they", "we", "i", "as", "after", "before", "when"}
)  # fmt: skip

_DEFINED = re.compile(
    r"\b((?:[A-Z][\w'-]*\s+(?:(?:of|for|and|the|on|de)\s+)?){1,8}[A-Z][\w'-]*)\s*"
    r"\(([A-Z][A-Za-z]{1,7}?)s?\)"
)
_LABEL = re.compile(r"^[A-Za-z]+\s+\d{1,3}\s*:")


class Acronym(NamedTuple):
    letters: str
    """Lowercase letters of the acronym ("us", "nic")."""
    start: int
    end: int


def acronyms(text: str) -> Iterator[Acronym]:
    """Every acronym ``text`` writes, and every one its capitalised runs would make."""
    for match in _CAPS_WORD.finditer(text):
        letters = match.group(1)
        if _MIN_LETTERS <= len(letters) <= _MAX_LETTERS and sum(c.isupper() for c in letters) > 1:
            yield Acronym(letters.lower(), match.start(), match.end())
    for match in _DOTTED.finditer(text):
        letters = match.group(1).replace(".", "").lower()
        yield Acronym(letters, match.start(), match.end())
    yield from _runs(text)
    # "Centers for Disease Control and Prevention (CDC)": the text defines the acronym,
    # whatever letters it takes from the name.
    for match in _DEFINED.finditer(text):
        yield Acronym(match.group(2).lower(), match.start(1), match.end(1))


def _runs(text: str) -> Iterator[Acronym]:
    position = 0
    while True:
        first = _CAPITALISED.search(text, position)
        if first is None:
            return
        position = first.end()
        if first.group().lower() in _NOT_INITIAL:
            continue
        initials = [first.group()[0].lower()]
        end = first.end()
        while True:
            following = _JOINER_OR_NAME.match(text, end)
            if following is None or following.group(2).lower() in _NAME_JOINERS:
                break
            initials.append(following.group(2)[0].lower())
            end = following.end()
        if _MIN_LETTERS <= len(initials) <= _MAX_LETTERS:
            yield Acronym("".join(initials), first.start(), end)
        position = end


def label_end(text: str) -> int:
    """End of a leading part label ("Step 6:", "Question 2:"), or 0 when there is none."""
    match = _LABEL.match(text)
    return match.end() if match is not None else 0
