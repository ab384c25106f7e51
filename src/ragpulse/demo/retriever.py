"""BM25 retrieval over the demo corpus, with the ``rank-bm25`` package.

Tokenisation is deliberately simple so a reader can predict what matches:
lower-case, split into runs of letters and digits (a number keeps its inner
``.`` and ``,``, so ``5.1.2`` and ``50,000`` stay one token), drop a short list of
English stop words, and fold a plural ``-s`` (``versions`` matches ``version``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragpulse.demo.corpus import DOCUMENTS, Document

_TOKEN = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_STOP_WORDS_TEXT = """
    a an and are as at be by can do does for from has have how i in is it its my of on or
    the their there this to was what when which who will with you your
"""
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Split ``text`` into the index's terms (see the module docstring)."""
    terms = []
    for token in _TOKEN.findall(text.lower()):
        if token in _STOP_WORDS:
            continue
        if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
            token = token[:-1]
        terms.append(token)
    return terms


@dataclass(frozen=True, slots=True)
class Passage:
    """A retrieved document and its BM25 score for the query."""

    document: Document
    score: float

    @property
    def text(self) -> str:
        """The passage text handed to the generator (and the evaluator): the body only."""
        return self.document.text


class Bm25Retriever:
    """Ranks whole documents by BM25 (Okapi) against a query."""

    def __init__(self, documents: Sequence[Document] = DOCUMENTS) -> None:
        # Imported here: rank-bm25 is part of the ``demo`` extra, not of the core.
        from rank_bm25 import BM25Okapi

        self._documents = tuple(documents)
        self._index = BM25Okapi([tokenize(doc.content) for doc in self._documents])

    def search(self, query: str, k: int = 3) -> list[Passage]:
        """The ``k`` best documents with a positive score, best first."""
        scores = self._index.get_scores(tokenize(query))
        ranked = sorted(range(len(self._documents)), key=lambda i: (-scores[i], i))
        return [Passage(self._documents[i], float(scores[i])) for i in ranked[:k] if scores[i] > 0]
