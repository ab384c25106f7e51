"""``TokenJudge``: a local token classifier marks the answer's unsupported words.

LettuceDetect-style: the model is a directory written by ``optimum-cli export onnx
--task token-classification``. It reads the passages and the question as the first
sequence and the answer as the second, and gives each answer token a class; a token
whose class is not the first one (or is named like ``hallucinated``/``unsupported``)
is unsupported. Marked tokens become character ranges of the answer through the
tokenizer's offsets, adjacent ones joined into phrases.

Evidence first, then the model (``_local_evidence``): the answer is read against the
passage sentences most likely to decide its claims, not against every passage. BM25
ranks the sentences for each claim; each claim's best ``evidence_anchors`` sentences
(every claim's best one first, then every claim's second), with any range an earlier
judge found contradicting a claim (``must_read``) ahead of them, then their neighbours,
make one first sequence of at most ``evidence_tokens`` per claim, within what the model's
length leaves beside the answer, in passage order. An answer longer than half the
model's length is read in parts, each against its own claims' evidence.
``evidence_anchors=None`` reads every window of the passages instead (the exhaustive
reading): a token is then unsupported only when every window that read it marks it.

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
from ragpulse.evaluation.vector import marker_spans, without_markers
from ragpulse.judges.local._evidence import (
    ANCHORS,
    EVIDENCE_TOKENS,
    Premise,
    SentenceIndex,
    Span,
    check_evidence_options,
    spans_in,
)
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
    (use the layout the model was trained with); ``evidence_anchors`` are the sentences
    ranked per claim (``None``: read every window), ``evidence_tokens`` the first
    sequence's passage tokens per claim; the other keywords are ``LocalModelJudge``'s.
    """

    task = "token-classification"
    token_level = True
    default_name = "tokens"
    label_kind = "tokens"
    _unsupported: tuple[int, ...] = ()
    """Output indexes of the unsupported classes, set from the labels when the model is read."""

    def __init__(
        self,
        model: str | Path,
        *,
        template: str = DEFAULT_TEMPLATE,
        evidence_anchors: int | None = ANCHORS,
        evidence_tokens: int = EVIDENCE_TOKENS,
        **options: Any,
    ) -> None:
        check_evidence_options(evidence_anchors, evidence_tokens)
        self.template = template
        self.evidence_anchors = evidence_anchors
        """Best-ranked sentences per claim; ``None``: read every window of the passages."""
        self.evidence_tokens = evidence_tokens
        """Passage tokens of the first sequence per claim it is read for."""
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

        ``must_read`` names, per claim index, passage sentences ``(passage, start, end)``
        read with that claim whatever the first stage ranks.
        """
        if not claims:
            return []
        passages = self._passages(passages)
        # Citation markers are the answer's references, not claims of its own.
        markers = marker_spans(text)
        marked = [
            (s, e, p)
            for s, e, p in self.unsupported_tokens(text, passages, question, claims, must_read)
            if not any(m_start <= s and e <= m_end for m_start, m_end in markers)
        ]
        texts = [p.text for p in passages]
        candidates = [(i, span) for i, t in enumerate(texts) for span in sentences(t)]
        return [self._verdict(claim, marked, passages, candidates) for claim in claims]

    def unsupported_tokens(
        self,
        text: str,
        passages: Sequence[Context],
        question: str | None,
        claims: Sequence[Claim] = (),
        must_read: Mapping[int, Sequence[Span]] | None = None,
    ) -> list[tuple[int, int, float]]:
        """``(start, end, p)`` per token of ``text``, p the lowest unsupported probability read.

        With ``claims`` (of ``text``, with their offsets) the passages are read evidence
        first; without them, or with ``evidence_anchors=None``, every window is.
        """
        pairs = [
            (start, self._first_sequence(first, question), text[start:end])
            for start, end, first in self.readings(text, passages, question, claims, must_read)
        ]
        return self._run(pairs)

    def readings(
        self,
        text: str,
        passages: Sequence[Context],
        question: str | None,
        claims: Sequence[Claim] = (),
        must_read: Mapping[int, Sequence[Span]] | None = None,
    ) -> list[tuple[int, int, str]]:
        """What the model reads: ``(start, end, passages read)`` per sequence, the answer's
        part ``text[start:end]`` and the passage text of its first sequence."""
        model = self.model
        tokenizer = model.tokenizer
        limit = model.directory.max_length - model.special_tokens(pair=True) - SLACK
        frame = len(
            tokenizer.encode(self._first_sequence("", question), add_special_tokens=False).ids
        )
        answer_tokens = len(tokenizer.encode(text, add_special_tokens=False).ids)
        if answer_tokens + frame + _MIN_BUDGET <= limit:
            parts = [(0, len(text))]
        else:
            parts = [(w.start, w.end) for w in windows(tokenizer, 0, text, max(1, limit // 2))]
        budgets = [
            max(
                _MIN_BUDGET,
                limit - frame - len(tokenizer.encode(text[s:e], add_special_tokens=False).ids),
            )
            for s, e in parts
        ]
        texts = [p.text for p in passages]
        if self.evidence_anchors is not None and claims and any(t.strip() for t in texts):
            index = SentenceIndex(tokenizer, texts, min(min(budgets), self.evidence_tokens))
            if index.spans:
                return [
                    (start, end, first)
                    for (start, end), budget in zip(parts, budgets, strict=True)
                    for first in self._evidence(index, start, end, budget, claims, must_read)
                ]
        joined = PASSAGE_SEPARATOR.join(texts)
        read: list[tuple[int, int, str]] = []
        by_budget: dict[int, list[str]] = {}  # answer parts of one size share their windows
        for (start, end), budget in zip(parts, budgets, strict=True):
            if budget not in by_budget:
                cut = windows(tokenizer, 0, joined, budget) if joined.strip() else []
                by_budget[budget] = [joined[w.start : w.end] for w in cut] or [""]
            read.extend((start, end, first) for first in by_budget[budget])
        return read

    def _evidence(
        self,
        index: SentenceIndex,
        start: int,
        end: int,
        budget: int,
        claims: Sequence[Claim],
        must_read: Mapping[int, Sequence[Span]] | None,
    ) -> list[str]:
        """The passage text the claims of ``text[start:end]`` are read against: their
        selected sentences, as few first sequences of ``budget`` tokens as hold them."""
        mine = [
            i
            for i, c in enumerate(claims)
            if c.answer_start is None
            or c.answer_end is None
            or (c.answer_start < end and start < c.answer_end)
        ] or list(range(len(claims)))
        ranked = [index.rank(without_markers(claims[i].text)) for i in mine]
        anchors: list[int] = []
        for rank in range(self.evidence_anchors or ANCHORS):
            # Every claim's best sentence before any claim's second.
            for order in ranked:
                if rank < len(order) and order[rank] not in anchors:
                    anchors.append(order[rank])
        forced = [s for i in mine for s in spans_in(must_read or {}, i, len(index.passages))]
        selected = index.premise(anchors, forced, budget=self.evidence_tokens * len(mine))
        # In passage order, cut where the model's window is full.
        position = {span: p for p, span in enumerate(index.spans)}
        groups: list[list[Span]] = [[]]
        used = 0
        for span in selected.spans:
            tokens = index.tokens[position[span]]
            if groups[-1] and used + tokens > budget:
                groups.append([])
                used = 0
            groups[-1].append(span)
            used += tokens
        return [Premise(tuple(group)).text(index.passages) for group in groups if group]

    def _run(self, pairs: Sequence[tuple[int, str, str]]) -> list[tuple[int, int, float]]:
        """The model over ``(offset, first sequence, answer part)`` pairs: per answer token,
        the lowest unsupported probability any sequence gave it."""
        model = self.model
        tokenizer = model.tokenizer
        lowest: dict[tuple[int, int], float] = {}
        encodings = tokenizer.encode_batch([(first, piece) for _, first, piece in pairs])
        # Sorted by length, so each batch pads to a length close to its own sequences'.
        order = sorted(range(len(pairs)), key=lambda i: len(encodings[i].ids))
        for at in range(0, len(order), self.batch_size):
            rows = order[at : at + self.batch_size]
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
