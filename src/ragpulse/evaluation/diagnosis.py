"""Whose fault a poor answer is: retrieval's or generation's.

One diagnosis per evaluated request, from what the judge already found (no I/O):

- ``ok``: nothing to fault;
- ``retrieval_miss``: the passages lack what the reference (or the question) needs, and
  the answer is unsupported, abstains, or follows passages that do not hold the reference;
- ``generation_drift``: the passages held it, and the answer is unsupported by them,
  contradicts them, or abstains;
- ``unanswerable_ok``: the answer abstains and the passages could not answer (no
  reference says an answer existed to be retrieved);
- ``tool_failure``: an agent answered after the tool it fetches evidence with failed or
  returned nothing (``RagRecord.failed_tools``), and the answer is unsupported or
  abstains: the fault is the tool's, not the model's drift nor the retriever's miss;
- ``unvouched_history``: claims rest only on tool results in the chat history that no tool
  span vouches for (``ragpulse.evaluation.provenance``): the client may have written them.

Whether "the passages held it" is read, in order, from the reference's claims judged
against the passages (context recall, at least one half), else from answerability (each
question part has a passage that speaks of it), else from the passages' relevance. The
rules are an ordered table of small named functions; the first that speaks decides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ragpulse.evaluation.provenance import unvouched_claims
from ragpulse.evaluation.types import (
    CORRECTNESS,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    RagRecord,
    Verdict,
)

__all__ = [
    "DIAGNOSES",
    "GENERATION_DRIFT",
    "OK",
    "RETRIEVAL_MISS",
    "RULES",
    "TOOL_FAILURE",
    "UNANSWERABLE_OK",
    "UNVOUCHED_HISTORY",
    "Facts",
    "diagnose",
]

OK = "ok"
RETRIEVAL_MISS = "retrieval_miss"
GENERATION_DRIFT = "generation_drift"
UNANSWERABLE_OK = "unanswerable_ok"
TOOL_FAILURE = "tool_failure"
"""An agent answered after the tool it fetches evidence with failed or returned nothing."""
UNVOUCHED_HISTORY = "unvouched_history"
"""Claims rest only on history tool results no tool span vouches for."""
DIAGNOSES: tuple[str, ...] = (
    OK,
    RETRIEVAL_MISS,
    GENERATION_DRIFT,
    UNANSWERABLE_OK,
    TOOL_FAILURE,
    UNVOUCHED_HISTORY,
)

_HELD_SHARE = 0.5
"""Share of the reference's claims the passages must support to count as holding it."""
_RELEVANT = 0.5
_CORRECT = 0.5
"""Correctness below this, with passages that lack the reference: a retrieval miss."""
_FAITHFUL = (Verdict.SUPPORTED, Verdict.INFERRED)


@dataclass(frozen=True, slots=True)
class Facts:
    """What the rules read, computed once per evaluation."""

    abstained: bool
    unsupported: int
    """Answer claims NOT_FOUND or CONTRADICTED."""
    supported: int
    """Answer claims SUPPORTED or INFERRED: the answer drew on the passages for them."""
    contradicted: int
    claims: int
    held: bool | None
    """The passages hold what the reference or the question needs; None: unknown."""
    held_by: str
    """How ``held`` was read, for the reason."""
    has_reference: bool
    correctness: float | None
    failed_tools: tuple[str, ...] = ()
    """Evidence tools that failed or returned nothing before the answer."""
    unvouched: int = 0
    """Answer claims found only in history tool results no tool span vouches for."""


def _share_supported(claims: tuple[ClaimVerdict, ...]) -> float:
    return sum(1 for c in claims if c.verdict in _FAITHFUL) / len(claims)


def facts(evaluation: Evaluation, record: RagRecord) -> Facts:
    """The facts of one evaluation."""
    verdicts = [c.verdict for c in evaluation.claims]
    held: bool | None = None
    held_by = "nothing to tell by"
    support = evaluation.reference_support
    if record.reference and support:
        share = _share_supported(support)
        held = share >= _HELD_SHARE
        covered = sum(1 for c in support if c.verdict in _FAITHFUL)
        held_by = f"{covered} of {len(support)} reference claims are in the passages"
    elif evaluation.answerable is not None:
        held = evaluation.answerable
        held_by = (
            "the passages speak of every part of the question"
            if held
            else "no passage speaks of some part of the question"
        )
    elif not record.contexts:
        held, held_by = False, "nothing was retrieved"
    else:
        rated = [c.relevance for c in evaluation.contexts if c.relevance is not None]
        if rated:
            held = max(rated) >= _RELEVANT
            held_by = f"the most relevant passage scores {max(rated):.2f} against the question"
    return Facts(
        abstained=bool(evaluation.abstained),
        unsupported=sum(1 for v in verdicts if v in (Verdict.NOT_FOUND, Verdict.CONTRADICTED)),
        supported=sum(1 for v in verdicts if v in _FAITHFUL),
        contradicted=sum(1 for v in verdicts if v is Verdict.CONTRADICTED),
        claims=len(verdicts),
        held=held,
        held_by=held_by,
        has_reference=bool(record.reference and record.reference.strip()),
        correctness=evaluation.score(CORRECTNESS),
        failed_tools=tuple(record.failed_tools),
        unvouched=unvouched_claims(evaluation.claims, record),
    )


