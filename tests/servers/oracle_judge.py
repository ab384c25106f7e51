"""A judge model that knows the answers: it replies to ragpulse's claims prompt from human labels.

Given records whose answers carry human-marked unsupported spans (character ranges),
``OracleJudge`` is a ``ChatServer`` responder that plays a *perfect* model: it splits
the answer into its sentences, calls a sentence NOT_FOUND when it holds a marked span
and returns exactly the marked words as the claim's unsupported phrases, and calls
every other sentence SUPPORTED with a verbatim quote (the run of one to three context
sentences that holds most of the claim's content words, the shortest among equals).

With ``flip`` and ``paraphrase`` it is a *noisy* model instead: that share of verdicts
is flipped (a marked sentence called SUPPORTED with the best quote it can find, a clean
one NOT_FOUND with no phrase), and that share of quotes is re-worded (one word dropped,
two neighbours swapped), so they no longer occur in the context. The noise is drawn
per record and claim from ``seed``, so a run is the same whatever order requests come in.

What ragpulse does with these replies (claim anchoring, quote verification, the guard,
span mapping) is then the only source of error: scores measured against the same labels
are an upper bound of the pipeline, not any model's accuracy.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.servers.chat_server import Reply, content_words, fenced_data

from ragpulse.judges.llm._verify import _norms

__all__ = ["LabelledRecord", "OracleJudge", "oracle_claims"]

# Sentence ends: terminal punctuation before whitespace, or a line break.
_SENTENCE = re.compile(r"[^\n]*?(?:[.!?](?=\s)|\n|$)")
_WORD = re.compile(r"\w+")
_WINDOW_SENTENCES = 3


@dataclass(frozen=True)
class LabelledRecord:
    """An answer, its contexts, and the character ranges of the answer humans marked."""

    answer: str
    contexts: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


def _sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence with a word in it, surrounding whitespace trimmed."""
    ranges = []
    for match in _SENTENCE.finditer(text):
        start, end = match.start(), match.end()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start and _WORD.search(text, start, end):
            ranges.append((start, end))
    return ranges


def _meaning_words(text: str) -> set[str]:
    """Content words and numbers as a careful reader matches them: stemmed, case-folded,
    ``OutdoorSeating`` read as two words (ragpulse's own normalisation)."""
    words, numbers, _ = _norms(text)
    return words | numbers


def best_quote(claim: str, contexts: Sequence[str]) -> tuple[int, str] | None:
    """(1-based context number, verbatim span) of the run of context sentences stating most
    of the claim's content words; the shortest among equals; None when none shares a word."""
    wanted = _meaning_words(claim)
    best: tuple[int, int, int, str] | None = None  # (-covered, length, number, quote)
    for number, context in enumerate(contexts, start=1):
        sentences = _sentences(context)
        words = [_meaning_words(context[s:e]) for s, e in sentences]
        for i in range(len(sentences)):
            held: set[str] = set()
            for j in range(i, min(i + _WINDOW_SENTENCES, len(sentences))):
                held |= words[j] & wanted
                quote = context[sentences[i][0] : sentences[j][1]]
                key = (-len(held), len(quote), number, quote)
                if held and (best is None or key < best):
                    best = key
    return None if best is None else (best[2], best[3])


def _states_nothing(sentence: str) -> bool:
    """A list number, a greeting, a lead-in ending in a colon: not a factual claim."""
    return len(content_words(sentence)) < 2 or sentence.rstrip().endswith(":")


def oracle_claims(record: LabelledRecord) -> list[dict[str, Any]]:
    """The perfect model's claims: one per answer sentence that states something (a lead-in
    such as "Here is a summary:" does not), judged from the labels."""
    claims = []
    for start, end in _sentences(record.answer):
        marked = [
            record.answer[max(start, s) : min(end, e)].strip()
            for s, e in record.spans
            if min(end, e) > max(start, s)
        ]
        marked = [phrase for phrase in marked if _WORD.search(phrase)]
        claim = record.answer[start:end]
        if not marked and _states_nothing(claim):
            continue
        if marked:
            claims.append(
                {"claim": claim, "context": None, "quote": None, "verdict": "NOT_FOUND",
                 "unsupported": marked, "reason": "No context states the marked words."}
            )  # fmt: skip
            continue
        found = best_quote(claim, record.contexts)
        claims.append(
            {"claim": claim, "context": found[0] if found else None,
             "quote": found[1] if found else None, "verdict": "SUPPORTED", "unsupported": [],
             "reason": "The quoted span states it."}
        )  # fmt: skip
    return claims


def paraphrase(quote: str, rng: random.Random) -> str:
    """The quote re-worded as a model might: one word dropped, two neighbours swapped."""
    words = quote.split()
    if len(words) < 3:
        return f"{quote} (paraphrased)"
    del words[rng.randrange(len(words))]
    i = rng.randrange(len(words) - 1)
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def _noisy(
    claims: list[dict[str, Any]], record: LabelledRecord, rng: random.Random, flip: float,
    rephrase: float,
) -> list[dict[str, Any]]:  # fmt: skip
    noisy = []
    for claim in claims:
        claim = dict(claim)
        if rng.random() < flip:
            if claim["verdict"] == "SUPPORTED":
                claim.update(verdict="NOT_FOUND", context=None, quote=None, unsupported=[])
            else:
                found = best_quote(claim["claim"], record.contexts)
                claim.update(
                    verdict="SUPPORTED",
                    context=found[0] if found else None,
                    quote=found[1] if found else None,
                    unsupported=[],
                )
        if claim["quote"] and rng.random() < rephrase:
            claim["quote"] = paraphrase(claim["quote"], rng)
        noisy.append(claim)
    return noisy


class OracleJudge:
    """A ``ChatServer`` responder answering claims prompts about ``records`` from their labels.

    A prompt about an answer it has no labels for gets ``None`` (the server's own mode
    answers). ``flip`` and ``paraphrase`` are the shares of verdicts flipped and quotes
    re-worded (0: the perfect model).
    """

    def __init__(
        self,
        records: Iterable[LabelledRecord],
        *,
        flip: float = 0.0,
        paraphrase: float = 0.0,
        seed: int = 0,
    ) -> None:
        self._records: Mapping[tuple[str, tuple[str, ...]], LabelledRecord] = {
            (r.answer, r.contexts): r for r in records
        }
        self.flip = flip
        self.paraphrase = paraphrase
        self.seed = seed

    def __call__(self, body: dict[str, Any]) -> Reply | None:
        fences = fenced_data(body)
        answer = next((text for tag, text in fences if tag == "answer"), None)
        contexts = tuple(text for tag, text in fences if tag == "context")
        record = self._records.get((answer or "", contexts))
        if record is None or any(tag == "reference" for tag, _ in fences):
            return None
        claims = oracle_claims(record)
        if self.flip or self.paraphrase:
            rng = random.Random(f"{self.seed}:{record.answer}")
            claims = _noisy(claims, record, rng, self.flip, self.paraphrase)
        return Reply.json({"claims": claims})
