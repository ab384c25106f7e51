"""The offline judge's view of relevancy, completeness, citations and answerability.

Word overlap, on the claims the ``LexicalJudge`` already decomposed and judged:

- A question part is addressed when at least half of its content words occur in
  the answer's claims or in the sentences of the passages their evidence comes
  from ("nausea" quoted from "Side effects: nausea, ..." addresses "what are the
  side effects"). It cannot see an answer that addresses a part in words neither
  the answer nor its evidence shares with the question, nor an answer that
  repeats the question's words without answering it.
- A required point (a rubric item, else a reference claim) is covered when the
  answer, read as a passage with the question as shared premise, states it the
  way the judge checks any claim: its numbers and names exact, most of its words
  present. Paraphrase beyond the judge's normalisation is missed.
- A citation holds when the claim's verdict is SUPPORTED or INFERRED from the
  cited passages alone. It cannot tell a passage that mentions the claim's words
  from one that asserts it.
- An answer abstains when it makes no claim and says it does not know or that
  the sources do not say. The contexts could answer when each question part
  has a passage holding at least half of its content words: this sees that the
  passages talk about what was asked, not that they hold the answer.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from ragpulse.evaluation.findings import (
    CITATIONS,
    PASSAGE_HELP,
    QUESTION_PARTS,
    REQUIRED_POINTS,
    Findings,
)
from ragpulse.evaluation.types import (
    Claim,
    ClaimVerdict,
    Context,
    RagRecord,
    Verdict,
)
from ragpulse.evaluation.vector import attach_citations, question_parts
from ragpulse.judges.lexical._checkable import (
    CheckableClaim,
    IndexedContext,
    focus_words,
    index_context,
    premise_of,
)
from ragpulse.judges.lexical._checkable import checkable_claims as _checkable
from ragpulse.judges.lexical._meta import SOURCES
from ragpulse.judges.lexical._tokens import tokenize

if TYPE_CHECKING:
    from ragpulse.judges.lexical._claim_judge import ClaimJudge

__all__ = ["ANSWERABILITY_READERS", "abstains", "lexical_vector"]

_ADDRESSED_SHARE = 0.5
"""Share of a question part's content words the answer (or its evidence) must hold."""
_ANSWERABLE_SHARE = 0.5
"""Share of a question part's content words one passage must hold to answer it."""
_FAITHFUL = (Verdict.SUPPORTED, Verdict.INFERRED)
ANSWERABILITY_READERS = frozenset({QUESTION_PARTS, REQUIRED_POINTS, CITATIONS})
"""Findings beside which whether the contexts could answer is read too (the diagnosis reads
it); otherwise only for an abstention."""
_SENTENCE_END = re.compile(r"[.!?\n]")

# Declining to answer, in the ways people write it: not knowing, not being able to
# say, or the sources being silent. General English, no data set's phrasing.
_ABSTAINS = re.compile(
    r"\b(?:i (?:do not|don't|dont|really don't) know|i(?:'m| am| was) (?:not sure|unsure|"
    r"not certain|(?:unable|not able) to (?:answer|say|tell|find|locate|determine))|"
    r"i (?:cannot|can't|can not|could not|couldn't|did not|didn't) "
    r"(?:answer|say|tell|find|locate|determine)|"
    r"i have no (?:idea|information)|"
    r"(?:there is|there's|i have|i found) (?:no|not enough|insufficient) (?:information|"
    r"data|details|context|evidence)|no information (?:is|was) (?:available|given|provided)|"
    rf"{SOURCES} "
    r"(?:do|does|did) not (?:say|mention|state|specify|contain|include|provide|cover|"
    r"answer)|(?:is|are) not (?:mentioned|specified|stated|provided|given|available)|"
    r"cannot be (?:determined|answered|found))\b",
    re.IGNORECASE,
)


def abstains(answer: str, claims: Sequence[object]) -> bool:
    """True when the answer states nothing and declines: "I don't know", "not mentioned"."""
    return bool(answer.strip()) and not claims and bool(_ABSTAINS.search(answer))


def _sentence_words(context: Context, start: int, end: int) -> set[str]:
    text = context.text
    head = max((m.end() for m in _SENTENCE_END.finditer(text, 0, start)), default=0)
    tail_match = _SENTENCE_END.search(text, end)
    tail = tail_match.end() if tail_match else len(text)
    return {t.norm for t in tokenize(text[head:tail], names=False)}


def _answer_words(
    checkables: Sequence[CheckableClaim], verdicts: Sequence[ClaimVerdict], record: RagRecord
) -> set[str]:
    words: set[str] = set()
    for checkable in checkables:
        words.update(t.norm for t in tokenize(checkable.claim.text, names=False))
    for verdict in verdicts:
        evidence = verdict.evidence
        if evidence is None or verdict.verdict not in _FAITHFUL:
            continue
        if 0 <= evidence.context_index < len(record.contexts):
            context = record.contexts[evidence.context_index]
            words |= _sentence_words(context, evidence.start, evidence.end)
    return words


