"""One alignment per claim: everything the lexical judge's rules read, computed once.

A claim's content tokens are weighted (numbers and names twice: they must match
exactly), the window of ``window_factor`` times the claim's length that holds the most
weight is found in each context with two pointers over the hit positions, and the best
one is kept. The shares the rules compare with the judge's thresholds, the numbers stated
far from that window, the flags the claim names and the evidence cut from the window are
derived from it, each at most once.

The alignment's ``confidence`` is how much of the claim's rare content the best window
holds: each content token weighs its rarity in the record's contexts (a word they never
use weighs most, one they repeat everywhere little), numbers and names twice.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from rapidfuzz import fuzz

from ragpulse.evaluation.types import Claim, ClaimVerdict, Context, Evidence, Verdict
from ragpulse.judges.lexical._checkable import CheckableClaim, IndexedContext, question_words
from ragpulse.judges.lexical._flags import (
    FlagIndex,
    FlagMention,
    flag_mentions,
    index_flags,
    record_flags,
)
from ragpulse.judges.lexical._structured import Fact, read_facts
from ragpulse.judges.lexical._tokens import (
    Token,
    duration_norm,
    is_duration_unit,
    key_words,
    tokenize,
)

if TYPE_CHECKING:
    from ragpulse.judges.lexical._thresholds import AlignmentThresholds

__all__ = [
    "NO_FACTS",
    "ClaimAlignment",
    "RecordFacts",
    "Window",
    "ranges_of",
    "record_facts",
    "verdict",
]

# Claims longer than this are not aligned character by character (see ``evidence``).
_MAX_ALIGNED_CHARS = 1_000
_MIN_ALIGNMENT_SCORE = 60
# Claim words either side of an unstated word that are flagged with it: what the
# contexts do not state is a phrase ("an average rating of 4.5 stars"), not one token.
_PHRASE_REACH = 2
# Punctuation that closes a clause, and how far (in characters) a flagged phrase is
# extended to reach it: the unstated phrase is the clause it sits in, when that is short.
_CLAUSE_MARKS = ',;:()"—'
_CLAUSE_SLACK = 40
# Share of a context's characters its facts must cover for it to count as data.
_DATA_SHARE = 0.5


@dataclass(slots=True)
class Window:
    """The span of one context that holds the most of a claim's weight."""

    context: IndexedContext
    first: int
    last: int
    covered: frozenset[str]
    weight: float


@dataclass(frozen=True, slots=True)
class RecordFacts:
    """What a record states beside its prose, read once per record."""

    flags: FlagIndex
    """The yes/no facts of its structured contexts."""
    structured: bool
    """Whether a context is mostly data (answers summarise it loosely)."""
    asked: frozenset[str]
    """The normalised words of the user's question."""


NO_FACTS = RecordFacts(index_flags(()), False, frozenset())


