"""``LexicalJudge``: the offline judge. No network, no model, deterministic and fast.

Each answer claim (a sentence or coordinated clause) is aligned once to its best window
in the contexts by content-token coverage (``lexical._align``); an ordered table of
small named rules then reads that alignment, and the first verdict wins
(``lexical._rules``, measured one by one in ``docs/offline-judge.md``):

- ``SUPPORTED``: one window covers nearly all of the claim's content words and all of
  its numbers and names; the evidence is that window, verified against the context.
- ``CONTRADICTED``: a matching window has another number or name in the claim's place,
  bounds with a number what the claim says has no bound ("a 2-year limited warranty"
  against "a lifetime warranty") or the reverse, a yes/no value of structured data says
  the opposite, or the sentence the claim restates denies what it affirms ("cannot be
  returned").
- ``INFERRED``: the claim's words and all its numbers and names occur across the
  contexts, and one window holds a share of them (``span_coverage``), or the data's
  yes/no values state it.
- ``NOT_FOUND``: otherwise (a number or name no context has, too few of its words), and
  where a claim widens its passage (a universal word, a superlative).

Every verdict carries a confidence: the share of the claim's rare content (words
weighted by their rarity in the contexts, numbers and names twice) the best window
holds, or one minus it for NOT_FOUND. The ordinary words of the user's question are not
new content (a claim restating it may be ``INFERRED``), but only a context vouches for a
name or a number. For correctness the question is the premise shared by answer and
reference ("Paris." answers "What is the capital of France?").

Sentences that talk to the user or about the sources ("Sure!", "The passages do not
say ...") are not claims; normalisation is generic (``lexical._tokens``); structured
contexts of any schema are read as facts (``lexical._structured``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from dataclasses import replace

from ragpulse.evaluation.findings import REFERENCE_AGREEMENT, CorrectnessInputs
from ragpulse.evaluation.types import (
    AnnotatorKind,
    ClaimVerdict,
    Context,
    Evaluation,
    RagRecord,
    Verdict,
)
from ragpulse.judges.lexical._align import NO_FACTS, ClaimAlignment, RecordFacts, record_facts
from ragpulse.judges.lexical._checkable import (
    CheckableClaim,
    IndexedContext,
    align_name_forms,
    align_surface_forms,
    checkable_claims,
    index_context,
    premise_of,
)
from ragpulse.judges.lexical._rules import RULES, Rule, decide
from ragpulse.judges.lexical._vector_view import lexical_vector
from ragpulse.metrics import ALL_METRICS
from ragpulse.metrics._assemble import assemble
from ragpulse.metrics._registry import findings_for
from ragpulse.metrics.correctness import (
    DEFAULT_CORRECTNESS_MODE,
    CorrectnessMode,
    check_correctness_mode,
)

__all__ = ["LexicalJudge"]


# --- the judge -----------------------------------------------------------------------


class LexicalJudge:
    """Offline judge: fuzzy alignment of each claim to the contexts, numbers and names exact.

    Thread-safe (no mutable state after construction) and deterministic.
    """

    annotator_kind: AnnotatorKind = "CODE"
    label_kind = "lexical"
    """Whose label policy its scores are read by (``ragpulse.judges._labels``)."""
    cpu_bound = True
    """Pure computation: the worker runs it in its own process (see ``ProcessJudge``)."""

    def __init__(
        self,
        *,
        name: str = "lexical",
        supported_coverage: float = 0.75,
        inferred_coverage: float = 0.4,
        record_inferred_coverage: float = 0.1,
        contradiction_coverage: float = 0.7,
        window_factor: float = 2.0,
        min_window_tokens: int = 12,
        max_context_chars: int = 200_000,
        max_hits_per_token: int = 400,
        span_coverage: float = 0.3,
        correctness_mode: str | None = None,
        beta: float = 1.0,
        rules: Sequence[Rule] = RULES,
    ) -> None:
        self.correctness_mode: CorrectnessMode = check_correctness_mode(
            correctness_mode or DEFAULT_CORRECTNESS_MODE
        )
        """How correctness scores (see ``ragpulse.metrics.correctness``)."""
        if beta <= 0:
            raise ValueError(f"beta must be positive, got {beta}")
        self.name = name
        self.supported_coverage = supported_coverage
        """Share of a claim's content weight one window must cover for SUPPORTED."""
        self.inferred_coverage = inferred_coverage
        """Share covered across all contexts for INFERRED."""
        self.record_inferred_coverage = record_inferred_coverage
        """The same against structured contexts, whose fields answers summarise loosely."""
        self.contradiction_coverage = contradiction_coverage
        """Share of the non-key words a window must cover before a differing number counts."""
        self.window_factor = window_factor
        self.min_window_tokens = min_window_tokens
        self.max_context_chars = max_context_chars
        """Only this many characters of each context are read (bounds the work on huge inputs)."""
        self.max_hits_per_token = max_hits_per_token
        self.span_coverage = span_coverage
        """Share of a claim's content weight one window must hold for INFERRED (0: any).

        Not applied against structured contexts, whose fields answers summarise loosely.
        """
        self.beta = beta
        self.rules = tuple(rules)
        """The ordered rule table (``lexical._rules.RULES``; the ablation passes fewer)."""

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """Judge ``record``; never raises."""
        # CPU-bound and quick (a few ms); running it inline avoids a thread hop per record.
        await asyncio.sleep(0)
        return self.evaluate_sync(record, metrics)

    def evaluate_sync(
        self, record: RagRecord, metrics: Collection[str] = ALL_METRICS
    ) -> Evaluation:
        """The same as ``evaluate``, for batch jobs and benchmarks without an event loop."""
        started = time.perf_counter()
        try:
            return self._evaluate(record, metrics, started)
        except Exception as exc:  # never raise into the caller; record what went wrong
            return Evaluation.failed(
                type(exc).__name__,
                judge=self.name,
                annotator_kind=self.annotator_kind,
                explanation=str(exc)[:500],
                duration_ms=(time.perf_counter() - started) * 1000,
            )

    def _evaluate(self, record: RagRecord, metrics: Collection[str], started: float) -> Evaluation:
        answer = record.answer or ""
        claims = checkable_claims(answer)
        indexed = [
            index_context(i, c, self.max_context_chars) for i, c in enumerate(record.contexts)
        ]
        claims = align_name_forms(claims, indexed)
        claims = align_surface_forms(claims, indexed)
        facts = record_facts(record.question, indexed)
        verdicts = [
            self._judge_claim(
                claim, indexed, record.contexts, facts=facts, align=n < _MAX_FUZZY_ALIGNMENTS
            )
            for n, claim in enumerate(claims)
        ]
        findings = findings_for(metrics)
        correctness_inputs = None
        reference_verdicts: list[ClaimVerdict] = []
        if REFERENCE_AGREEMENT in findings and record.reference and claims:
            correctness_inputs, reference_verdicts = self._correctness(
                claims, answer, record.reference, record.question
            )
        judged, found = lexical_vector(
            self,
            record,
            findings,
            claims,
            verdicts,
            indexed,
            None
            if correctness_inputs is None
            else (correctness_inputs.recall_hits, reference_verdicts),
        )
        # The reference's claims as checked against the answer: by the correctness check,
        # else by completeness's own (its explanation names the missing ones from them).
        checked = tuple(reference_verdicts) or found.reference_claims
        found = replace(found, correctness=correctness_inputs, reference_verdicts=checked)
        evaluation = assemble(
            record,
            metrics,
            judged,
            found,
            judge=self.name,
            annotator_kind=self.annotator_kind,
            correctness_mode=self.correctness_mode,
            beta=self.beta,
        )
        return replace(evaluation, duration_ms=(time.perf_counter() - started) * 1000)

    def _correctness(
        self,
        claims: Sequence[CheckableClaim],
        answer: str,
        reference: str,
        question: str | None,
    ) -> tuple[CorrectnessInputs, list[ClaimVerdict]]:
        """Precision (answer claims the reference states) and recall (the other way).

        An answer claim the reference contradicts (a different number or name for the
        same thing, the opposite polarity) is marked so, with the reference's span; one
        the reference says nothing about is neither supported nor contradicted.

        A reference answers the question: "Paris." to "What is the capital of France?"
        states that the capital of France is Paris. So the question is the shared premise
        of both sides: its words count as stated on either side, though only the other
        side can vouch for a number (a number the answer changed is not excused by the
        question).
        """
        premise = premise_of(question, self.max_context_chars)
        reference_context = Context(reference, id="reference")
        reference_index = [index_context(0, reference_context, self.max_context_chars)]
        if premise is not None:
            reference_index.append(premise)
        reference_contexts = (reference_context, *(() if premise is None else (premise.context,)))
        # A claim contradicts the reference only where it says something else of the
        # same thing: one differing value.
        against_reference = [
            self._judge_claim(c, reference_index, reference_contexts, one_value=True)
            for c in claims
        ]
        precision_hits = tuple(
            v.verdict in (Verdict.SUPPORTED, Verdict.INFERRED) for v in against_reference
        )
        contradicted = tuple(v.verdict is Verdict.CONTRADICTED for v in against_reference)
        conflicts = tuple(
            v.quote if v.verdict is Verdict.CONTRADICTED else None for v in against_reference
        )
        answer_context = Context(answer, id="answer")
        answer_index = [index_context(0, answer_context, self.max_context_chars)]
        if premise is not None:
            answer_index.append(premise)
        answer_contexts = (answer_context, *(() if premise is None else (premise.context,)))
        reference_claims = align_name_forms(checkable_claims(reference), answer_index)
        reference_verdicts = [
            self._judge_claim(c, answer_index, answer_contexts) for c in reference_claims
        ]
        # The question alone does not cover a reference claim that restates it: the
        # answer must state at least one of the claim's words.
        said = answer_index[0].positions
        recall_hits = tuple(
            v.verdict in (Verdict.SUPPORTED, Verdict.INFERRED)
            and any(t.norm in said for t in c.tokens)
            for c, v in zip(reference_claims, reference_verdicts, strict=True)
        )
        inputs = CorrectnessInputs(precision_hits, recall_hits, contradicted, conflicts)
        return inputs, reference_verdicts

    def _judge_claim(
        self,
        checkable: CheckableClaim,
        indexed: Sequence[IndexedContext],
        contexts: Sequence[Context],
        *,
        facts: RecordFacts = NO_FACTS,
        align: bool = True,
        one_value: bool = False,
    ) -> ClaimVerdict:
        """The claim's verdict against ``contexts``: the first the rule table gives."""
        if not indexed:
            return ClaimVerdict(
                checkable.claim, Verdict.NOT_FOUND, reason="no context to check against"
            )
        alignment = ClaimAlignment(checkable, indexed, contexts, self, facts, one_value, align)
        return decide(alignment, self.rules)


# Claims of one answer aligned character by character at most; the rest cite their token
# window as it is (an answer of thousands of claims stays linear and quick).
_MAX_FUZZY_ALIGNMENTS = 256
