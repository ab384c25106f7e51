"""``LexicalJudge``: the offline judge. No network, no model, deterministic and fast.

Each answer claim (a sentence or coordinated clause) is aligned to its best window
in the contexts by content-token coverage, and the window is then aligned to the
claim character by character with rapidfuzz to cut the evidence span. Numbers,
dates, times and capitalised names in a claim must appear in the aligned window.

Verdicts:

- ``SUPPORTED``: one window covers nearly all of the claim's content words and all of
  its numbers and names; the evidence is that window, verified against the context.
- ``CONTRADICTED``: a window covers the claim's other words but carries a different
  number or name where the claim has its own, a structured value says the opposite, or
  the sentence the claim restates denies what it affirms ("cannot be returned" as "can
  be returned", ``_lexical_polarity``), or gives the claim's number another unit of the
  same kind ("30 °C" as "30 °F", ``_lexical_units``); the conflicting span is the
  evidence.
- ``INFERRED``: the claim's words and all its numbers and names occur across the
  contexts, but no single window states it; one window must still hold a share of
  them (``span_coverage``): words scattered one by one over the contexts state
  nothing together. Structured contexts are exempt (their values sit under keys).
- ``NOT_FOUND``: otherwise, and where a claim widens its passage: a universal word
  ("always", "for everyone", "automatically") no context uses, dropping the passage's
  condition, or a superlative no prose context states (``_lexical_scope``).

A claim's number that the contexts state only far from the rest of what the claim
says ("killed 16 Sherpas" where 16 counts something else) is ``NOT_FOUND``, unless
a passage states it beside a word of the claim. The ordinary words of the
user's question are not new content: a claim restating the question may be
``INFERRED`` on them, though only a context can make it ``SUPPORTED``, and only a
context vouches for a name or a number (a false premise echoed from the question is
not faithful). For correctness the question is the premise shared by answer and
reference ("Paris." answers "What is the capital of France?").

Structured contexts of any schema (JSON, ``key: value`` lines, Markdown and CSV
tables) are read as facts (``_lexical_structured``): a claim naming a yes/no value by
the words of its key with the opposite polarity is ``CONTRADICTED``, one stating a
value the data leaves unknown is ``NOT_FOUND``; a weekly schedule, in whatever time
format, is read into days and minutes (``_lexical_time``), and a claim that opens on a
day without hours, closes on a day with hours, or gives other hours is
``CONTRADICTED``.

Sentences that talk to the user or about the sources ("Sure!", "I don't know.", "The
passages do not say ...", "(Ref: Passage 1)") or refer the user elsewhere ("consult a
healthcare professional") are not claims; cited passage numbers and part labels
("Step 6:") are not facts. Normalisation is generic (see ``_lexical_tokens``): case,
accents, light stemming, numbers in words and digits, clock times, months, weekdays,
units and durations, temperature scales, derived forms of names ("Venezuelan" for
"Venezuela"), acronyms ("U.S." for "United States"), and camelCase / snake_case keys.
"""

from __future__ import annotations

import asyncio
import re
import time
from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from rapidfuzz import fuzz

from ragpulse.evaluation.metrics import (
    DEFAULT_CORRECTNESS_MODE,
    CorrectnessInputs,
    CorrectnessMode,
    assemble,
    check_correctness_mode,
)
from ragpulse.evaluation.types import (
    ALL_METRICS,
    CORRECTNESS,
    AnnotatorKind,
    Claim,
    ClaimVerdict,
    Context,
    Evaluation,
    Evidence,
    RagRecord,
    Verdict,
)
from ragpulse.evaluation.vector import extend
from ragpulse.judges._lexical_claims import (
    CheckableClaim,
    IndexedContext,
    align_name_forms,
    align_surface_forms,
    checkable_claims,
    index_context,
    question_words,
)
from ragpulse.judges._lexical_flags import (
    FlagIndex,
    FlagMention,
    flag_mentions,
    index_flags,
    record_flags,
)
from ragpulse.judges._lexical_polarity import polarity_flip
from ragpulse.judges._lexical_scope import sentence_bounds, widening_words
from ragpulse.judges._lexical_structured import Fact, read_facts
from ragpulse.judges._lexical_time import Schedule, read_schedule, schedule_conflict
from ragpulse.judges._lexical_tokens import STOP_WORDS, WEEKDAYS, Token, key_words, tokenize
from ragpulse.judges._lexical_units import changed_unit
from ragpulse.judges._lexical_vector import lexical_vector