@dataclass
class ClaimAlignment:
    """A claim, the contexts it is judged against, and its best window in them."""

    checkable: CheckableClaim
    indexed: Sequence[IndexedContext]
    contexts: Sequence[Context]
    judge: AlignmentThresholds
    facts: RecordFacts = NO_FACTS
    one_value: bool = False
    """Against a reference: a differing value contradicts only as the claim's one difference."""
    align: bool = True
    """Whether the evidence is aligned character by character (bounded per answer)."""
    weights: dict[str, float] = field(init=False)
    keys: set[str] = field(init=False)
    best: Window | None = field(init=False)

    def __post_init__(self) -> None:
        self.weights = {t.norm: 2.0 if t.key else 1.0 for t in self.checkable.tokens}
        self.keys = {t.norm for t in self.checkable.tokens if t.key}
        self.best = None
        for ctx in self.indexed:
            window = self._best_window(ctx)
            if window is not None and (self.best is None or window.weight > self.best.weight):
                self.best = window

    # --- what the rules compare --------------------------------------------------------

    @property
    def claim(self) -> Claim:
        return self.checkable.claim

    @property
    def tokens(self) -> list[Token]:
        return self.checkable.tokens

    @cached_property
    def said(self) -> list[Token]:
        """All the claim's tokens, stop words too (the sentence rules read its wording)."""
        return tokenize(self.claim.text, names=False)

    @property
    def record(self) -> bool:
        """Whether the contexts are data, whose values sit under keys, not in sentences."""
        return self.facts.structured

    @cached_property
    def total(self) -> float:
        return sum(self.weights.values())

    @cached_property
    def window_size(self) -> int:
        return max(self.judge.min_window_tokens, int(len(self.tokens) * self.judge.window_factor))

    @cached_property
    def in_contexts(self) -> frozenset[str]:
        return frozenset(n for n in self.weights if any(n in c.positions for c in self.indexed))

    @cached_property
    def everywhere(self) -> frozenset[str]:
        """Claim words the contexts state, and the question's ordinary words.

        Only a context vouches for a name or a number: a question's false premise ("Is
        the tower 500 metres tall?") must not make its echo in the answer faithful.
        """
        asked = self.facts.asked
        return self.in_contexts | {n for n in self.weights if n in asked and n not in self.keys}

    @cached_property
    def global_share(self) -> float:
        return sum(self.weights[n] for n in self.everywhere) / self.total

    @cached_property
    def missing_keys(self) -> set[str]:
        return self.keys - self.everywhere

    @property
    def window_share(self) -> float:
        return 0.0 if self.best is None else self.best.weight / self.total

    @property
    def window_missing_keys(self) -> set[str]:
        return set(self.keys) if self.best is None else self.keys - self.best.covered

    @cached_property
    def supported_window(self) -> bool:
        """One window holds nearly all of the claim's weight and all its numbers and names."""
        return (
            self.best is not None
            and self.window_share >= self.judge.supported_coverage
            and not self.window_missing_keys
        )

    @cached_property
    def inferable(self) -> bool:
        """The contexts together state the claim's words, one window a share of them."""
        coverage = (
            self.judge.record_inferred_coverage if self.record else self.judge.inferred_coverage
        )
        return (
            not self.missing_keys
            and self.global_share >= coverage
            and (self.record or self.window_share >= self.judge.span_coverage)
        )

    @cached_property
    def restating(self) -> bool:
        """Whether the claim restates a passage (the rules that read its sentence apply)."""
        return self.best is not None and (self.supported_window or self.inferable)

    @cached_property
    def mentions(self) -> list[FlagMention]:
        """The yes/no facts of the record the claim names, with its polarity for each."""
        words = [(t.norm, t.start) for t in self.tokens]
        return flag_mentions(self.claim.text, words, self.facts.flags)

    @cached_property
    def confidence(self) -> float:
        """Share of the claim's rare content the best window holds (0-1)."""
        counts = {n: sum(len(c.positions.get(n, ())) for c in self.indexed) for n in self.weights}
        size = sum(len(c.tokens) for c in self.indexed) + 1
        rarity = {n: w * math.log(1 + size / (1 + counts[n])) for n, w in self.weights.items()}
        total = sum(rarity.values())
        if self.best is None or total <= 0:
            return 0.0
        # Summed in claim order and rounded: equal shares stay equal whatever the hashing.
        held = sum(rarity[n] for n in self.weights if n in self.best.covered)
        return round(held / total, 9)

    @cached_property
    def evidence(self) -> Evidence | None:
        """The best window, tightened to what the claim says by character alignment."""
        if self.best is None:
            return None
        tokens, text = self.best.context.tokens, self.best.context.context.text
        start, end = tokens[self.best.first].start, tokens[self.best.last].end
        region = text[start:end]
        # The alignment costs claim length times region length: past a sentence's length
        # the window is the evidence as it is (keeps the judge linear in its input).
        claim = self.claim.text
        fits = len(claim) <= _MAX_ALIGNED_CHARS and len(region) <= 2 * _MAX_ALIGNED_CHARS
        if self.align and fits:
            aligned = fuzz.partial_ratio_alignment(_lower(claim), _lower(region))
            if (
                aligned is not None
                and aligned.score >= _MIN_ALIGNMENT_SCORE
                and aligned.dest_end > aligned.dest_start
            ):
                a_start, a_end = _to_word_bounds(
                    text, start + aligned.dest_start, start + aligned.dest_end
                )
                if a_end - a_start >= (end - start) // 2:
                    start, end = a_start, a_end
        # Cut from the context itself, so it verifies by construction.
        return self.span(self.best.context.index, start, end)

    def span(self, index: int, start: int, end: int) -> Evidence | None:
        """Evidence cut from context ``index`` (so it verifies by construction)."""
        if not 0 <= index < len(self.contexts):
            return None
        context = self.contexts[index]
        if not 0 <= start < end <= len(context.text):
            return None
        return Evidence(index, start, end, context.text[start:end], context.id)

    def ranges(self, norms: Collection[str]) -> tuple[tuple[int, int], ...]:
        """Answer ranges of the claim's words in ``norms``, with their phrases."""
        return ranges_of(self.checkable, norms)

    # --- the window --------------------------------------------------------------------

    def _best_window(self, ctx: IndexedContext) -> Window | None:
        hits: list[tuple[int, str]] = []
        for norm in self.weights:
            positions = ctx.positions.get(norm)
            if positions:
                hits.extend((p, norm) for p in positions[: self.judge.max_hits_per_token])
        if not hits:
            return None
        hits.sort()
        # Two pointers over hit positions: the window with the most distinct claim weight.
        counts: dict[str, int] = {}
        weight, best_weight, best_range, left = 0.0, -1.0, (0, 0), 0
        for right, (pos, norm) in enumerate(hits):
            if counts.get(norm, 0) == 0:
                weight += self.weights[norm]
            counts[norm] = counts.get(norm, 0) + 1
            while pos - hits[left][0] >= self.window_size:
                left_norm = hits[left][1]
                counts[left_norm] -= 1
                if counts[left_norm] == 0:
                    weight -= self.weights[left_norm]
                left += 1
            if weight > best_weight:
                best_weight, best_range = weight, (left, right)
        first, last = best_range
        covered = frozenset(norm for _, norm in hits[first : last + 1])
        return Window(ctx, hits[first][0], hits[last][0], covered, best_weight)


