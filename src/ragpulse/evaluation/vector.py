"""The rest of the vector: relevancy, completeness, citation, answerability, strict mode.

Pure functions over what a judge found. A judge decomposes the answer once; the
claims it judged against the contexts also carry their citations, and the
judge adds what only it can see (which question parts the answer addresses,
which required points it covers, whether it abstains and whether the contexts
could have answered). ``extend`` turns that into metric results beside the
ones ``assemble`` made, and into the evaluation's slices. The metrics are
never averaged into one number.

- relevancy: question parts the answer addresses / question parts.
- completeness: required points the answer covers / required points; the points
  come from the rubric, else from the reference's claims (the recall side of
  correctness); with neither the score is undefined.
- citation: cited claims whose ``[N]`` markers (1-based, contexts in retrieval
  order) point at a passage that supports them / cited claims; undefined when
  the answer cites nothing.
- answerability: an abstention ("I don't know") scores groundedness 0.0 when the
  contexts could answer, and is no claim at all (undefined) when they could not.
- strict: an INFERRED claim counts as unfaithful (DeepEval's
  ``penalize_ambiguous_claims``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from ragpulse.evaluation.diagnosis import diagnose
from ragpulse.evaluation.types import (
    FAITHFULNESS,
    GROUNDEDNESS,
    Claim,
    ClaimVerdict,
    ContextJudgement,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Verdict,
)
from ragpulse.metrics import _registry
from ragpulse.metrics._spec import ScoreInputs

__all__ = [
    "SLICE_ABSTAINED",
    "SLICE_CITED",
    "SLICE_QUESTION",
    "SLICE_SOURCES",
    "STRICT_PREFIX",
    "VectorInputs",
    "apply_strict",
    "attach_citations",
    "citation",
    "citation_markers",
    "cited_support",
    "completeness",
    "extend",
    "marker_spans",
    "question_parts",
    "relevancy",
    "slices",
    "strict_faithfulness",
    "used_contexts",
    "without_markers",
]

STRICT_PREFIX = "strict:"
"""How a faithfulness explanation made in strict mode begins."""
SLICE_SOURCES = "sources"
"""How many contexts the answer's supported claims draw on: ``none``, ``single``, ``multi``."""
SLICE_QUESTION = "question"
"""``single_part`` or ``multi_part`` question (``none`` without a question)."""
SLICE_ABSTAINED = "abstained"
"""``true`` when the answer abstains."""
SLICE_CITED = "cited"
"""``true`` when the answer cites a passage with an ``[N]`` marker."""

# "[2]", "[1][3]", "[1, 3]": 1-based passage numbers.
_MARKER = re.compile(r"\[\s*(\d{1,4}(?:\s*,\s*\d{1,4})*)\s*\]")
_SENTENCE_END = re.compile(r"[.!?\n]")
# A question splits into parts at a sentence end, a semicolon, or a coordinator that
# opens a new question ("... of Lumarex, and what dose ..."); "nausea, headache and
# dizziness" stays one part.
_INTERROGATIVE = (
    r"(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|"
    r"could|should|would|will|may)"
)
_PART_BREAK = re.compile(
    rf"(?<=\?)\s+|;\s*|,?\s+(?:and|or|also|plus|as well as)\s+(?={_INTERROGATIVE}\b)"
    rf"|,\s+(?={_INTERROGATIVE}\b)",
    re.IGNORECASE,
)
_MIN_PART_CHARS = 3


@dataclass(frozen=True, slots=True)
class VectorInputs:
    """What a judge found beyond the claims' verdicts."""

    question_parts: tuple[ClaimVerdict, ...] = ()
    """Each question part, SUPPORTED when the answer addresses it (empty: not checked)."""
    required_points: tuple[ClaimVerdict, ...] = ()
    """Each rubric point, SUPPORTED when the answer covers it (empty: no rubric judged)."""
    recall_hits: tuple[bool, ...] | None = None
    """Reference claims the answer covers, for completeness without a rubric."""
    reference_claims: tuple[ClaimVerdict, ...] = ()
    """Those reference claims, to name the missing ones."""
    abstained: bool | None = None
    answerable: bool | None = None
    contexts: tuple[ContextJudgement, ...] = ()
    """Each retrieved passage's relevance (empty: not judged)."""
    reference_support: tuple[ClaimVerdict, ...] | None = None
    """The reference's claims judged against the passages (None: not judged)."""


def citation_markers(answer: str) -> list[tuple[int, tuple[int, ...]]]:
    """Every ``[N]`` marker of the answer: its position and the 0-based contexts it cites."""
    found = []
    for match in _MARKER.finditer(answer):
        numbers = tuple(int(n) - 1 for n in match.group(1).split(","))
        found.append((match.start(), numbers))
    return found


def marker_spans(text: str) -> list[tuple[int, int]]:
    """The character ranges of ``text``'s ``[N]`` citation markers."""
    return [match.span() for match in _MARKER.finditer(text)]


def without_markers(text: str) -> str:
    """``text`` with its ``[N]`` citation markers taken out (a claim as a model reads it)."""
    return " ".join(_MARKER.sub(" ", text).split())


