"""Evidence first, then the model: the few passage sentences a claim is read against.

Reading every claim against every window of every passage costs a model judge most
of its time on windows that share nothing with the claim. A cheap first stage picks,
per claim, the sentences most likely to decide it: BM25 over the passages' sentences
(the claim splitter's units), the claim's words as the query. The best-ranked
sentences (``anchors``), each with the sentence before and after it for its
references ("It", "The company"), make one premise of at most ``budget`` tokens, in
passage order. The model then reads one (premise, claim) sequence per claim.

Where the first reading neither entails nor contradicts a claim, a second reading
takes the next anchors (a fact stated where the words differ most). A contradiction
found by the first reading stays in the decision, and a caller that knows a window
contradicting a claim (``must_read``: an earlier reading's evidence) gets it read in
the first premise, whatever BM25 ranks.

One claim needs no model at all: a copy (``SentenceIndex.copy_of``), whose words are, in order and
without a gap, all the words of one whole passage sentence (the same unit the claim
splitter cuts, so never a fragment lifted out of "X denied that ..." or "If ...").
The passage states it; the judge says SUPPORTED without a sequence. Nothing near a copy
counts: a word more, less or moved, and the model reads it.

BM25 is Robertson and Sparck Jones' ranking with the always-positive idf
``log(1 + (N - df + 0.5) / (df + 0.5))``, k1 = 1.2, b = 0.75; nothing is removed
from the query, so a claim always shares some word (``the``, ``is``) with a passage,
weighed by how rare it is there.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragpulse.judges.local._windows import sentences

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "ANCHORS",
    "EVIDENCE_TOKENS",
    "Premise",
    "SentenceIndex",
    "Span",
    "spans_in",
]

ANCHORS = 2
"""Best-ranked sentences per reading of a claim (each with its neighbours)."""
EVIDENCE_TOKENS = 128
"""Premise tokens of one reading: a few sentences, not the model's whole length."""
_K1, _B = 1.2, 0.75
_WORD = re.compile(r"\w+")

Span = tuple[int, int, int]
"""``(passage, start, end)``: a sentence of a passage."""


def check_evidence_options(anchors: int | None, tokens: int) -> None:
    """Refuse evidence options a judge cannot read with (``ValueError``)."""
    if (anchors is not None and anchors < 1) or tokens < 8:
        raise ValueError("evidence_anchors must be at least 1 (or None) and evidence_tokens 8")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


@dataclass(frozen=True, slots=True)
class Premise:
    """What one sequence reads: sentences of the passages, in passage order."""

    spans: tuple[Span, ...]

    def text(self, passages: Sequence[str]) -> str:
        """The sentences joined; a gap between them is a line break (they are not adjacent)."""
        parts: list[str] = []
        previous: Span | None = None
        for index, start, end in self.spans:
            if previous is not None:
                joined = previous[0] == index and previous[2] <= start
                gap = passages[index][previous[2] : start] if joined else ""
                parts.append(gap if joined and not gap.strip() else "\n")
            parts.append(passages[index][start:end])
            previous = (index, start, end)
        return "".join(parts)