__all__ = ["LexicalJudge"]


@dataclass(slots=True)
class _Alignment:
    context: IndexedContext
    first: int
    last: int
    covered: frozenset[str]
    weight: float


# --- the judge -----------------------------------------------------------------------


class LexicalJudge:
    """Offline judge: fuzzy alignment of each claim to the contexts, numbers and names exact.

    Thread-safe (no mutable state after construction) and deterministic.
    """

    annotator_kind: AnnotatorKind = "CODE"
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
        number_reach: float = 1.0,
        span_coverage: float = 0.3,
        correctness_mode: str | None = None,
        beta: float = 1.0,
        mode: str | None = None,
    ) -> None:
        if mode is not None and correctness_mode is not None and mode != correctness_mode:
            raise ValueError(
                f"mode={mode!r} and correctness_mode={correctness_mode!r} disagree; "
                "pass correctness_mode only"
            )
        self.correctness_mode: CorrectnessMode = check_correctness_mode(
            correctness_mode or mode or DEFAULT_CORRECTNESS_MODE
        )
        """How correctness scores (see ``ragpulse.evaluation.metrics``); ``mode`` is its
        older spelling, still accepted."""
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
        self.number_reach = number_reach
        """How far (in windows) from the aligned window a claim's number may be stated."""
        self.span_coverage = span_coverage
        """Share of a claim's content weight one window must hold for INFERRED (0: any).

        Not applied against structured contexts, whose fields answers summarise loosely.
        """
        self.beta = beta

    @property
    def mode(self) -> CorrectnessMode:
        """The correctness mode under its older name."""
        return self.correctness_mode

    @mode.setter
    def mode(self, value: str) -> None:
        self.correctness_mode = check_correctness_mode(value)

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
        asked = question_words(record.question)
        # Structured contexts are read once, as facts: their yes/no values and any
        # weekly schedule.
        facts = [read_facts(c.context.text) for c in indexed]
        flags = index_flags(
            [f for i, found in enumerate(facts) for f in record_flags(found, key_words, i)]
        )
        schedule = next(
            ((i, s) for i, found in enumerate(facts) if (s := read_schedule(found)) is not None),
            None,
        )
        # Data answers summarise loosely (their words are keys, not sentences): a context
        # that is mostly facts lowers the coverage an INFERRED verdict needs.
        structured = any(
            _mostly_facts(found, c.context.text) for found, c in zip(facts, indexed, strict=True)
        )
        verdicts = [
            _check_schedule(
                self._judge_with_flags(
                    claim,
                    indexed,
                    record.contexts,
                    flags,
                    asked,
                    structured,
                    align=number < _MAX_FUZZY_ALIGNMENTS,
                ),
                schedule,
                record.contexts,
            )
            for number, claim in enumerate(claims)
        ]
        correctness_inputs = None
        reference_verdicts: list[ClaimVerdict] = []
        if CORRECTNESS in metrics and record.reference and claims:
            correctness_inputs, reference_verdicts = self._correctness(
                claims, answer, record.reference, record.question
            )
        judged, vector = lexical_vector(
            self,
            record,
            metrics,
            claims,
            verdicts,
            indexed,
            None
            if correctness_inputs is None
            else (correctness_inputs.recall_hits, reference_verdicts),
        )
        evaluation = assemble(
            judged,
            metrics=metrics,
            judge=self.name,
            annotator_kind=self.annotator_kind,
            correctness_inputs=correctness_inputs,
            reference_claims=reference_verdicts,
            mode=self.correctness_mode,
            beta=self.beta,
        )
        evaluation = extend(evaluation, record, metrics, vector)
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
        premise = _premise(question, self.max_context_chars)
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

    # --- one claim ----------------------------------------------------------------------

    def _judge_with_flags(
        self,
        checkable: CheckableClaim,
        indexed: Sequence[IndexedContext],
        contexts: Sequence[Context],
        flags: FlagIndex,
        asked: frozenset[str],
        structured: bool,
        *,
        align: bool = True,
    ) -> ClaimVerdict:
        """The claim's verdict, checked against the yes/no facts of structured contexts.

        A span may hold every word of the claim and still say the opposite ("Waterproof:
        no"), so the yes/no values are checked first.
        """
        claim = checkable.claim
        mentions = flag_mentions(claim.text, [(t.norm, t.start) for t in checkable.tokens], flags)
        for mention in mentions:
            if mention.agrees is False:
                value = "true" if mention.flag.value else "false"
                evidence = _fact_evidence(mention.flag.fact, mention.flag.context_index, contexts)
                return _verdict(
                    claim,
                    Verdict.CONTRADICTED,
                    evidence,
                    reason=f"the context has {mention.flag.key}: {value}",
                    unsupported=_mention_ranges(checkable, mention),
                )
        verdict = self._judge_claim(
            checkable, indexed, contexts, record=structured, asked=asked, align=align
        )
        if not mentions or verdict.verdict is Verdict.CONTRADICTED:
            return verdict
        unknown = [m.flag.key for m in mentions if m.agrees is None]
        # "There is no information about WiFi" is what the record says of an unknown.
        if unknown and not _HEDGE.search(claim.text):
            return ClaimVerdict(
                claim,
                Verdict.NOT_FOUND,
                reason="the context leaves unknown: " + ", ".join(unknown),
                unsupported=tuple(
                    r for m in mentions if m.agrees is None for r in _mention_ranges(checkable, m)
                ),
            )
        if verdict.verdict is Verdict.SUPPORTED:
            return verdict
        # Every named flag agrees: the claim paraphrases the record, unless it also
        # carries a number or name the contexts do not have.
        keys_found = all(
            any(t.norm in c.positions for c in indexed) for t in checkable.tokens if t.key
        )
        if verdict.verdict is Verdict.NOT_FOUND and keys_found:
            return ClaimVerdict(
                claim,
                Verdict.INFERRED,
                reason="the context's yes/no values state it: "
                + ", ".join(m.flag.key for m in mentions),
            )
        return verdict

    def _judge_claim(
        self,
        checkable: CheckableClaim,
        indexed: Sequence[IndexedContext],
        contexts: Sequence[Context],
        *,
        record: bool = False,
        asked: frozenset[str] = frozenset(),
        align: bool = True,
        one_value: bool = False,
    ) -> ClaimVerdict:
        """The claim's verdict against ``contexts``.

        Ordinary words of the user's question (``asked``) are not new content: an answer
        that restates the question ("the proper way to dispose of a worn flag is ...")
        may be INFERRED on them, though only a context can make it SUPPORTED, and only a
        context can vouch for a name or a number.

        With ``one_value``, a differing value is a contradiction only when it is the
        claim's one difference (one number, or one run of name words): a claim that
        differs in two ("the Solo plan costs $6" against "the Business plan costs $19")
        speaks of another thing, and is NOT_FOUND.
        """
        claim, tokens = checkable.claim, checkable.tokens
        weights: dict[str, float] = {}
        keys: set[str] = set()
        for token in tokens:
            weights[token.norm] = 2.0 if token.key else 1.0
            if token.key:
                keys.add(token.norm)
        if not weights or not indexed:
            return ClaimVerdict(claim, Verdict.NOT_FOUND, reason="no context to check against")
        total = sum(weights.values())
        window = max(self.min_window_tokens, int(len(tokens) * self.window_factor))
        best: _Alignment | None = None
        for ctx in indexed:
            alignment = self._best_window(ctx, weights, window)
            if alignment is not None and (best is None or alignment.weight > best.weight):
                best = alignment
        in_contexts = {norm for norm in weights if any(norm in c.positions for c in indexed)}
        numbers = {t.norm for t in tokens if t.number}
        # Only a context vouches for a name or a number: a question's false premise ("Is
        # the tower 500 metres tall?") must not make its echo in the answer faithful.
        everywhere = in_contexts | {n for n in weights if n in asked and n not in keys}
        global_share = sum(weights[n] for n in everywhere) / total
        missing_keys = keys - everywhere
        if best is not None:
            share = best.weight / total
            window_missing_keys = keys - best.covered
            if share >= self.supported_coverage and not window_missing_keys:
                evidence = self._evidence(claim, best, contexts, align=align)
                if _polarity_conflict(checkable.negated, best):
                    return _verdict(
                        claim,
                        Verdict.CONTRADICTED,
                        evidence,
                        reason="a yes/no value in the span says the opposite",
                    )
                if (restated := _restated(checkable, best, indexed, contexts, record)) is not None:
                    return restated
                return _verdict(
                    claim,
                    Verdict.SUPPORTED,
                    evidence,
                    reason=f"{share:.0%} of the claim's words in one span",
                )
            # A contradiction needs a claim value that occurs nowhere in the contexts, in a
            # window that otherwise matches the claim (its remaining words and values).
            absent = window_missing_keys - in_contexts
            rest = total - sum(weights[n] for n in absent)
            if (
                absent
                and rest > 0
                and (not one_value or _value_runs(tokens, absent) == 1)
                and best.weight / rest >= self.contradiction_coverage
                and (other := _other_key_at(best, absent, tokens, names=not record)) is not None
            ):
                # The evidence is the window with the context's own value in it.
                first, last = min(best.first, other), max(best.last, other)
                ctx = best.context
                evidence = _span_evidence(
                    ctx.index, ctx.tokens[first].start, ctx.tokens[last].end, contexts
                )
                return _verdict(
                    claim,
                    Verdict.CONTRADICTED,
                    evidence,
                    reason="a matching span has a different value than "
                    + ", ".join(sorted(absent)),
                    unsupported=_ranges_of(checkable, absent),
                )
        inferred_coverage = self.record_inferred_coverage if record else self.inferred_coverage
        # A number found in the contexts but far from the rest of what the claim says
        # ("killed 16 Sherpas" where 16 counts something else) is not stated by them,
        # unless a passage states it beside a word of the claim (facts combined
        # across passages are INFERRED). Records are exempt: their values sit under
        # keys, not in sentences.
        reach = int(window * self.number_reach)
        numbers &= in_contexts
        stray = (
            set()
            if missing_keys or record
            else {
                n
                for n in numbers
                if best is None
                or (
                    not _near(best, n, reach)
                    and not _stated_elsewhere(indexed, best, n, weights, reach)
                )
            }
        )
        if stray:
            return ClaimVerdict(
                claim,
                Verdict.NOT_FOUND,
                reason="no span states it with " + ", ".join(sorted(stray)),
                unsupported=_ranges_of(checkable, stray),
            )
        window_share = 0.0 if best is None else best.weight / total
        if (
            not missing_keys
            and global_share >= inferred_coverage
            and (record or window_share >= self.span_coverage)
        ):
            if best is not None and (
                restated := _restated(checkable, best, indexed, contexts, record)
            ):
                return restated
            return ClaimVerdict(
                claim, Verdict.INFERRED, reason=f"{global_share:.0%} of words found"
            )
        if missing_keys:
            reason = f"not in the contexts: {', '.join(sorted(missing_keys))}"
        elif global_share >= inferred_coverage:
            reason = f"its words are scattered: at most {window_share:.0%} in one span"
        else:
            reason = f"only {global_share:.0%} of the claim's words found"
        unstated = missing_keys or set(weights) - everywhere
        return ClaimVerdict(
            claim, Verdict.NOT_FOUND, reason=reason, unsupported=_ranges_of(checkable, unstated)
        )

    def _best_window(
        self, ctx: IndexedContext, weights: dict[str, float], window: int
    ) -> _Alignment | None:
        hits: list[tuple[int, str]] = []
        for norm in weights:
            positions = ctx.positions.get(norm)
            if positions:
                hits.extend((p, norm) for p in positions[: self.max_hits_per_token])
        if not hits:
            return None
        hits.sort()
        # Two pointers over hit positions: the window of `window` tokens with the most
        # distinct claim weight inside.
        counts: dict[str, int] = {}
        weight = 0.0
        best_weight = -1.0
        best_range = (0, 0)
        left = 0
        for right, (pos, norm) in enumerate(hits):
            if counts.get(norm, 0) == 0:
                weight += weights[norm]
            counts[norm] = counts.get(norm, 0) + 1
            while pos - hits[left][0] >= window:
                left_norm = hits[left][1]
                counts[left_norm] -= 1
                if counts[left_norm] == 0:
                    weight -= weights[left_norm]
                left += 1
            if weight > best_weight:
                best_weight = weight
                best_range = (left, right)
        first, last = best_range
        covered = frozenset(norm for _, norm in hits[first : last + 1])
        return _Alignment(ctx, hits[first][0], hits[last][0], covered, best_weight)

    def _evidence(
        self,
        claim: Claim,
        alignment: _Alignment,
        contexts: Sequence[Context],
        *,
        align: bool = True,
    ) -> Evidence | None:
        tokens = alignment.context.tokens
        text = alignment.context.context.text
        start = tokens[alignment.first].start
        end = tokens[alignment.last].end
        # Character-level alignment inside the window tightens the span to what the
        # claim actually says.
        region = text[start:end]
        # The alignment costs claim length times region length: past a sentence's length
        # the window is the evidence as it is (keeps the judge linear in its input).
        aligned = None
        if (
            align
            and len(claim.text) <= _MAX_ALIGNED_CHARS
            and len(region) <= 2 * _MAX_ALIGNED_CHARS
        ):
            aligned = fuzz.partial_ratio_alignment(claim.text.lower(), region.lower())
        if aligned is not None and aligned.score >= 60 and aligned.dest_end > aligned.dest_start:
            a_start, a_end = start + aligned.dest_start, start + aligned.dest_end
            a_start, a_end = _to_word_bounds(text, a_start, a_end)
            if a_end - a_start >= (end - start) // 2:
                start, end = a_start, a_end
        # The span is cut from the context itself, so it verifies by construction; no
        # search is needed to find it again.
        return Evidence(
            context_index=alignment.context.index,
            start=start,
            end=end,
            text=text[start:end],
            context_id=alignment.context.context.id,
        )