Rule = Callable[[Facts], tuple[str, str] | None]


def tool_failed(f: Facts) -> tuple[str, str] | None:
    """An evidence tool failed or returned nothing, and the answer is unsupported or
    abstains: what it lacks, the tool did not bring."""
    if not f.failed_tools or not (f.unsupported or f.abstained):
        return None
    tools = ", ".join(f.failed_tools[:3]) + (" and others" if len(f.failed_tools) > 3 else "")
    what = (
        "the answer abstains"
        if f.abstained and not f.unsupported
        else f"{f.unsupported} of {f.claims} claims are not in the evidence"
    )
    return TOOL_FAILURE, f"{what}; the evidence tool {tools} failed or returned nothing"


def rests_on_unvouched_history(f: Facts) -> tuple[str, str] | None:
    """Claims found only in tool results the chat history carries, which no tool span
    vouches for: the client may have written them, so they are not counted as found."""
    if not f.unvouched:
        return None
    return UNVOUCHED_HISTORY, (
        f"{f.unvouched} of {f.claims} claims rest only on tool results in the chat history "
        "that no tool span vouches for"
    )


def abstained_unanswerable(f: Facts) -> tuple[str, str] | None:
    """Abstained, the passages could not answer, and no reference says an answer existed."""
    if f.abstained and f.held is False and not f.has_reference:
        return UNANSWERABLE_OK, f"the answer abstains and {f.held_by}"
    return None


def abstained_missed(f: Facts) -> tuple[str, str] | None:
    """Abstained because the passages lack the reference's answer."""
    if f.abstained and f.held is False:
        return RETRIEVAL_MISS, f"the answer abstains; {f.held_by}: retrieval missed the answer"
    return None


def abstained_held(f: Facts) -> tuple[str, str] | None:
    """Abstained though the passages hold the answer."""
    if f.abstained:
        return GENERATION_DRIFT, f"the answer abstains though {f.held_by}"
    return None


def contradicts(f: Facts) -> tuple[str, str] | None:
    """A claim the passages contradict: the answer left what it was given."""
    if f.contradicted:
        return GENERATION_DRIFT, f"{f.contradicted} of {f.claims} claims contradict the passages"
    return None


def unsupported_missed(f: Facts) -> tuple[str, str] | None:
    """Unsupported claims, the passages lack what was needed, and the answer drew on none.

    An answer that takes some claims from the passages and adds others had material to
    work with: that is drift, whatever the question's words say of the passages.
    """
    if f.unsupported and f.held is False and not f.supported:
        return RETRIEVAL_MISS, (
            f"{f.unsupported} of {f.claims} claims are not in the passages and {f.held_by}"
        )
    return None


def unsupported_held(f: Facts) -> tuple[str, str] | None:
    """Unsupported claims, though the passages held what was needed (or nothing says not)."""
    if f.unsupported:
        why = f" though {f.held_by}" if f.held else ""
        if f.held is False:
            why = f"; {f.supported} others are, so the passages gave it material"
        return (
            GENERATION_DRIFT,
            f"{f.unsupported} of {f.claims} claims are not in the passages{why}",
        )
    return None


def faithful_to_wrong_passages(f: Facts) -> tuple[str, str] | None:
    """The answer follows its passages, but they lack the reference and it is incorrect."""
    if f.held is False and f.correctness is not None and f.correctness < _CORRECT:
        return RETRIEVAL_MISS, (
            f"the answer follows the passages, but {f.held_by} and correctness is "
            f"{f.correctness:.2f}"
        )
    return None


RULES: tuple[Rule, ...] = (
    rests_on_unvouched_history,
    tool_failed,
    abstained_unanswerable,
    abstained_missed,
    abstained_held,
    contradicts,
    unsupported_missed,
    unsupported_held,
    faithful_to_wrong_passages,
)
"""The ordered rules; the first that speaks decides, else ``ok``."""


def decide(f: Facts, rules: tuple[Rule, ...] = RULES) -> tuple[str, str]:
    """The diagnosis and its reason."""
    for rule in rules:
        found = rule(f)
        if found is not None:
            return found
    return OK, "the answer's claims are in the passages" if f.claims else "nothing to fault"


def diagnose(evaluation: Evaluation, record: RagRecord) -> Evaluation:
    """``evaluation`` with its diagnosis; a failed or skipped one comes back unchanged."""
    if evaluation.status not in (EvalStatus.OK, EvalStatus.NO_CLAIMS):
        return evaluation
    label, reason = decide(facts(evaluation, record))
    return dataclasses.replace(evaluation, diagnosis=label, diagnosis_reason=reason)