def _sentence_ended(answer: str, claim: Claim) -> bool:
    assert claim.answer_start is not None and claim.answer_end is not None
    return bool(_SENTENCE_END.search(answer[claim.answer_start : claim.answer_end].rstrip()[-1:]))


def _cites_by_marker(claims: Sequence[Claim], answer: str) -> list[tuple[int, ...]]:
    """Per claim, the contexts its markers cite (a marker belongs to the claim before it).

    A marker at a sentence's end also covers the sentence's earlier clauses that carry
    no marker of their own ("causes nausea, and headache [1]."). Claims without answer
    offsets cite nothing here.
    """
    cited: list[list[int]] = [[] for _ in claims]
    placed = sorted(
        (i for i, c in enumerate(claims) if c.answer_start is not None),
        key=lambda i: claims[i].answer_start or 0,
    )
    if not placed:
        return [() for _ in claims]
    own: list[bool] = [False] * len(claims)
    for position, numbers in citation_markers(answer):
        before = [i for i in placed if (claims[i].answer_start or 0) <= position]
        target = before[-1] if before else placed[0]
        own[target] = True
        for number in numbers:
            if number not in cited[target]:
                cited[target].append(number)
    for at, i in enumerate(placed):
        if own[i]:
            continue
        # The next marked claim of the same sentence lends its markers.
        for j in placed[at + 1 :]:
            gap = answer[claims[i].answer_end or 0 : claims[j].answer_start or 0]
            if _sentence_ended(answer, claims[i]) or _SENTENCE_END.search(gap):
                break
            if own[j]:
                cited[i] = list(cited[j])
                break
            if _sentence_ended(answer, claims[j]):
                break
    return [tuple(c) for c in cited]


def attach_citations(
    claims: Sequence[ClaimVerdict],
    answer: str,
    contexts: int,
    holds: Callable[[int, tuple[int, ...]], bool],
    *,
    cited_by_judge: Sequence[Sequence[int]] | None = None,
) -> tuple[ClaimVerdict, ...]:
    """The claims with the contexts they cite and whether the citation holds.

    ``holds(claim_index, cited)`` says whether the cited contexts (all in range)
    support the claim; a marker past the last context never holds. Where a claim's
    markers cannot be placed in the answer (no offsets), ``cited_by_judge`` (0-based)
    is used.
    """
    if cited_by_judge is None and "[" not in answer:
        return tuple(claims)  # nothing cited: the claims stand as they are
    by_marker = _cites_by_marker([c.claim for c in claims], answer)
    result = []
    for i, verdict in enumerate(claims):
        cited = by_marker[i]
        if not cited and verdict.claim.answer_start is None and cited_by_judge is not None:
            cited = tuple(cited_by_judge[i]) if i < len(cited_by_judge) else ()
        if not cited:
            result.append(dataclasses.replace(verdict, cited=(), citation_holds=None))
            continue
        in_range = all(0 <= n < contexts for n in cited)
        held = in_range and holds(i, cited)
        result.append(dataclasses.replace(verdict, cited=cited, citation_holds=held))
    return tuple(result)


def cited_support(
    verdict: ClaimVerdict, cited: Collection[int], alone: Callable[[], ClaimVerdict]
) -> bool:
    """Whether the ``cited`` passages support a claim (the ``holds`` of ``attach_citations``).

    The claim must be SUPPORTED or INFERRED; its evidence lying in a cited passage
    settles it, else ``alone()`` (the claim judged against the cited passages only) does.
    """
    if verdict.verdict not in (Verdict.SUPPORTED, Verdict.INFERRED):
        return False
    if verdict.evidence is not None and verdict.evidence.context_index in cited:
        return True
    return alone().verdict in (Verdict.SUPPORTED, Verdict.INFERRED)


def question_parts(question: str | None) -> tuple[str, ...]:
    """The separate things a question asks, in order ("What are X, and what dose Y?": 2)."""
    if not question or not question.strip():
        return ()
    parts = [p.strip(" ,;") for p in _PART_BREAK.split(question.strip())]
    return tuple(p for p in parts if len(p) >= _MIN_PART_CHARS)


def _share(verdicts: Sequence[ClaimVerdict]) -> float | None:
    if not verdicts:
        return None
    return sum(1 for v in verdicts if v.verdict is Verdict.SUPPORTED) / len(verdicts)


def relevancy(parts: Sequence[ClaimVerdict]) -> float | None:
    """Question parts the answer addresses / question parts; None without parts."""
    return _share(parts)


def completeness(
    points: Sequence[ClaimVerdict], recall_hits: Sequence[bool] | None = None
) -> float | None:
    """Required points covered / required points; the reference's claims without a rubric."""
    if points:
        return _share(points)
    if recall_hits:
        return sum(1 for hit in recall_hits if hit) / len(recall_hits)
    return None


def citation(claims: Sequence[ClaimVerdict]) -> float | None:
    """Cited claims whose citation holds / cited claims; None when nothing is cited."""
    cited = [c for c in claims if c.cited]
    if not cited:
        return None
    return sum(1 for c in cited if c.citation_holds) / len(cited)