# --- helpers -------------------------------------------------------------------------

# Words by which a claim says that something is not known rather than stating it.
_HEDGE = re.compile(
    r"\b(?:information|unclear|unknown|uncertain|unspecified|specif\w*|mention\w*|"
    r"provided|indicated?|listed|clear|null)\b",
    re.IGNORECASE,
)
_FLAG_AFTER = re.compile(r"\s*[\"']?\s*:\s*(true|false)\b", re.IGNORECASE)
_BOOL_TRUE = "true"
_BOOL_FALSE = "false"
# Claims of one answer aligned character by character at most; the rest cite their token
# window as it is (an answer of thousands of claims stays linear and quick).
_MAX_FUZZY_ALIGNMENTS = 256
# Claims longer than this are not aligned character by character (see ``_evidence``).
_MAX_ALIGNED_CHARS = 1_000
# Occurrences of a number looked at when checking where else it is stated (bounds the work).
_MAX_NUMBER_SITES = 50
# Tokens between a number and a claim word for the aligned passage to state them together
# away from its window.
_BESIDE = 3
# How far (in tokens) either side of the aligned window the sentence a claim restates
# is looked for (see ``_negation_flip``).
_RESTATED_REACH = 60
# How far beyond the aligned window a differing number or name may sit.
_CONTRADICTION_MARGIN = 3


