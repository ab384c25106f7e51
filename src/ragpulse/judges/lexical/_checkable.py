"""What the lexical judge checks: indexed contexts, and the answer's checkable claims.

Contexts are tokenised once and indexed by normalised word (and by the acronyms they
write or imply). An answer's claims are its sentences and clauses that state something
(not lead-ins, not talk about the sources, not advice), each as its content tokens with
cited passage numbers and part labels left out; names and counts the contexts write in
another form (a derived name, an acronym, "seven days a week") are then rewritten to the
contexts' form so that alignment can find them.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from ragpulse.evaluation.claims import split_claims
from ragpulse.evaluation.types import Claim, Context
from ragpulse.judges.lexical._forms import acronyms, label_end
from ragpulse.judges.lexical._meta import is_meta
from ragpulse.judges.lexical._tokens import Token, duration_norm, is_content, tokenize

__all__ = [
    "CheckableClaim",
    "IndexedContext",
    "align_name_forms",
    "align_surface_forms",
    "checkable_claims",
    "index_context",
    "premise_of",
    "question_words",
]

_LEAD_IN_END = re.compile(r":\s*$")
_ACRONYM = "acr:"
"""Index entries of acronyms ("acr:us"), apart from the words of the text."""
# "(Passage 2)", "as passage 1 states", "Documents 1 and 3": which source a claim cites is
# not a fact about the world, and its number is in no context.
_SOURCE_CITATION = re.compile(
    r"\b(?:passage|document|doc|context|source|reference|snippet|excerpt|chunk|result)s?"
    r"\s*(?:#|no\.?\s*)?\[?\d+\]?(?:\s*(?:,|and|&|or|-|–)\s*\[?\d+\]?)*",
    re.IGNORECASE,
)
# "N days a week", and the names of weekdays (full, plural or abbreviated) a context lists.
_DAYS_A_WEEK = re.compile(r"\b(\w+)\s+days\s+(?:a|per|each|every)\s+week\b", re.IGNORECASE)
_DAY_WORD = re.compile(
    r"\b(?:(?i:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?|"
    r"(?:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)\b\.?)"
)
_DAY_PREFIX = tuple(name[:3].lower() for name in calendar.day_name)  # English in every locale
# "[1]", "[1][3]", "[1, 3]": citation markers number passages, not facts.
_BRACKET_CITATION = re.compile(r"\[\s*\d{1,4}(?:\s*,\s*\d{1,4})*\s*\]")


@dataclass(slots=True)
class IndexedContext:
    index: int
    context: Context
    tokens: list[Token]
    positions: dict[str, list[int]]


def index_context(index: int, context: Context, max_chars: int) -> IndexedContext:
    text = context.text[:max_chars]
    tokens = tokenize(text, names=False)
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(tokens):
        positions.setdefault(token.norm, []).append(i)
    if tokens:
        starts = [t.start for t in tokens]
        for acronym in acronyms(text):
            at = bisect_left(starts, acronym.start)
            if at < len(tokens):
                positions.setdefault(_ACRONYM + acronym.letters, []).append(at)
    return IndexedContext(index, context, tokens, positions)


def premise_of(question: str | None, max_chars: int, index: int = 1) -> IndexedContext | None:
    """The question as a passage of its words (at ``index`` among the passages): names and
    ordinary words, no numbers (only the other side vouches for a number)."""
    if not question or not question.strip():
        return None
    indexed = index_context(index, Context(question, id="question"), max_chars)
    for norm in {t.norm for t in indexed.tokens if t.number}:
        indexed.positions.pop(norm, None)
    return indexed


def question_words(question: str | None) -> frozenset[str]:
    """Normalised words and acronyms of the user's question."""
    if not question:
        return frozenset()
    words = {t.norm for t in tokenize(question, names=False)}
    words.update(_ACRONYM + a.letters for a in acronyms(question))
    return frozenset(words)


