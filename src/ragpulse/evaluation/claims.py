"""Claims: split an answer into atomic statements, each with its range in the answer.

The splitter is rule-based and deterministic: lines, then sentences (aware of
abbreviations, initials and decimal numbers), then coordinated clauses joined by
", and", ", but", ";" and the like when both sides are long enough to stand alone.
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz

from ragpulse.evaluation.evidence import locate
from ragpulse.evaluation.types import Claim

__all__ = ["anchor", "split_claims"]

# A clause shorter than this (in words) is kept with its neighbour: "A, and B" where B is
# one or two words is a list item, not a claim of its own.
MIN_CLAUSE_WORDS = 4

# Fuzzy anchoring below this partial-ratio score (0-100) leaves the claim unanchored.
MIN_ANCHOR_SCORE = 75.0

_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "inc", "ltd",
        "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
        "nov", "dec", "no", "vol", "fig", "approx", "dept", "est", "gen", "gov", "sen", "rep",
        "e.g", "i.e", "u.s", "u.k", "a.m", "p.m", "al",
    }
)  # fmt: skip

# Candidate sentence ends: terminal punctuation (optionally closed by a quote or bracket)
# followed by whitespace.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)")
_WORD_BEFORE = re.compile(r"([\w.]+)$")
_NON_SPACE = re.compile(r"\S")
_LONGEST_WORD = 64
_LINE = re.compile(r"[^\n]+")
# Leading list markers and whitespace that are not part of the claim's text.
_LEADING_NOISE = re.compile(r"(?:[\s*•·#>]|-(?=\s))*(?:\(?\d{1,3}[.)]\s+|\(?[a-z][.)]\s+)?\s*")
_LEADING_SPACE = re.compile(r"(?:[\s*•·#>]|-(?=\s))*")
# The conjunction itself is not part of either claim; "which" stays, it names the subject.
_CLAUSE_BREAK = re.compile(
    r";\s+|,\s+(?:(?:and|but|while|whereas|although|though|yet|so)\s+|(?=which\s))",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")


def _is_sentence_end(text: str, end: int) -> bool:
    """Whether the punctuation ending at ``end`` closes a sentence."""
    punct_start = end
    while punct_start > 0 and text[punct_start - 1] in ".!?\"'”’)]":
        punct_start -= 1
    if "." not in text[punct_start:end] or any(c in "!?" for c in text[punct_start:end]):
        return True
    # Only the word just before matters; searching from the text's start would make
    # splitting a one-line answer of many sentences quadratic.
    word_match = _WORD_BEFORE.search(text, max(0, punct_start - _LONGEST_WORD), punct_start)
    word = word_match.group(1).lower().rstrip(".") if word_match else ""
    if word in _ABBREVIATIONS:
        return False
    # A single capital initial ("J. K. Rowling") does not end a sentence.
    if len(word) == 1 and word.isalpha() and text[punct_start - 1].isupper():
        return False
    # The next sentence starts with a letter that is not lowercase, a digit or a quote.
    # (Searched in place: slicing the rest of the text at every full stop is quadratic.)
    following = _NON_SPACE.search(text, end)
    return following is None or not following.group().islower()


def _sentences(text: str, offset: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if _is_sentence_end(text, match.end()):
            spans.append((offset + start, offset + match.end()))
            start = match.end()
    spans.append((offset + start, offset + len(text)))
    return spans


def _clauses(answer: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split one sentence at coordinating breaks whose both sides stand alone."""
    pieces: list[tuple[int, int]] = []
    piece_start = start
    for match in _CLAUSE_BREAK.finditer(answer, start, end):
        left_words = len(_WORD.findall(answer, piece_start, match.start()))
        right_words = len(_WORD.findall(answer, match.end(), end))
        if left_words >= MIN_CLAUSE_WORDS and right_words >= MIN_CLAUSE_WORDS:
            pieces.append((piece_start, match.start()))
            piece_start = match.end()
    pieces.append((piece_start, end))
    return pieces


def _trim(answer: str, start: int, end: int) -> tuple[int, int]:
    lead = _LEADING_SPACE.match(answer, start, end)
    if lead is not None:
        start = lead.end()
    while end > start and answer[end - 1].isspace():
        end -= 1
    return start, end


def split_claims(answer: str) -> list[Claim]:
    """Sentence and coordinated-clause claims with their answer offsets."""
    if not answer:
        return []
    claims: list[Claim] = []
    for line in _LINE.finditer(answer):
        # List markers ("- ", "2. ", "b) ") would otherwise read as one-word sentences.
        noise = _LEADING_NOISE.match(answer, line.start(), line.end())
        body_start = noise.end() if noise is not None else line.start()
        for sent_start, sent_end in _sentences(answer[body_start : line.end()], body_start):
            for clause_start, clause_end in _clauses(answer, sent_start, sent_end):
                start, end = _trim(answer, clause_start, clause_end)
                if end > start and _WORD.search(answer, start, end):
                    claims.append(Claim(answer[start:end], start, end))
    return claims


def anchor(claim_text: str, answer: str) -> Claim:
    """A Claim for a judge-written claim text, with answer offsets where it maps to a range.

    An exact (whitespace- and case-folded) occurrence wins; otherwise the best fuzzy
    alignment is used when it is close enough; otherwise the claim has no offsets.
    """
    text = claim_text.strip()
    if not text or not answer:
        return Claim(text)
    found = locate(text, answer)
    if found is not None:
        return Claim(text, found[0], found[1])
    alignment = fuzz.partial_ratio_alignment(
        text.lower(), answer.lower(), score_cutoff=MIN_ANCHOR_SCORE
    )
    if alignment is None:
        return Claim(text)
    # rapidfuzz reports ranges of its first argument as src and of the second as dest.
    start, end = alignment.dest_start, alignment.dest_end
    start, end = _trim(answer, start, end)
    if end <= start:
        return Claim(text)
    return Claim(text, start, end)