def _stated_elsewhere(
    indexed: Sequence[IndexedContext],
    best: _Alignment,
    norm: str,
    weights: dict[str, float],
    reach: int,
) -> bool:
    """Whether a context states ``norm`` beside another claim word.

    In another context "beside" is within ``reach``; in the aligned one, outside the
    window, within ``_BESIDE`` tokens ("visit five cities" where the window is about
    the trip's dates).
    """
    for ctx in indexed:
        sites = ctx.positions.get(norm)
        if not sites:
            continue
        # In the aligned passage, away from its window, only the number's own phrase
        # counts: a summary gathers facts from all over one source.
        r = _BESIDE if ctx is best.context else reach
        others = sorted(p for word in weights if word != norm for p in ctx.positions.get(word, ()))
        for position in sites[:_MAX_NUMBER_SITES]:
            at = bisect_left(others, position - r)
            if at < len(others) and others[at] <= position + r:
                return True
    return False


def _near(alignment: _Alignment, norm: str, reach: int) -> bool:
    """Whether ``norm`` occurs within ``reach`` tokens of the aligned window."""
    lo, hi = alignment.first - reach, alignment.last + reach
    return any(lo <= p <= hi for p in alignment.context.positions.get(norm, ()))


def _check_schedule(
    verdict: ClaimVerdict, schedule: tuple[int, Schedule] | None, contexts: Sequence[Context]
) -> ClaimVerdict:
    """The verdict, or CONTRADICTED where the claim misstates a context's weekly schedule."""
    if schedule is None or verdict.verdict is Verdict.CONTRADICTED:
        return verdict
    index, days = schedule
    conflict = schedule_conflict(verdict.claim.text, days)
    if conflict is None:
        return verdict
    cited = [days[d] for d in conflict.days if d in days] or list(days.values())
    start, end = min(d.start for d in cited), max(d.end for d in cited)
    evidence = _span_evidence(index, start, end, contexts)
    return _verdict(
        verdict.claim,
        Verdict.CONTRADICTED,
        evidence,
        reason=conflict.reason,
    )