def _covered(words: frozenset[str], pool: set[str] | dict[str, list[int]], share: float) -> bool:
    if not words:
        return True
    return sum(1 for w in words if w in pool) / len(words) >= share


def _parts(
    record: RagRecord,
    checkables: Sequence[CheckableClaim],
    verdicts: Sequence[ClaimVerdict],
) -> tuple[ClaimVerdict, ...]:
    pool = _answer_words(checkables, verdicts, record)
    judged = []
    for part in question_parts(record.question):
        words = focus_words(part)
        addressed = bool(checkables) and _covered(words, pool, _ADDRESSED_SHARE)
        judged.append(
            ClaimVerdict(
                Claim(part),
                Verdict.SUPPORTED if addressed else Verdict.NOT_FOUND,
                reason=None if addressed else "the answer and its evidence miss its words",
            )
        )
    return tuple(judged)


def _answerable(record: RagRecord, indexed: Sequence[IndexedContext]) -> bool | None:
    """Whether the contexts could answer; None without a question to tell by."""
    parts = question_parts(record.question)
    if not parts:
        return None
    if not indexed:
        return False
    return all(
        any(_covered(focus_words(part), ctx.positions, _ANSWERABLE_SHARE) for ctx in indexed)
        for part in parts
    )


def _points(judge: ClaimJudge, record: RagRecord, answer: str) -> tuple[ClaimVerdict, ...]:
    """Each rubric point against the answer: SUPPORTED when all of its claims are covered."""
    answer_context = Context(answer, id="answer")
    index = [index_context(0, answer_context, judge.max_context_chars)]
    premise = premise_of(record.question, judge.max_context_chars)
    contexts: tuple[Context, ...] = (answer_context,)
    if premise is not None:
        index.append(premise)
        contexts = (answer_context, premise.context)
    judged = []
    for point in record.rubric:
        parts = _checkable(point)
        verdicts = [judge._judge_claim(part, index, contexts) for part in parts]
        covered = bool(verdicts) and all(v.verdict in _FAITHFUL for v in verdicts)
        evidence = next((v.evidence for v in verdicts if v.evidence is not None), None)
        judged.append(
            ClaimVerdict(
                Claim(point),
                Verdict.SUPPORTED if covered else Verdict.NOT_FOUND,
                evidence=evidence if covered and evidence and evidence.context_index == 0 else None,
                reason=None if covered else "the answer does not state it",
            )
        )
    return tuple(judged)


def lexical_vector(
    judge: ClaimJudge,
    record: RagRecord,
    findings: Collection[str],
    checkables: Sequence[CheckableClaim],
    verdicts: Sequence[ClaimVerdict],
    indexed: Sequence[IndexedContext],
    correctness: tuple[tuple[bool, ...], Sequence[ClaimVerdict]] | None = None,
) -> tuple[tuple[ClaimVerdict, ...], Findings]:
    """The verdicts with their citations, and what the offline judge found of ``findings``."""
    answer = record.answer or ""

    def holds(i: int, cited: tuple[int, ...]) -> bool:
        verdict = verdicts[i]
        if verdict.verdict not in _FAITHFUL:
            return False
        if verdict.evidence is not None and verdict.evidence.context_index in cited:
            return True
        alone = [indexed[n] for n in cited if n < len(indexed)]
        return judge._judge_claim(checkables[i], alone, record.contexts).verdict in _FAITHFUL

    cited = attach_citations(verdicts, answer, len(record.contexts), holds)
    abstained = abstains(answer, checkables)
    wants_points = REQUIRED_POINTS in findings
    parts = _parts(record, checkables, verdicts) if QUESTION_PARTS in findings else ()
    points = _points(judge, record, answer) if wants_points and record.rubric else ()
    recall_hits: tuple[bool, ...] | None = None
    reference_claims: tuple[ClaimVerdict, ...] = ()
    if wants_points and not record.rubric and record.reference:
        if correctness is None:
            # The correctness check did not run (not asked, or no claims): run its recall side.
            inputs, judged = judge._correctness(
                checkables, answer, record.reference, record.question
            )
            correctness = inputs.recall_hits, judged
        recall_hits, reference_claims = correctness[0], tuple(correctness[1])
    reads_answerability = abstained or bool(ANSWERABILITY_READERS & set(findings))
    answerable = _answerable(record, indexed) if reads_answerability else None
    # The passages' findings feed the context metrics and the diagnosis of every request.
    from ragpulse.judges.lexical._context_view import lexical_contexts

    contexts, reference_support = lexical_contexts(
        judge, record, indexed, alone=PASSAGE_HELP in findings
    )
    return cited, Findings(
        question_parts=parts,
        required_points=points,
        recall_hits=recall_hits,
        reference_claims=reference_claims,
        abstained=abstained,
        answerable=answerable,
        contexts=contexts,
        reference_support=reference_support,
    )