class SentenceIndex:
    """The passages' sentences, their token counts, and BM25 over them."""

    def __init__(self, tokenizer: Tokenizer, passages: Sequence[str], budget: int) -> None:
        self.passages = passages
        self.budget = budget
        self.spans: list[Span] = []
        self._whole: dict[tuple[str, ...], Span] = {}
        """Each whole sentence by its words (the first of equal ones): what a copy matches."""
        for index, text in enumerate(passages):
            for start, end in sentences(text):
                self.spans.extend(_cut(tokenizer, index, text, start, end, budget))
                if "?" not in text[start:end]:
                    self._whole.setdefault(tuple(_words(text[start:end])), (index, start, end))
        texts = [passages[i][s:e] for i, s, e in self.spans]
        encoded = tokenizer.encode_batch(texts, add_special_tokens=False) if texts else []
        self.tokens = [len(e.ids) for e in encoded]
        self._terms = [Counter(_words(t)) for t in texts]
        self._lengths = [sum(c.values()) for c in self._terms]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        frequency: Counter[str] = Counter()
        for terms in self._terms:
            frequency.update(terms.keys())
        count = len(self._terms)
        self._idf = {
            w: math.log(1.0 + (count - df + 0.5) / (df + 0.5)) for w, df in frequency.items()
        }

    def rank(self, query: str) -> list[int]:
        """Sentence positions by BM25 score for ``query``, best first (ties: earlier first)."""
        words = Counter(_words(query))
        scores: list[tuple[float, int]] = []
        for position, terms in enumerate(self._terms):
            length = self._lengths[position]
            norm = _K1 * (1.0 - _B + _B * length / self._average) if self._average else _K1
            score = 0.0
            for word, times in words.items():
                tf = terms.get(word)
                if tf:
                    score += times * self._idf[word] * tf * (_K1 + 1.0) / (tf + norm)
            scores.append((score, position))
        scores.sort(key=lambda item: (-item[0], item[1]))
        return [position for score, position in scores if score > 0.0] or list(
            range(len(self.spans))
        )

    def copy_of(self, claim: str) -> Span | None:
        """The passage sentence ``claim`` copies word for word (case aside), or None.

        A copy has exactly the words of one whole sentence of a passage, in order; a
        question on either side is never one (asked is not stated).
        """
        words = tuple(_words(claim))
        if not words or "?" in claim:
            return None
        return self._whole.get(words)

    def premise(
        self, anchors: Sequence[int], must_read: Sequence[Span] = (), budget: int | None = None
    ) -> Premise:
        """The anchors (and ``must_read``), then their neighbours, while ``budget`` holds."""
        budget = self.budget if budget is None else budget
        chosen: set[int] = set()
        used = 0
        forced = [
            p
            for p, (index, start, end) in enumerate(self.spans)
            if any(i == index and s < end and start < e for i, s, e in must_read)
        ]

        def take(position: int) -> bool:
            nonlocal used
            if position in chosen:
                return True
            if used + self.tokens[position] > budget and chosen:
                return False
            chosen.add(position)
            used += self.tokens[position]
            return True

        for position in [*forced, *anchors]:
            take(position)
        for distance in (1, 2):
            for position in [*forced, *anchors]:
                for neighbour in (position - distance, position + distance):
                    if 0 <= neighbour < len(self.spans) and self._same_passage(position, neighbour):
                        take(neighbour)
        return Premise(tuple(self.spans[p] for p in sorted(chosen)))

    def _same_passage(self, a: int, b: int) -> bool:
        return self.spans[a][0] == self.spans[b][0]

    def readings(
        self, claim: str, *, anchors: int = ANCHORS, must_read: Sequence[Span] = ()
    ) -> tuple[Premise, Premise | None]:
        """The first premise of ``claim``, and the second one (the next anchors) or None."""
        ranked = self.rank(claim)
        first = self.premise(ranked[:anchors], must_read)
        read = set(first.spans)
        rest = [p for p in ranked[anchors:] if self.spans[p] not in read][:anchors]
        second = self.premise(rest) if rest else None
        return first, second


def _cut(
    tokenizer: Tokenizer, index: int, text: str, start: int, end: int, budget: int
) -> list[Span]:
    """A sentence longer than ``budget`` tokens as pieces that fit."""
    encoding = tokenizer.encode(text[start:end], add_special_tokens=False)
    count = len(encoding.ids)
    if count <= budget or budget < 1:
        return [(index, start, end)]
    offsets = encoding.offsets
    return [
        (index, start + offsets[first][0], start + offsets[min(count, first + budget) - 1][1])
        for first in range(0, count, budget)
    ]


def spans_in(evidence: Mapping[int, Sequence[Span]], claim: int, passages: int) -> tuple[Span, ...]:
    """The ``must_read`` spans of ``claim`` that name one of ``passages`` passages."""
    return tuple(s for s in evidence.get(claim, ()) if 0 <= s[0] < passages)