def _verdict(
    claim: Claim,
    verdict: Verdict,
    evidence: Evidence | None,
    reason: str,
    unsupported: tuple[tuple[int, int], ...] = (),
) -> ClaimVerdict:
    """``verdict`` on ``claim`` with ``evidence`` as its span and its text as the quote."""
    return ClaimVerdict(
        claim,
        verdict,
        evidence=evidence,
        quote=evidence.text if evidence else None,
        reason=reason,
        unsupported=unsupported,
    )


def _span_evidence(
    index: int, start: int, end: int, contexts: Sequence[Context]
) -> Evidence | None:
    """Evidence cut from the context itself (so it verifies by construction)."""
    if not 0 <= index < len(contexts):
        return None
    text = contexts[index].text
    if not 0 <= start < end <= len(text):
        return None
    return Evidence(index, start, end, text[start:end], contexts[index].id)


def _fact_evidence(fact: Fact, index: int, contexts: Sequence[Context]) -> Evidence | None:
    return _span_evidence(index, fact.start, fact.end, contexts)


# Claim words either side of an unstated word that are flagged with it: what the
# contexts do not state is a phrase ("an average rating of 4.5 stars"), not one token.
_PHRASE_REACH = 2


def _value_runs(tokens: Sequence[Token], norms: Collection[str]) -> int:
    """How many separate values the claim's words in ``norms`` make (adjacent words: one)."""
    runs = 0
    inside = False
    for token in tokens:
        hit = token.norm in norms
        if hit and not inside:
            runs += 1
        inside = hit
    return runs


