"""Readings of an answer that judges and metrics share: citations, question parts, slices.

Pure functions over records and what a judge found:

- citations: ``[N]`` markers (1-based, contexts in retrieval order) belong to the claim
  before them; ``attach_citations`` records on each claim what it cites and whether
  that holds (the citation metric reads it);
- question parts: the separate things a question asks (relevancy, answerability);
- slices: an evaluation's low-cardinality cuts, for span attributes and histogram points;
- used contexts: the passages the answer's supported claims draw on.

How findings become scores is the metrics' (``ragpulse.metrics``), never averaged into
one number.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Sequence

from ragpulse.evaluation.findings import Findings
from ragpulse.evaluation.types import (
    Claim,
    ClaimVerdict,
    ContextJudgement,
    Evaluation,
    RagRecord,
    Verdict,
)

__all__ = [
    "SLICE_ABSTAINED",
    "SLICE_CITED",
    "SLICE_QUESTION",
    "SLICE_SOURCES",
    "attach_citations",
    "citation_markers",
    "cited_support",
    "marker_spans",
    "question_parts",
    "slices",
    "used_contexts",
    "without_markers",
]

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


def used_contexts(
    evaluation: Evaluation, record: RagRecord, inputs: Findings
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
