"""``TokenJudge``: a local token classifier marks the answer's unsupported words.

LettuceDetect-style: the model is a directory written by ``optimum-cli export onnx
--task token-classification``. It reads the passages and the question as the first
sequence and the answer as the second, and gives each answer token a class; a token
whose class is not the first one (or is named like ``hallucinated``/``unsupported``)
is unsupported. Marked tokens become character ranges of the answer through the
tokenizer's offsets, adjacent ones joined into phrases.

Passages longer than the model reads go in windows that keep the whole answer (an
answer longer than half the model's length is read in parts); a token is unsupported
only when every window that read it marks it, since any passage may support it.

A claim holding a marked phrase is ``NOT_FOUND`` and the phrase is its flagged range
(``ClaimVerdict.unsupported``), with the highest unsupported probability of its
tokens as the confidence; any other claim is ``SUPPORTED`` with confidence one minus
that probability. Its evidence is the passage sentence that shares most of its
words: the model says which words are unsupported, not where the support is. It
cannot tell a contradiction from an addition (it never says ``CONTRADICTED``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragpulse.evaluation.evidence import verify
from ragpulse.evaluation.types import Claim, ClaimVerdict, Context, Verdict
from ragpulse.evaluation.vector import marker_spans
from ragpulse.judges.local._onnx import CONFIG_FILE, SLACK, Batch, ModelDirectory, ModelUnavailable
from ragpulse.judges.local._shared import LocalModelJudge
from ragpulse.judges.local._windows import best_sentence, sentences, windows
from ragpulse.judges.local.nli import UNSUPPORTED, label_role

__all__ = ["DEFAULT_TEMPLATE", "TokenJudge"]

DEFAULT_TEMPLATE = "{contexts}\n\n{question}"
"""The first sequence: the passages (a window of them), then the question."""
PASSAGE_SEPARATOR = "\n\n"
_UNSUPPORTED_ABOVE = 0.5
_MIN_BUDGET = 8


class TokenJudge(LocalModelJudge):
    """A local token classifier marks unsupported answer words; see the module doc.

    ``template`` lays out the first sequence from ``{contexts}`` and ``{question}``
    (use the layout the model was trained with); the other keywords are
    ``LocalModelJudge``'s.
    """

    task = "token-classification"
    token_level = True
    default_name = "tokens"
    _unsupported: tuple[int, ...] = ()
    """Output indexes of the unsupported classes, set from the labels when the model is read."""

    def __init__(
        self, model: str | Path, *, template: str = DEFAULT_TEMPLATE, **options: Any
    ) -> None:
        self.template = template
        super().__init__(model, **options)

    def _fit_known(self, directory: ModelDirectory, given: Mapping[int, str]) -> ModelDirectory:
        fitted = super()._fit_known(directory, given)
        if self.known is not None and self.known.template and self.template == DEFAULT_TEMPLATE:
            # The layout the model was trained on, unless one was given.
            self.template = self.known.template
        return fitted

    def _read_labels(self, directory: ModelDirectory) -> None:
        labels = directory.labels
        named = tuple(i for i, label in enumerate(labels) if label_role(label) == UNSUPPORTED)
        unsupported = named or tuple(range(1, len(labels)))
        if not unsupported or len(unsupported) == len(labels):
            raise ModelUnavailable(
                f"{directory.path / CONFIG_FILE}: cannot map the labels {list(labels)}: a token "
                "classifier needs a supported class and at least one unsupported class"
            )
        self._unsupported = unsupported

    def _first_sequence(self, contexts: str, question: str | None) -> str:
        return self.template.format(contexts=contexts, question=question or "").strip()

    def check(
        self,
        text: str,
        claims: Sequence[Claim],
        passages: Sequence[Context],
        question: str | None = None,
        must_read: Mapping[int, Sequence[tuple[int, int, int]]] | None = None,
    ) -> list[ClaimVerdict]:
        """Each claim of ``text`` (an answer) by the words of it the model marks.

        Every window of the passages is read, so ``must_read`` adds nothing here.
        """
        if not claims:
            return []
        passages = self._passages(passages)
        # Citation markers are the answer's references, not claims of its own.
        markers = marker_spans(text)
        marked = [
            (s, e, p)
            for s, e, p in self.unsupported_tokens(text, passages, question)
            if not any(m_start <= s and e <= m_end for m_start, m_end in markers)
        ]
        texts = [p.text for p in passages]
        candidates = [(i, span) for i, t in enumerate(texts) for span in sentences(t)]
        return [self._verdict(claim, marked, passages, candidates) for claim in claims]

    def unsupported_tokens(
        self, text: str, passages: Sequence[Context], question: str | None
    ) -> list[tuple[int, int, float]]:
        """``(start, end, p)`` per token of ``text``, p the lowest unsupported probability read."""
        model = self.model
        tokenizer = model.tokenizer
        limit = model.directory.max_length - model.special_tokens(pair=True) - SLACK
        joined = PASSAGE_SEPARATOR.join(p.text for p in passages)
        frame = len(
            tokenizer.encode(self._first_sequence("", question), add_special_tokens=False).ids
        )
        answer_tokens = len(tokenizer.encode(text, add_special_tokens=False).ids)
        if answer_tokens + frame + _MIN_BUDGET <= limit:
            parts = [(0, len(text))]
        else:
            parts = [(w.start, w.end) for w in windows(tokenizer, 0, text, max(1, limit // 2))]
        pairs: list[tuple[int, str, str]] = []
        by_budget: dict[int, list[str]] = {}  # answer parts of one size share their windows
        for start, end in parts:
            piece = text[start:end]
            size = len(tokenizer.encode(piece, add_special_tokens=False).ids)
            budget = max(_MIN_BUDGET, limit - frame - size)
            if budget not in by_budget:
                cut = windows(tokenizer, 0, joined, budget) if joined.strip() else []
                by_budget[budget] = [joined[w.start : w.end] for w in cut] or [""]
            pairs.extend(
                (start, self._first_sequence(f, question), piece) for f in by_budget[budget]
            )
        lowest: dict[tuple[int, int], float] = {}
        encodings = tokenizer.encode_batch([(first, piece) for _, first, piece in pairs])
        for at in range(0, len(pairs), self.batch_size):
            rows = range(at, min(len(pairs), at + self.batch_size))
            batch = Batch(
                ids=[encodings[i].ids for i in rows], type_ids=[encodings[i].type_ids for i in rows]
            )
            for i, scores in zip(rows, model.run(batch), strict=True):
                encoding, offset = encodings[i], pairs[i][0]
                for position, sequence in enumerate(encoding.sequence_ids):
                    start, end = encoding.offsets[position]
                    if sequence != 1 or end <= start:
                        continue
                    p = float(scores[position, list(self._unsupported)].sum())
                    key = (offset + start, offset + end)
                    lowest[key] = min(p, lowest.get(key, 1.0))
        return [(s, e, p) for (s, e), p in sorted(lowest.items())]

    def _verdict(
        self,
        claim: Claim,
        marked: Sequence[tuple[int, int, float]],
        passages: Sequence[Context],
        candidates: Sequence[tuple[int, tuple[int, int]]],
    ) -> ClaimVerdict:
        start = claim.answer_start if claim.answer_start is not None else 0
        end = claim.answer_end if claim.answer_end is not None else start + len(claim.text)
        inside = [(s, e, p) for s, e, p in marked if s < end and e > start]
        flagged = [(max(s, start), min(e, end), p) for s, e, p in inside if p > _UNSUPPORTED_ABOVE]
        highest = max((p for _, _, p in inside), default=None)
        if flagged:
            return ClaimVerdict(
                claim,
                Verdict.NOT_FOUND,
                reason="the model marks words no passage supports",
                unsupported=_phrases(claim.text, start, flagged),
                confidence=max(p for _, _, p in flagged),
            )
        texts = [p.text for p in passages]
        found = best_sentence(claim.text, texts, candidates)
        quote = texts[found[0]][found[1] : found[2]] if found else None
        return ClaimVerdict(
            claim,
            Verdict.SUPPORTED,
            evidence=verify(quote, passages, found[0]) if found else None,
            quote=quote,
            confidence=None if highest is None else 1.0 - highest,
        )


def _phrases(
    claim_text: str, claim_start: int, flagged: Sequence[tuple[int, int, float]]
) -> tuple[tuple[int, int], ...]:
    """Marked token ranges joined where only spaces or punctuation lie between them."""
    joined: list[tuple[int, int]] = []
    for start, end, _ in sorted(flagged):
        if joined:
            gap = claim_text[joined[-1][1] - claim_start : start - claim_start]
            if not any(ch.isalnum() for ch in gap):
                joined[-1] = (joined[-1][0], max(joined[-1][1], end))
                continue
        joined.append((start, end))
    return tuple(joined)