def _ranges_of(
    checkable: CheckableClaim, norms: Collection[str], reach: int = _PHRASE_REACH
) -> tuple[tuple[int, int], ...]:
    """Answer ranges of the claim's words in ``norms``, each with its phrase around it.

    The phrase is the word and ``reach`` content words either side, extended to the
    clause they sit in when its punctuation is near ("with an average rating of 4.5
    stars").
    """
    claim = checkable.claim
    if claim.answer_start is None or not norms:
        return ()
    tokens = checkable.tokens
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


# Punctuation that closes a clause ("with an average rating of 4.5 stars, ...").
_CLAUSE_MARKS = ',;:()"—'
# How far (in characters) a flagged phrase is extended to reach its clause's bounds: the
# unstated phrase is the clause it sits in, when that clause is short.
_CLAUSE_SLACK = 40


def _to_clause(text: str, first: int, last: int) -> tuple[int, int]:
    """``text[first:last]`` extended to its clause's punctuation where that is near.

    Only ``_CLAUSE_SLACK`` characters either side are searched (linear in the claim).
    """
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


def _mention_ranges(checkable: CheckableClaim, mention: FlagMention) -> tuple[tuple[int, int], ...]:
    """The answer range of a yes/no value as the claim names it (with its negation)."""
    # The key's own words and their clause: in a list ("outdoor seating, Wi-Fi, and
    # takeout") the neighbouring items are other facts, checked on their own.
    return _ranges_of(checkable, frozenset(mention.flag.words), reach=0)


