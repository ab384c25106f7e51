"""Passages cut into windows a model can read: sentence-aligned, overlapping, in budget.

A local model reads at most its maximum length in tokens. A passage longer than that
is read as windows of whole sentences (the claim splitter's units: sentences and
coordinated clauses), each window starting on the last sentence of the one before,
so a fact stated across a window's edge is still read whole once. A single sentence
longer than the budget is cut at token boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragpulse.evaluation.claims import split_claims

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["Window", "best_sentence", "sentences", "windows"]

_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Window:
    """``text[start:end]`` of passage ``index``, with its sentences' ranges."""

    index: int
    start: int
    end: int
    sentences: tuple[tuple[int, int], ...]


def sentences(text: str) -> list[tuple[int, int]]:
    """The character ranges of ``text``'s sentences (the claim splitter's units)."""
    spans = []
    for unit in split_claims(text):
        if unit.answer_start is not None and unit.answer_end is not None:
            spans.append((unit.answer_start, unit.answer_end))
    return spans


def _pieces(
    tokenizer: Tokenizer, text: str, span: tuple[int, int], budget: int
) -> list[tuple[tuple[int, int], int]]:
    """``span`` as ranges of at most ``budget`` tokens each, with their token counts."""
    start, end = span
    encoding = tokenizer.encode(text[start:end], add_special_tokens=False)
    count = len(encoding.ids)
    if count <= budget:
        return [(span, count)]
    offsets = encoding.offsets
    pieces = []
    for first in range(0, count, budget):
        last = min(count, first + budget) - 1
        pieces.append(((start + offsets[first][0], start + offsets[last][1]), last - first + 1))
    return pieces


def windows(tokenizer: Tokenizer, index: int, text: str, budget: int) -> list[Window]:
    """Windows of passage ``text``, ``budget`` tokens at most, overlapping by one sentence."""
    units: list[tuple[tuple[int, int], int]] = []
    for span in sentences(text):
        units.extend(_pieces(tokenizer, text, span, budget))
    if not units:
        return []
    found: list[Window] = []
    first = 0
    while True:
        used, last = 0, first
        while last < len(units) and used + units[last][1] <= budget:
            used += units[last][1]
            last += 1
        last = max(last, first + 1)  # a unit over budget was cut above; never stall
        spans = tuple(span for span, _ in units[first:last])
        found.append(Window(index, spans[0][0], spans[-1][1], spans))
        if last >= len(units):
            return found
        # The next window starts on this one's last sentence, unless that is all it held.
        first = last - 1 if last - 1 > first else last


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def best_sentence(
    claim: str, passages: Sequence[str], candidates: Sequence[tuple[int, tuple[int, int]]]
) -> tuple[int, int, int] | None:
    """Among ``(passage, (start, end))`` candidates, the sentence sharing most of the claim's words.

    The model judges a whole window; the sentence quoted as its evidence is the one
    that says most of what the claim says, by shared words (ties: the earlier one).
    """
    wanted = _words(claim)
    best: tuple[int, int, int] | None = None
    best_share = -1.0
    for index, (start, end) in candidates:
        words = _words(passages[index][start:end])
        share = len(wanted & words) / len(wanted) if wanted else 0.0
        if share > best_share:
            best, best_share = (index, start, end), share
    return best