def record_facts(question: str | None, indexed: Sequence[IndexedContext]) -> RecordFacts:
    """A record's structured facts, read once: yes/no values, and whether a context
    is mostly data (answers summarise data loosely, so INFERRED needs less coverage).

    A number under a key that names its unit of time (``"battery_hours": 12``, a column
    "Wait (minutes)") is indexed as that duration too, as the prose "12 hours" would be.
    """
    facts = [read_facts(c.context.text) for c in indexed]
    flags = index_flags(
        [f for i, found in enumerate(facts) for f in record_flags(found, key_words, i)]
    )
    for ctx, found in zip(indexed, facts, strict=True):
        starts = [t.start for t in ctx.tokens]
        for fact in found:
            if not isinstance(fact.value, str):
                continue
            values = [t.norm for t in tokenize(fact.value, names=False) if t.number]
            words = key_words(fact.key)
            plain = len(values) == 1 and values[0].replace(".", "", 1).isdecimal()
            if plain and words and is_duration_unit(words[-1]):
                at = bisect_left(starts, fact.end - len(fact.value))
                if at < len(ctx.tokens):
                    norm = duration_norm(float(values[0]), words[-1])
                    ctx.positions.setdefault(norm, []).append(at)
    structured = any(
        _mostly_facts(found, c.context.text) for found, c in zip(facts, indexed, strict=True)
    )
    return RecordFacts(flags, structured, question_words(question))


def _mostly_facts(facts: Sequence[Fact], text: str) -> bool:
    covered = sum(f.end - f.start for f in facts)
    return bool(text) and covered >= _DATA_SHARE * len(text.strip())


def verdict(
    alignment: ClaimAlignment,
    kind: Verdict,
    reason: str,
    evidence: Evidence | None = None,
    unsupported: tuple[tuple[int, int], ...] = (),
) -> ClaimVerdict:
    """``kind`` on the claim, with ``evidence`` as its span and quote, and its confidence."""
    confidence = alignment.confidence
    sure = 1.0 - confidence if kind is Verdict.NOT_FOUND else confidence
    return ClaimVerdict(
        alignment.claim,
        kind,
        evidence=evidence,
        quote=evidence.text if evidence else None,
        reason=reason,
        unsupported=unsupported,
        confidence=sure,
    )


def ranges_of(
    checkable: CheckableClaim, norms: Collection[str], reach: int = _PHRASE_REACH
) -> tuple[tuple[int, int], ...]:
    """Answer ranges of the claim's words in ``norms``, each with its phrase around it.

    The phrase is the word and ``reach`` content words either side, extended to the
    clause they sit in when its punctuation is near ("with an average rating of 4.5
    stars").
    """
    claim, tokens = checkable.claim, checkable.tokens
    if claim.answer_start is None or not norms:
        return ()
    ranges: list[tuple[int, int]] = []
    for i, token in enumerate(tokens):
        if token.norm not in norms:
            continue
        first = tokens[max(0, i - reach)].start
        last = tokens[min(len(tokens) - 1, i + reach)].end
        first, last = _to_clause(claim.text, first, last)
        start, end = claim.answer_start + first, claim.answer_start + last
        if ranges and start <= ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], max(end, ranges[-1][1]))
        else:
            ranges.append((start, end))
    return tuple(ranges)


def _to_clause(text: str, first: int, last: int) -> tuple[int, int]:
    """``text[first:last]`` extended to its clause's punctuation where that is near."""
    lo, hi = max(0, first - _CLAUSE_SLACK - 1), last + _CLAUSE_SLACK + 1
    opening = max(text.rfind(mark, lo, first) for mark in _CLAUSE_MARKS)
    if opening >= 0:
        first = opening + 1
    elif first <= _CLAUSE_SLACK:
        first = 0
    closing = [at for at in (text.find(mark, last, hi) for mark in _CLAUSE_MARKS) if at >= 0]
    if closing:
        last = min(closing)
    elif len(text) - last <= _CLAUSE_SLACK:
        last = len(text)
    while first < last and not text[first].isalnum():
        first += 1
    while last > first and not (text[last - 1].isalnum() or text[last - 1] in "%)"):
        last -= 1
    return first, last


def _lower(text: str) -> str:
    """``text`` in lower case, character for character: offsets into it are offsets into
    ``text`` ("İ".lower() is two characters; such a character is left as it is)."""
    lowered = text.lower()
    if len(lowered) == len(text):  # lowering never shortens: each character stayed one
        return lowered
    return "".join(c if len(low := c.lower()) != 1 else low for c in text)


def _to_word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and text[start - 1].isalnum() and text[start].isalnum():
        start -= 1
    while end < len(text) and text[end - 1].isalnum() and text[end].isalnum():
        end += 1
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