def strict_faithfulness(claims: Sequence[ClaimVerdict]) -> float | None:
    """SUPPORTED / claims: an INFERRED claim counts as unfaithful; None without claims."""
    if not claims:
        return None
    return sum(1 for c in claims if c.verdict is Verdict.SUPPORTED) / len(claims)


def slices(evaluation: Evaluation, record: RagRecord) -> dict[str, str]:
    """The evaluation's low-cardinality cuts, for span attributes and histogram points."""
    drawn = {
        c.evidence.context_index
        for c in evaluation.claims
        if c.evidence is not None and c.verdict in (Verdict.SUPPORTED, Verdict.INFERRED)
    }
    sources = "none" if not drawn else "single" if len(drawn) == 1 else "multi"
    parts = len(question_parts(record.question))
    question = "none" if parts == 0 else "single_part" if parts == 1 else "multi_part"
    return {
        SLICE_SOURCES: sources,
        SLICE_QUESTION: question,
        SLICE_ABSTAINED: "true" if evaluation.abstained else "false",
        SLICE_CITED: "true" if any(c.cited for c in evaluation.claims) else "false",
    }


def extend(
    evaluation: Evaluation,
    record: RagRecord,
    metrics: Collection[str],
    inputs: VectorInputs,
) -> Evaluation:
    """``evaluation`` with the findings applied and every asked metric that reads them scored.

    Failed and skipped evaluations come back unchanged. An abstention scores
    groundedness 0.0 when the contexts could answer and leaves it undefined
    (``no_claims``) when they could not; either way ``abstained`` is true. Each asked
    metric whose module declares a ``score`` (``ragpulse.metrics``) is scored here from
    what the judge found, then the diagnosis is made.
    """
    if evaluation.status not in (EvalStatus.OK, EvalStatus.NO_CLAIMS):
        return evaluation
    results: dict[str, MetricResult] = dict(evaluation.metrics)
    status = evaluation.status
    explanation = evaluation.explanation
    abstained = bool(inputs.abstained) and not evaluation.claims
    if abstained and GROUNDEDNESS in metrics:
        if inputs.answerable:
            results[GROUNDEDNESS] = MetricResult(
                GROUNDEDNESS,
                0.0,
                "the answer abstains though the contexts could answer the question",
            )
            status = EvalStatus.OK
            explanation = "the answer abstains though the contexts could answer"
        else:
            results[GROUNDEDNESS] = MetricResult(
                GROUNDEDNESS,
                None,
                "the answer abstains and the contexts cannot answer: no claim to check",
                EvalStatus.NO_CLAIMS,
            )
            explanation = "the answer abstains and the contexts cannot answer"
    found = dataclasses.replace(inputs, contexts=used_contexts(evaluation, record, inputs))
    extended = dataclasses.replace(
        evaluation,
        status=status,
        explanation=explanation,
        abstained=abstained,
        answerable=inputs.answerable,
        question_parts=inputs.question_parts,
        required_points=inputs.required_points,
        contexts=found.contexts,
        reference_support=inputs.reference_support or (),
    )
    scored = ScoreInputs(extended, record, found)
    for name in metrics:
        metric = _registry.get(name)
        if metric is not None and metric.score is not None:
            results[name] = metric.score(scored)
    ordered = {name: results[name] for name in _order(results, metrics)}
    extended = dataclasses.replace(extended, metrics=ordered)
    extended = dataclasses.replace(extended, slices=slices(extended, record))
    return diagnose(extended, record)


def used_contexts(
    evaluation: Evaluation, record: RagRecord, inputs: VectorInputs
) -> tuple[ContextJudgement, ...]:
    """The judge's per-passage findings (or bare ones) with ``used`` read from the claims."""
    used = {
        c.evidence.context_index
        for c in evaluation.claims
        if c.evidence is not None and c.verdict in (Verdict.SUPPORTED, Verdict.INFERRED)
    }
    for claim in evaluation.claims:
        if claim.citation_holds:
            used.update(claim.cited)
    judged = inputs.contexts or tuple(
        ContextJudgement(i, getattr(c, "id", None)) for i, c in enumerate(record.contexts)
    )
    return tuple(dataclasses.replace(c, used=c.index in used) for c in judged)


def _order(results: Mapping[str, MetricResult], metrics: Collection[str]) -> list[str]:
    known = [name for name in metrics if name in results]
    return known + [name for name in results if name not in known]


def apply_strict(evaluation: Evaluation) -> Evaluation:
    """Faithfulness counting INFERRED claims as unfaithful (strict mode); else unchanged."""
    result = evaluation.metrics.get(FAITHFULNESS)
    if result is None or result.score is None:
        return evaluation
    score = strict_faithfulness(evaluation.claims)
    inferred = sum(1 for c in evaluation.claims if c.verdict is Verdict.INFERRED)
    explanation = (
        f"{STRICT_PREFIX} {inferred} inferred claims count as unfaithful; {result.explanation}"
    )
    metrics = dict(evaluation.metrics)
    metrics[FAITHFULNESS] = dataclasses.replace(result, score=score, explanation=explanation)
    return dataclasses.replace(evaluation, metrics=metrics)