# Share of a context's characters its facts must cover for it to count as data.
_DATA_SHARE = 0.5


def _mostly_facts(facts: Sequence[Fact], text: str) -> bool:
    covered = sum(f.end - f.start for f in facts)
    return bool(text) and covered >= _DATA_SHARE * len(text.strip())


def _premise(question: str | None, max_chars: int) -> IndexedContext | None:
    """The question as a context of its words: names and ordinary words, no numbers."""
    if not question or not question.strip():
        return None
    indexed = index_context(1, Context(question, id="question"), max_chars)
    numbers = {t.norm for t in indexed.tokens if t.number}
    for norm in numbers:
        indexed.positions.pop(norm, None)
    return indexed


def _other_key_at(
    alignment: _Alignment, keys: set[str], claim_tokens: list[Token], *, names: bool = True
) -> int | None:
    """Where the window holds a number or name the claim does not have (a different value).

    Without ``names``, only a number counts: in a structured context a window spans
    several fields, and a capitalised word beside the claim's is another field's value
    more often than the claim's counterpart.
    """
    tokens = alignment.context.tokens
    text = alignment.context.context.text
    claim_norms = {t.norm for t in claim_tokens}
    claim_has_number = any(t.number for t in claim_tokens if t.norm in keys)
    uncovered = keys - alignment.covered
    claim_misses_a_name = names and any(not t.number for t in claim_tokens if t.norm in uncovered)
    lo = max(0, alignment.first - _CONTRADICTION_MARGIN)
    hi = min(len(tokens), alignment.last + 1 + _CONTRADICTION_MARGIN)
    for at in range(lo, hi):
        token = tokens[at]
        if token.norm in claim_norms:
            continue
        if token.number and claim_has_number:
            return at
        if (
            not token.number
            and text[token.start].isupper()
            and token.norm not in STOP_WORDS
            and token.norm not in WEEKDAYS
            and claim_misses_a_name
        ):
            return at
    return None


