"""``NLIJudge``: each claim read against the passages by a local NLI cross-encoder.

The model is a directory written by ``optimum-cli export onnx --task
text-classification``: a 3-way NLI model whose ``id2label`` names entailment,
neutral and contradiction (in any order and case), or a binary supported/unsupported
classifier (MiniCheck, HHEM-style) whose ``LABEL_0``/``LABEL_1`` a label map names
(``1=supported``). It runs with ``onnxruntime`` on the CPU; nothing is downloaded.

Evidence first, then the model (``_local_evidence``): a claim that copies a passage
sentence word for word is SUPPORTED without the model (confidence 1); each other claim
is the hypothesis, read against one premise of the few passage sentences BM25 ranks
best for it (with their neighbours, ``evidence_tokens`` at most); with ``reread=True``,
a claim that reading neither entails nor contradicts is read once more against the
next-ranked sentences.
``evidence_anchors=None`` reads every claim against every sentence-aligned window of
every passage instead (the exhaustive reading, many times the cost). All sequences of
a check run in batches sorted by length, each padded to its own longest. The
strongest reading decides:

- ``SUPPORTED`` when some reading's most likely class is entailment (the one with
  the highest entailment probability; that probability is the confidence);
- ``CONTRADICTED`` otherwise, when some reading's most likely class is contradiction;
- ``NOT_FOUND`` otherwise, with confidence one minus the highest entailment or
  contradiction probability of any reading.

The evidence of a SUPPORTED or CONTRADICTED verdict is the deciding premise's sentence
that shares most of the claim's words, verified against its passage.

What it can and cannot see: paraphrase, negation and changed values that the model
learned to read, in the sentences it reads. A claim whose deciding sentence shares
few (or only common) words with it can rank outside its readings (the exhaustive
reading sees it); a claim that needs two distant passages together is read whole
only when both rank among its anchors; a claim longer than half the model's length
is read by its first half.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragpulse.evaluation.evidence import verify
from ragpulse.evaluation.types import Claim, ClaimVerdict, Context, Verdict
from ragpulse.evaluation.vector import without_markers
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
from ragpulse.judges.local._windows import best_sentence, windows

if TYPE_CHECKING:
    import numpy as np

__all__ = ["COPY_REASON", "NLIJudge"]

ENTAILMENT = "entailment"
NEUTRAL = "neutral"
CONTRADICTION = "contradiction"
UNSUPPORTED = "unsupported"
_MIN_BUDGET = 8
"""Fewest premise tokens a window holds, however long the claim."""
COPY_REASON = "a passage sentence states it word for word"
"""The reason of a claim decided without the model: it copies a passage sentence."""


def label_role(name: str) -> str | None:
    """What a class name means: entailment, neutral, contradiction, unsupported, or None."""
    text = name.strip().lower().replace("-", "_").replace(" ", "_")
    if "contradict" in text:
        return CONTRADICTION
    if "neutral" in text:
        return NEUTRAL
    negated = ("not_", "non_", "no_", "unsupport", "inconsistent", "hallucinat", "unfaithful")
    if text.startswith(negated) or any(n in text for n in negated[3:]):
        return UNSUPPORTED
    if any(word in text for word in ("entail", "support", "consistent", "faithful")):
        return ENTAILMENT
    return None


class NLIJudge(LocalModelJudge):
    """A local NLI (or supported/unsupported) model judges each claim; see the module doc.

    ``NLIJudge("models/nli")``; ``label_map="1=supported"`` names a binary model's classes;
    ``threads`` is the inference session's intra-op thread count per judge process; the
    other keywords are ``LocalModelJudge``'s.
    """

    task = "text-classification"
    token_level = False
    default_name = "nli"
    label_kind = "nli"
    # Output indexes of the classes, set from the labels when the model is read.
    _entailment = 0
    _contradiction: int | None = None

    def __init__(
        self,
        model: str | Path,
        *,
        evidence_anchors: int | None = ANCHORS,
        evidence_tokens: int = EVIDENCE_TOKENS,
        reread: bool = False,
        **options: Any,
    ) -> None:
        check_evidence_options(evidence_anchors, evidence_tokens)
        self.evidence_anchors = evidence_anchors
        """Best-ranked sentences per reading of a claim; ``None``: read every window."""
        self.evidence_tokens = evidence_tokens
        """Premise tokens of one reading."""
        self.reread = reread
        """Read a claim the first reading left undecided against the next-ranked sentences."""
        super().__init__(model, **options)

    @staticmethod
    def _supports(label: str) -> bool:
        return label_role(label) == ENTAILMENT

    def _read_labels(self, directory: ModelDirectory) -> None:
        roles = [label_role(label) for label in directory.labels]
        if len(roles) == 2 and roles.count(ENTAILMENT) == 1:
            # A binary model: whatever the other class is called, it is "not supported".
            roles = [r if r == ENTAILMENT else UNSUPPORTED for r in roles]
        unknown = [label for label, role in zip(directory.labels, roles, strict=True) if not role]
        three_way = sorted(r for r in roles if r) == sorted([ENTAILMENT, NEUTRAL, CONTRADICTION])
        binary = sorted(r for r in roles if r) == sorted([ENTAILMENT, UNSUPPORTED])
        if unknown or not (three_way or binary):
            raise ModelUnavailable(
                f"{directory.path / CONFIG_FILE}: cannot map the labels "
                f"{list(directory.labels)}: an NLI model names entailment, neutral and "
                "contradiction; name a binary model's classes with a label map "
                "(e.g. 1=supported or 0=unsupported,1=supported)"
            )
        self._entailment = roles.index(ENTAILMENT)
        self._contradiction = roles.index(CONTRADICTION) if three_way else None

    def check(
        self,
        text: str,
        claims: Sequence[Claim],
        passages: Sequence[Context],
        question: str | None = None,
        must_read: Mapping[int, Sequence[Span]] | None = None,
    ) -> list[ClaimVerdict]:
        """Each claim (the hypothesis) against its evidence (the premise); see the module doc.

        ``must_read`` names, per claim index, passage sentences ``(passage, start, end)``
        its first reading includes whatever the first stage ranks (a window an earlier
        reading found contradicting).
        """
        if not claims:
            return []
        model = self.model
        tokenizer = model.tokenizer
        limit = model.directory.max_length - model.special_tokens(pair=True) - SLACK
        hypotheses = [self._hypothesis(without_markers(c.text), limit // 2) for c in claims]
        longest = max(len(tokenizer.encode(h, add_special_tokens=False).ids) for h in hypotheses)
        budget = max(_MIN_BUDGET, limit - longest)
        passages = self._passages(passages)
        if self.evidence_anchors is None:
            return self._read_all(claims, hypotheses, passages, budget)
        texts = [p.text for p in passages]
        index = SentenceIndex(tokenizer, texts, min(budget, self.evidence_tokens))
        if not index.spans:
            return [ClaimVerdict(c, Verdict.NOT_FOUND, reason="no passage to read") for c in claims]
        forced = [spans_in(must_read or {}, i, len(passages)) for i in range(len(claims))]
        # A copy of a passage sentence is stated there: no sequence (unless an earlier
        # reading found a window contradicting it, which the model then weighs).
        copies = [
            None if forced[i] else index.copy_of(without_markers(c.text))
            for i, c in enumerate(claims)
        ]
        verdicts: list[ClaimVerdict | None] = [
            None if copy is None else self._copied(claim, copy, passages)
            for claim, copy in zip(claims, copies, strict=True)
        ]
        left = [i for i, v in enumerate(verdicts) if v is None]
        readings = {
            i: index.readings(
                without_markers(claims[i].text), anchors=self.evidence_anchors, must_read=forced[i]
            )
            for i in left
        }
        read: dict[int, list[Premise]] = {i: [readings[i][0]] for i in left}
        scores: dict[int, list[np.ndarray]] = {
            i: [s]
            for i, s in zip(
                left,
                self._score([(read[i][0].text(texts), hypotheses[i]) for i in left]),
                strict=True,
            )
        }
        # A second reading, where the first neither entailed nor contradicted the claim.
        again = [
            i
            for i in left
            if self.reread and readings[i][1] is not None and self._undecided(scores[i][0])
        ]
        if again:
            premises = [p for i in again if (p := readings[i][1]) is not None]
            more = self._score(
                [(p.text(texts), hypotheses[i]) for p, i in zip(premises, again, strict=True)]
            )
            for i, premise, probabilities in zip(again, premises, more, strict=True):
                read[i].append(premise)
                scores[i].append(probabilities)
        import numpy as np

        return [
            verdict
            if verdict is not None
            else self._verdict(
                claims[i],
                np.asarray(scores[i]),
                [[(index_, (start, end)) for index_, start, end in p.spans] for p in read[i]],
                passages,
                forced[i],
            )
            for i, verdict in enumerate(verdicts)
        ]

    def _copied(self, claim: Claim, copy: Span, passages: Sequence[Context]) -> ClaimVerdict:
        index, start, end = copy
        quote = passages[index].text[start:end]
        return ClaimVerdict(
            claim,
            Verdict.SUPPORTED,
            evidence=verify(quote, passages, index),
            quote=quote,
            reason=COPY_REASON,
            confidence=1.0,
        )

    def selected(
        self, claims: Sequence[Claim], passages: Sequence[Context]
    ) -> list[tuple[tuple[Span, ...], tuple[Span, ...]]]:
        """Per claim, the sentences of its first and second readings (for measurement)."""
        model = self.model
        tokenizer = model.tokenizer
        limit = model.directory.max_length - model.special_tokens(pair=True) - SLACK
        hypotheses = [self._hypothesis(without_markers(c.text), limit // 2) for c in claims]
        longest = max(
            (len(tokenizer.encode(h, add_special_tokens=False).ids) for h in hypotheses), default=0
        )
        budget = max(_MIN_BUDGET, limit - longest)
        texts = [p.text for p in self._passages(passages)]
        index = SentenceIndex(tokenizer, texts, min(budget, self.evidence_tokens))
        if not index.spans:
            return [((), ()) for _ in claims]
        chosen = []
        for claim in claims:
            first, second = index.readings(
                without_markers(claim.text), anchors=self.evidence_anchors or ANCHORS
            )
            chosen.append((first.spans, second.spans if second else ()))
        return chosen

    def _undecided(self, probabilities: np.ndarray) -> bool:
        winner = int(probabilities.argmax())
        return winner != self._entailment and winner != self._contradiction

    def _read_all(
        self,
        claims: Sequence[Claim],
        hypotheses: Sequence[str],
        passages: Sequence[Context],
        budget: int,
    ) -> list[ClaimVerdict]:
        """Every claim against every window of every passage (``evidence_anchors=None``)."""
        tokenizer = self.model.tokenizer
        cut = [w for i, p in enumerate(passages) for w in windows(tokenizer, i, p.text, budget)]
        if not cut:
            return [ClaimVerdict(c, Verdict.NOT_FOUND, reason="no passage to read") for c in claims]
        pairs = [(c, w) for c in range(len(claims)) for w in range(len(cut))]
        texts = [
            (passages[cut[w].index].text[cut[w].start : cut[w].end], hypotheses[c])
            for c, w in pairs
        ]
        scores = self._score(texts)
        import numpy as np

        by_claim = np.asarray(scores).reshape(len(claims), len(cut), -1)
        candidates = [[(w.index, s) for s in w.sentences] for w in cut]
        return [
            self._verdict(claim, by_claim[i], candidates, passages)
            for i, claim in enumerate(claims)
        ]

    def _hypothesis(self, text: str, max_tokens: int) -> str:
        encoding = self.model.tokenizer.encode(text, add_special_tokens=False)
        if len(encoding.ids) <= max_tokens or max_tokens < 1:
            return text
        return text[: encoding.offsets[max_tokens - 1][1]]

    def _score(self, texts: Sequence[tuple[str, str]]) -> list[np.ndarray]:
        """Class probabilities per (premise, hypothesis), batched by length."""
        model = self.model
        encodings = model.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        results: list[np.ndarray] = [None] * len(encodings)  # type: ignore[list-item]
        for first in range(0, len(order), self.batch_size):
            rows = order[first : first + self.batch_size]
            batch = Batch(
                ids=[encodings[i].ids for i in rows], type_ids=[encodings[i].type_ids for i in rows]
            )
            for row, probabilities in zip(rows, model.run(batch), strict=True):
                results[row] = probabilities
        return results

    def _verdict(
        self,
        claim: Claim,
        scores: np.ndarray,
        cut: Sequence[Sequence[tuple[int, tuple[int, int]]]],
        passages: Sequence[Context],
        contradicting: Sequence[Span] = (),
    ) -> ClaimVerdict:
        winners = scores.argmax(axis=1)
        entailed = scores[:, self._entailment]
        best = int(entailed.argmax())
        if winners[best] == self._entailment:
            return self._decided(
                claim, Verdict.SUPPORTED, float(entailed[best]), cut[best], passages
            )
        strongest = float(entailed.max())
        if self._contradiction is not None:
            contradicted = scores[:, self._contradiction]
            worst = int(contradicted.argmax())
            if winners[worst] == self._contradiction:
                # The model does not say which sentence contradicts: where an earlier
                # reading named one and it was read, that one is the evidence.
                named = [
                    (index, (start, end))
                    for index, (start, end) in cut[worst]
                    if any(i == index and s < end and start < e for i, s, e in contradicting)
                ]
                return self._decided(
                    claim,
                    Verdict.CONTRADICTED,
                    float(contradicted[worst]),
                    named or cut[worst],
                    passages,
                )
            strongest = max(strongest, float(contradicted.max()))
        return ClaimVerdict(
            claim,
            Verdict.NOT_FOUND,
            reason="no passage sentence read entails it",
            confidence=1.0 - strongest,
        )

    def _decided(
        self,
        claim: Claim,
        verdict: Verdict,
        confidence: float,
        window: Sequence[tuple[int, tuple[int, int]]],
        passages: Sequence[Context],
    ) -> ClaimVerdict:
        texts = [p.text for p in passages]
        found = best_sentence(claim.text, texts, window)
        quote = texts[found[0]][found[1] : found[2]] if found else None
        evidence = verify(quote, passages, found[0]) if found else None
        reason = (
            "a passage entails it" if verdict is Verdict.SUPPORTED else "a passage contradicts it"
        )
        return ClaimVerdict(
            claim, verdict, evidence=evidence, quote=quote, reason=reason, confidence=confidence
        )
