"""What the judges find for the metrics: the findings' names, and ``Findings`` that carries them.

A metric declares the findings it reads (``Metric.findings``, ``ragpulse.metrics``); a
judge asks ``findings_for(metrics)`` which of them the asked metrics need and finds
those, never more, whatever the metrics are called. The names:

- ``claims``: the answer's claims, each judged against the contexts with verified evidence;
- ``abstention``: whether the answer declines to answer ("I don't know");
- ``answerability``: whether the contexts could answer the question (an abstention the
  contexts could answer is a groundedness failure, and the request's status says so);
- ``citations``: the passages each claim's ``[N]`` markers cite and whether they hold;
- ``question_parts``: each part of the question, and whether the answer addresses it;
- ``required_points``: each required point, the rubric's or else the reference's claims,
  and whether the answer covers it;
- ``reference_agreement``: the answer's claims against the reference and the reference's
  claims against the answer (both sides of correctness);
- ``context_relevance``: each passage's relevance to the question;
- ``reference_support``: the reference's claims judged against the passages;
- ``passage_help``: whether each passage, alone, holds something the answer needs.

Pure data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragpulse.evaluation.types import ClaimVerdict, ContextJudgement

__all__ = [
    "ABSTENTION",
    "ANSWERABILITY",
    "CITATIONS",
    "CLAIMS",
    "CONTEXT_RELEVANCE",
    "FINDINGS",
    "PASSAGE_HELP",
    "QUESTION_PARTS",
    "REFERENCE_AGREEMENT",
    "REFERENCE_SUPPORT",
    "REQUIRED_POINTS",
    "CorrectnessInputs",
    "Findings",
]

CLAIMS = "claims"
ABSTENTION = "abstention"
ANSWERABILITY = "answerability"
CITATIONS = "citations"
QUESTION_PARTS = "question_parts"
REQUIRED_POINTS = "required_points"
REFERENCE_AGREEMENT = "reference_agreement"
CONTEXT_RELEVANCE = "context_relevance"
REFERENCE_SUPPORT = "reference_support"
PASSAGE_HELP = "passage_help"

FINDINGS: frozenset[str] = frozenset(
    {
        CLAIMS,
        ABSTENTION,
        ANSWERABILITY,
        CITATIONS,
        QUESTION_PARTS,
        REQUIRED_POINTS,
        REFERENCE_AGREEMENT,
        CONTEXT_RELEVANCE,
        REFERENCE_SUPPORT,
        PASSAGE_HELP,
    }
)
"""Every finding a judge knows how to make: a metric may declare only these."""


@dataclass(frozen=True)
class CorrectnessInputs:
    """Which answer claims the reference supports, and which reference claims the answer covers."""

    precision_hits: tuple[bool, ...]
    recall_hits: tuple[bool, ...]
    contradicted: tuple[bool, ...] = ()
    """Per answer claim, True when the reference contradicts it (empty: none known).

    Only ``agreement`` reads it: an answer claim the reference neither supports nor
    contradicts is not addressed and counts neither way.
    """
    conflicts: tuple[str | None, ...] = ()
    """Per answer claim, the reference's span that contradicts it (empty or None: unknown)."""


@dataclass(frozen=True, slots=True)
class Findings:
    """What a judge found for one record: its claims and everything the metrics read beside."""

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
    correctness: CorrectnessInputs | None = None
    """The answer against the reference and back (None: not checked, or nothing to check)."""
    reference_verdicts: tuple[ClaimVerdict, ...] = ()
    """The reference's claims as checked against the answer, kept on the evaluation
    (``Evaluation.reference_claims``); empty when the reference was not checked."""