def _restated(
    checkable: CheckableClaim,
    alignment: _Alignment,
    indexed: Sequence[IndexedContext],
    contexts: Sequence[Context],
    record: bool,
) -> ClaimVerdict | None:
    """The verdict of a claim whose words a passage states, where it says otherwise:
    the opposite polarity (CONTRADICTED) or a wider scope (NOT_FOUND); else None.

    Against structured contexts (``record``) a superlative is what a summary computes
    from the values, not a widening."""
    claim = checkable.claim
    said = tokenize(claim.text, names=False)
    flipped = _negation_flip(checkable, said, alignment, contexts)
    if flipped is not None:
        return flipped

    def stated(norm: str) -> bool:
        return any(norm in c.positions for c in indexed)

    tokens, text = alignment.context.tokens, alignment.context.context.text
    start, end = sentence_bounds(text, tokens[alignment.first].start, tokens[alignment.last].end)
    lo, hi = alignment.first, alignment.last
    while lo > 0 and tokens[lo - 1].start >= start:
        lo -= 1
    while hi + 1 < len(tokens) and tokens[hi + 1].start < end:
        hi += 1
    passage = [t.norm for t in tokens[lo : hi + 1]]
    if (changed := changed_unit(said, stated, passage)) is not None:
        unit, other = changed
        evidence = _span_evidence(alignment.context.index, start, end, contexts)
        return _verdict(
            claim,
            Verdict.CONTRADICTED,
            evidence,
            reason=f"the context gives {other}, not {unit.norm}",
            unsupported=_unit_range(claim, said, unit),
        )
    wider = widening_words(claim.text, said, stated, text[start:end], superlatives=not record)
    if not wider:
        return None
    ranges: list[tuple[int, int]] = []
    if claim.answer_start is not None:
        for i, token in enumerate(said):
            if token.norm in wider:
                last = said[min(len(said) - 1, i + _WIDENED_REACH)]
                ranges.append((claim.answer_start + token.start, claim.answer_start + last.end))
    return ClaimVerdict(
        claim,
        Verdict.NOT_FOUND,
        reason="the contexts do not say it so widely: " + ", ".join(sorted(wider)),
        unsupported=tuple(ranges),
    )


def _unit_range(claim: Claim, said: Sequence[Token], unit: Token) -> tuple[tuple[int, int], ...]:
    """The answer range of a unit and the number beside it ("13.9 °F")."""
    if claim.answer_start is None:
        return ()
    at = said.index(unit)
    first = said[at - 1] if at > 0 and said[at - 1].number else unit
    return ((claim.answer_start + min(first.start, unit.start), claim.answer_start + unit.end),)


# Words after a widening word flagged with it ("any flight", "the fastest response time").
_WIDENED_REACH = 2


def _negation_flip(
    checkable: CheckableClaim,
    said: Sequence[Token],
    alignment: _Alignment,
    contexts: Sequence[Context],
) -> ClaimVerdict | None:
    """CONTRADICTED where the sentence the claim restates negates what it affirms (or
    the reverse): "X cannot be returned" stated as "X can be returned"."""
    ctx = alignment.context
    # The sentence restated may sit just beside the window: its words also occur in
    # the window's other sentences ("Sale items can be returned ..." before
    # "Personalised items cannot be returned").
    reach = _RESTATED_REACH
    flip = polarity_flip(
        checkable.claim.text,
        said,
        ctx.tokens,
        ctx.context.text,
        max(0, alignment.first - reach),
        min(len(ctx.tokens) - 1, alignment.last + reach),
    )
    if flip is None:
        return None
    evidence = _span_evidence(ctx.index, flip.start, flip.end, contexts)
    return _verdict(
        checkable.claim,
        Verdict.CONTRADICTED,
        evidence,
        reason=f"the context states the opposite of {flip.word!r}",
        unsupported=_ranges_of(checkable, (flip.word,)),
    )


def _polarity_conflict(negated: bool, alignment: _Alignment) -> bool:
    """A structured-data flag in the window says the opposite of the claim."""
    tokens = alignment.context.tokens
    text = alignment.context.context.text
    flags: set[str] = set()
    for token in tokens[alignment.first : alignment.last + 1]:
        match = _FLAG_AFTER.match(text, token.end)
        if match is not None:
            flags.add(match.group(1).lower())
    if len(flags) != 1:
        return False
    return (negated and _BOOL_TRUE in flags) or (not negated and _BOOL_FALSE in flags)


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