def _inside(token: Token, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(start <= token.start and token.end <= end for start, end in ranges)


def _is_lead_in(claim: Claim) -> bool:
    """A line introducing what follows ("Here is the summary:") states nothing itself."""
    return bool(_LEAD_IN_END.search(claim.text))


@dataclass(frozen=True, slots=True)
class CheckableClaim:
    claim: Claim
    tokens: list[Token]
    """Content tokens (stop words and negations dropped)."""
    negated: bool


def checkable_claims(text: str) -> list[CheckableClaim]:
    """The text's claims that state something.

    Not lead-ins, not talk about the conversation or the sources, not content-free fragments.
    """
    checkable = []
    for claim in split_claims(text):
        if _is_lead_in(claim) or is_meta(claim.text):
            continue
        all_tokens = tokenize(claim.text, names=True)
        cited = [m.span() for m in _SOURCE_CITATION.finditer(claim.text)]
        cited.extend(m.span() for m in _BRACKET_CITATION.finditer(claim.text))
        if label := label_end(claim.text):
            cited.append((0, label))
        tokens = [t for t in all_tokens if is_content(t) and not (cited and _inside(t, cited))]
        if tokens:
            negated = any(t.norm == "not" for t in all_tokens)
            checkable.append(CheckableClaim(claim, tokens, negated))
    return checkable


# Names are compared by their derived forms from this many letters ("Venezuelan" for
# "Venezuela", "Americans" for "America"); shorter names must match exactly.
_NAME_PREFIX = 5
_NAME_SUFFIX_SLACK = 3


def align_name_forms(
    claims: list[CheckableClaim], indexed: Sequence[IndexedContext]
) -> list[CheckableClaim]:
    """The claims, with names the contexts spell in a derived form rewritten to that form."""
    missing = {
        t.norm
        for c in claims
        for t in c.tokens
        if t.key and not t.number and len(t.norm) >= _NAME_PREFIX
        and not any(t.norm in ctx.positions for ctx in indexed)
    }  # fmt: skip
    if not missing:
        return claims
    by_prefix: dict[str, list[str]] = {}
    for ctx in indexed:
        for norm in ctx.positions:
            if len(norm) >= _NAME_PREFIX and norm[0].isalpha():
                by_prefix.setdefault(norm[:_NAME_PREFIX], []).append(norm)
    aliases: dict[str, str] = {}
    for name in missing:
        for candidate in sorted(by_prefix.get(name[:_NAME_PREFIX], ())):
            longer, shorter = (candidate, name) if len(candidate) > len(name) else (name, candidate)
            if longer.startswith(shorter) and len(longer) - len(shorter) <= _NAME_SUFFIX_SLACK:
                aliases[name] = candidate
                break
    if not aliases:
        return claims
    # Only the claims that hold an aliased name are rebuilt.
    return [
        CheckableClaim(
            c.claim,
            [t._replace(norm=aliases.get(t.norm, t.norm)) for t in c.tokens],
            c.negated,
        )
        if any(t.norm in aliases for t in c.tokens)
        else c
        for c in claims
    ]


def align_surface_forms(
    claims: list[CheckableClaim], indexed: Sequence[IndexedContext]
) -> list[CheckableClaim]:
    """The claims, with acronyms and week-day counts the contexts state otherwise resolved.

    A name the contexts lack is found when they write its acronym ("United States" for
    "U.S."), and an acronym when they spell it out; "seven days a week" is found when
    the contexts name seven days.
    """
    known = set().union(*(ctx.positions for ctx in indexed)) if indexed else set()
    weekdays: int | None = None
    aligned = []
    for checkable in claims:
        text = checkable.claim.text
        tokens = list(checkable.tokens)
        changed = False
        if any(t.key and t.norm not in known for t in tokens):
            for acronym in acronyms(text):
                entry = _ACRONYM + acronym.letters
                inside = [i for i, t in enumerate(tokens) if acronym.start <= t.start < acronym.end]
                if entry not in known or not any(
                    tokens[i].key and tokens[i].norm not in known for i in inside
                ):
                    continue
                for i in inside:
                    tokens[i] = tokens[i]._replace(norm=entry)
                changed = True
        for match in _DAYS_A_WEEK.finditer(text):
            start, end = match.span(1)
            if weekdays is None:
                weekdays = len(
                    {
                        _DAY_PREFIX.index(m.group()[:3].lower())
                        for ctx in indexed
                        for m in _DAY_WORD.finditer(ctx.context.text)
                    }
                )
            named = (str(weekdays), duration_norm(weekdays, "day"))
            kept = [t for t in tokens if not (start <= t.start < end and t.norm in named)]
            changed = changed or len(kept) != len(tokens)
            tokens = kept
        if changed and tokens:
            checkable = CheckableClaim(checkable.claim, tokens, checkable.negated)
        aligned.append(checkable)
    return aligned


def focus_words(text: str) -> frozenset[str]:
    """Normalised content words of a question part (no question words, no stop words).

    The word after "how" asks for a kind of value ("how long", "how much", "how often"):
    it is the question's form, answered by a value, not a word the answer repeats.
    """
    tokens = tokenize(text, names=False)
    asked = {i + 1 for i, t in enumerate(tokens) if t.norm == "how"}
    return frozenset(t.norm for i, t in enumerate(tokens) if is_content(t) and i not in asked)
