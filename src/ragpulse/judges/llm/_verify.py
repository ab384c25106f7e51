"""Defence in depth around an LLM judge's verdicts: what a model says only counts if it checks out.

Fencing the contexts keeps honest models from obeying injected text; these checks
keep an *obedient* one (or a careless one) from moving the scores:

1. A verdict counts only with a quote that is verified in the named context and
   speaks of the claim (they share a content word). Where the request's text addresses
   the judge (``_steering``), the checks are strict, for every verdict a model can be
   told to give: the quote shares a quarter of the claim's words or two of them; a
   SUPPORTED quote states the claim (its numbers in the quote, its names in the quoted
   context, half of its words); a faithful claim (SUPPORTED or INFERRED) adds nothing
   the quoted context does not hold (every content word, number and name of it is in
   that context or the question: an inference combines what the passage says, and a
   claim with a word of its own is a fact no passage gives, whatever the model was
   told; a SUPPORTED quote that states the claim only in part stands as INFERRED on the
   same terms); a CONTRADICTED quote speaks of what the
   claim states (half of its words), and loses to the offline judge's own verified
   support of the same answer text; an INFERRED verdict likewise gives way to the offline
   judge's verified SUPPORTED span of the same answer text (a stated claim called merely
   inferred would lower groundedness). Otherwise the verdict is downgraded (to the offline
   judge's verdict where that one has its own verified evidence, else NOT_FOUND) and the
   reason says why. The strict checks are not the default because they also reject what
   an honest model paraphrases or infers (``bench/oracle_ceiling.py`` measures both).
2. The claims must be the answer's: a claim that anchors nowhere in the answer is
   dropped, and answer text that no claim covers is judged by the offline judge and
   merged in, so leaving the hallucinated sentence out does not hide it.
3. Where the offline judge finds a verified contradiction (a different number, date
   or name in the aligned span) and the LLM says SUPPORTED or INFERRED, the result
   records the disagreement and, by default, takes the conservative verdict.
4. Claims per answer are bounded relative to its length (``claim_budget``), and a claim
   the judge lists twice (two claims standing on the same answer range) counts once.

Pure functions over ``ClaimVerdict`` lists; the offline verdicts come in as data.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ragpulse.evaluation.types import Claim, ClaimVerdict, Context, Verdict
from ragpulse.judges.lexical._meta import is_meta
from ragpulse.judges.lexical._tokens import is_content, tokenize

__all__ = ["GuardResult", "check_quote", "claim_budget", "guard"]

MIN_CLAIM_BUDGET = 4
"""Claims any answer may have, however short."""
WORDS_PER_CLAIM = 3
"""One claim per this many answer words at most (an atomic claim has a subject and a fact)."""
MAX_CLAIMS = 512
"""A hard cap on claims per answer, whatever its length."""
# Share of a claim's content words its quote must hold (at least one word in any case):
# any verdict's quote must speak of the claim; a SUPPORTED one must state most of it.
_MIN_SHARED_WORDS = 0.25
_MIN_COVERED_WORDS = 0.5
_STATES_TOO_LITTLE = "the quote does not state the claim's"
_INFERS_TOO_MUCH = "the quoted context does not hold the claim's"
# Share of a faithful claim's content words its quoted context may lack (in strict checks):
# a paraphrase's own wording, not a fact of its own.
_MAX_UNHELD_WORDS = 0.25
# Content words a SUPPORTED quote must share with a claim it states in other words for the
# claim to stand as INFERRED (all of them, for a claim with fewer).
_MIN_PARAPHRASE_WORDS = 2
# Share of an offline claim's characters the judge's claims must cover for it to count
# as judged; below this, the offline verdict is merged in.
_COVERED = 0.5
_FAITHFUL = (Verdict.SUPPORTED, Verdict.INFERRED)


def claim_budget(answer: str) -> int:
    """How many claims an answer of this length may have."""
    words = len(answer.split())
    return min(MAX_CLAIMS, max(MIN_CLAIM_BUDGET, words // WORDS_PER_CLAIM + 1))


# A pointer to a source ("[2]", "(Passage 3)", "according to document 1") names no fact:
# its number is not one the quote must hold.
_SOURCE_POINTER = re.compile(
    r"\[\s*\d{1,4}(?:\s*,\s*\d{1,4})*\s*\]|"
    r"\b(?:passage|context|document|source|reference|ref)s?\s*#?\d{1,4}"
    r"(?:\s*(?:,|and|&)\s*\d{1,4})*\b",
    re.IGNORECASE,
)


def _norms(text: str) -> tuple[set[str], set[str], set[str]]:
    """(content words, numbers, names) of a text, normalised as the offline judge does;
    pointers to sources are not read."""
    words, numbers, names = set(), set(), set()
    for token in tokenize(_SOURCE_POINTER.sub(" ", text), names=True):
        if not is_content(token):
            continue
        if token.number:
            numbers.add(token.norm)
        elif token.key:
            names.add(token.norm)
            words.add(token.norm)
        else:
            words.add(token.norm)
    return words, numbers, names


def check_quote(
    cv: ClaimVerdict,
    contexts: Sequence[Context],
    question: str | None = None,
    *,
    words_of: Callable[[int], set[str]] | None = None,
    strict: bool = True,
) -> str | None:
    """Why the verdict's quote does not count for it, or None when it does.

    NOT_FOUND needs no quote. The others need a quote verified in the named context
    (``cv.evidence``) that shares a content word with the claim. ``strict`` checks (for a
    request whose text addresses the judge) ask more: a quarter of the claim's words or
    two of them; for SUPPORTED a quote that states the claim: its numbers and at least
    half of its content words in the quote, its names in the quoted context (or the
    question); for SUPPORTED and INFERRED every content word, number and name of the
    claim in the quoted context (or the question); for CONTRADICTED half of the claim's
    content words in the quote. A quote that shares one word ("Refunds are issued" for
    "Refunds come as gold bars") speaks of the claim but does not state it.
    """
    if cv.verdict is Verdict.NOT_FOUND:
        return None
    if not cv.quote or not cv.quote.strip():
        return f"{cv.verdict.value} without a quote"
    if cv.evidence is None:
        return "the quoted span is not in the named context"
    claim_words, claim_numbers, claim_names = _norms(cv.claim.text)
    quote_words, quote_numbers, _ = _norms(cv.evidence.text)
    all_claim_words = claim_words | claim_numbers
    shared = all_claim_words & (quote_words | quote_numbers)
    if all_claim_words and not shared:
        return "the quote does not speak of the claim (no content words in common)"
    if not strict:
        return None
    if all_claim_words and not _speaks_of(len(shared), len(all_claim_words)):
        return "the quote does not speak of the claim (too few content words in common)"
    index = cv.evidence.context_index
    if cv.verdict is Verdict.INFERRED:
        place = (
            words_of(index) if words_of is not None else _context_words(contexts[index], question)
        )
        why = _adds_to_its_context(claim_words, claim_numbers, claim_names, place)
        if why is not None:
            return why
        return None
    if cv.verdict is Verdict.CONTRADICTED:
        if len(shared) < _MIN_COVERED_WORDS * len(all_claim_words):
            missing = sorted(all_claim_words - shared)
            return "the quote does not speak of what the claim states: " + ", ".join(missing)
        return None
    if cv.verdict is Verdict.SUPPORTED:
        missing_numbers = claim_numbers - quote_numbers
        if missing_numbers:
            return f"{_STATES_TOO_LITTLE} " + ", ".join(sorted(missing_numbers))
        if len(shared) < _MIN_COVERED_WORDS * len(all_claim_words):
            missing = sorted(all_claim_words - shared)
            return f"{_STATES_TOO_LITTLE} " + ", ".join(missing)
        place_words = (
            words_of(index) if words_of is not None else _context_words(contexts[index], question)
        )
        missing_names = claim_names - place_words
        if missing_names:
            return "the quoted context does not name " + ", ".join(sorted(missing_names))
        why = _adds_to_its_context(claim_words, claim_numbers, claim_names, place_words)
        if why is not None:
            return why
    return None


def _adds_to_its_context(
    words: set[str], numbers: set[str], names: set[str], place: set[str]
) -> str | None:
    """Why a faithful claim adds a fact its quoted context (and the question) does not
    hold, or None: a number or a name of its own, or more than ``_MAX_UNHELD_WORDS`` of
    its other content words (a paraphrase rewords a little; a claim that rests on words
    no passage holds is a fact no passage gives)."""
    unheld = (words | numbers) - place
    if not unheld:
        return None
    if (numbers | names) & unheld or len(unheld) > _MAX_UNHELD_WORDS * len(words | numbers):
        return f"{_INFERS_TOO_MUCH} " + ", ".join(sorted(unheld))
    return None


def _speaks_of(shared: int, claim_words: int) -> bool:
    """Whether a quote sharing ``shared`` of a claim's ``claim_words`` content words speaks
    of it: a quarter of them, or ``_MIN_PARAPHRASE_WORDS`` of a long claim (a claim that
    sums up several facts is quoted one fact at a time)."""
    return shared > 0 and (
        shared >= _MIN_SHARED_WORDS * claim_words or shared >= _MIN_PARAPHRASE_WORDS
    )


def _context_words(context: Context, question: str | None) -> set[str]:
    """Content words and numbers of a context and the question (the claims' premise)."""
    words, numbers, _ = _norms(context.text + "\n" + (question or ""))
    return words | numbers


def _paraphrases_its_context(
    cv: ClaimVerdict, why: str, words_of: Callable[[int], set[str]], question: str | None
) -> bool:
    """A SUPPORTED verdict whose verified quote states only part of the claim in its words,
    while the quote shares at least ``_MIN_PARAPHRASE_WORDS`` of the words that carry the
    claim's fact (its content words the question does not already hold: the topic is not
    the fact) and every number and name of the claim is in the quoted context (or the
    question): the judge read a paraphrase or combined passages. No span states it word
    for word, so it is INFERRED, not SUPPORTED. A quote that names only the topic ("The
    Eiffel Tower" for "Eiffel towers come as gold bars") or shares one word ("Refunds are
    issued" for "Refunds come as gold bars") is not enough for either."""
    if cv.verdict is not Verdict.SUPPORTED or cv.evidence is None:
        return False
    if not why.startswith(_STATES_TOO_LITTLE):
        return False
    words, numbers, names = _norms(cv.claim.text)
    quote_words, quote_numbers, _ = _norms(cv.evidence.text)
    topic_words, topic_numbers, _ = _norms(question or "")
    fact = (words | numbers) - topic_words - topic_numbers
    shared = fact & (quote_words | quote_numbers)
    if not shared or len(shared) < min(_MIN_PARAPHRASE_WORDS, len(fact)):
        return False
    # On the terms of an INFERRED verdict: nothing of the claim beyond the quoted context.
    place = words_of(cv.evidence.context_index)
    return _adds_to_its_context(words, numbers, names, place) is None


@dataclass(frozen=True, slots=True)
class GuardResult:
    """The verdicts that stand, and what the guard did to get them."""

    verdicts: list[ClaimVerdict]
    disagreement: bool
    """The offline judge found a verified contradiction where the LLM found support."""
    notes: list[str]
    """One line per kind of correction, for the evaluation's explanation."""


def _overlap(a: Claim, b: Claim) -> int:
    if a.answer_start is None or a.answer_end is None:
        return 0
    if b.answer_start is None or b.answer_end is None:
        return 0
    return max(0, min(a.answer_end, b.answer_end) - max(a.answer_start, b.answer_start))


def _length(claim: Claim) -> int:
    if claim.answer_start is None or claim.answer_end is None:
        return 0
    return claim.answer_end - claim.answer_start


def _offline_for(cv: ClaimVerdict, offline: Sequence[ClaimVerdict]) -> list[ClaimVerdict]:
    """Offline verdicts of the answer text this claim stands on."""
    return [o for o in offline if _overlap(cv.claim, o.claim) > 0]


def _contradiction(cv: ClaimVerdict, offline: Sequence[ClaimVerdict]) -> ClaimVerdict | None:
    """The offline judge's verified contradiction of this claim's answer text, if any."""
    return next(
        (
            o
            for o in _offline_for(cv, offline)
            if o.verdict is Verdict.CONTRADICTED and o.evidence is not None
        ),
        None,
    )


def _downgraded(cv: ClaimVerdict) -> str:
    """How a downgrade's reason starts (a faithful verdict's says only that it was)."""
    return "downgraded" if cv.verdict in _FAITHFUL else f"downgraded from {cv.verdict.value}"


def _backing(cv: ClaimVerdict, offline: Sequence[ClaimVerdict]) -> ClaimVerdict | None:
    """The offline judge's faithful verdict with its own verified span, of most of this
    claim's answer text, if any."""
    backing = [o for o in _offline_for(cv, offline) if o.verdict in _FAITHFUL and o.evidence]
    return max(backing, key=lambda o: _overlap(cv.claim, o.claim)) if backing else None


def _stated(cv: ClaimVerdict, offline: Sequence[ClaimVerdict]) -> ClaimVerdict | None:
    """The offline judge's SUPPORTED verdict with its own verified span, of most of this
    claim's answer text, if any: a passage states it."""
    backing = _backing(cv, offline)
    return backing if backing is not None and backing.verdict is Verdict.SUPPORTED else None


def _downgrade(
    cv: ClaimVerdict,
    why: str,
    offline: Sequence[ClaimVerdict],
    answer: str,
    context_words: set[str],
) -> ClaimVerdict:
    """What stands when the judge's quote does not hold: the offline judge's verified verdict
    (a contradiction first), else NOT_FOUND flagging the words the quote does not state."""
    conflict = _contradiction(cv, offline)
    if conflict is not None:
        return replace(
            conflict,
            claim=cv.claim,
            reason=f"downgraded from {cv.verdict.value}: {why}; the offline judge finds "
            f"a different value: {conflict.reason or ''}".rstrip(": "),
        )
    if cv.verdict is not Verdict.NOT_FOUND:
        backing = _backing(cv, offline)
        if backing is not None:
            best = backing
            return ClaimVerdict(
                cv.claim,
                best.verdict,
                evidence=best.evidence,
                quote=best.evidence.text if best.evidence else None,
                reason=f"{_downgraded(cv)}: {why}; the offline judge finds it "
                f"{best.verdict.value} with its own verified span",
            )
    return ClaimVerdict(
        cv.claim,
        Verdict.NOT_FOUND,
        quote=cv.quote,
        reason=f"downgraded from {cv.verdict.value}: {why}",
        unsupported=_unstated(cv, answer, context_words),
    )


def _unstated(
    cv: ClaimVerdict, answer: str, context_words: set[str]
) -> tuple[tuple[int, int], ...]:
    """Answer ranges of the claim's content words that neither its verified quote nor the
    quoted context holds: what no passage says (empty without a verified quote, or when
    every word is somewhere in the context: then the whole claim is in question)."""
    start, end = cv.claim.answer_start, cv.claim.answer_end
    if cv.evidence is None or start is None or end is None or not answer:
        return ()
    words, numbers, _ = _norms(cv.evidence.text)
    held = words | numbers | context_words
    return tuple(
        (start + token.start, start + token.end)
        for token in tokenize(answer[start:end], names=True)
        if is_content(token) and token.norm not in held
    )


def _covered(claim: Claim, judged: Sequence[ClaimVerdict]) -> bool:
    """Whether the judge's claims cover most of this answer range."""
    length = _length(claim)
    if length == 0 or claim.answer_start is None or claim.answer_end is None:
        return True
    marks = bytearray(length)
    for cv in judged:
        if cv.claim.answer_start is None or cv.claim.answer_end is None:
            continue
        lo = max(cv.claim.answer_start, claim.answer_start) - claim.answer_start
        hi = min(cv.claim.answer_end, claim.answer_end) - claim.answer_start
        if hi > lo:
            marks[lo:hi] = b"\x01" * (hi - lo)
    return sum(marks) >= _COVERED * length


def _identity(claim: Claim) -> tuple[object, ...]:
    """What makes two claims the same claim: the answer range they stand on."""
    if claim.answer_start is not None and claim.answer_end is not None:
        return (claim.answer_start, claim.answer_end)
    return (" ".join(claim.text.casefold().split()).strip(" .!?;,"),)


def _distinct(verdicts: Sequence[ClaimVerdict]) -> tuple[list[ClaimVerdict], int]:
    """Each claim once, however often the judge lists it (by the answer range it stands on);
    of repeats that disagree, the unfaithful verdict stands. Also how many were repeats."""
    kept: dict[tuple[object, ...], ClaimVerdict] = {}
    for cv in verdicts:
        key = _identity(cv.claim)
        first = kept.get(key)
        if first is None or (first.verdict in _FAITHFUL and cv.verdict not in _FAITHFUL):
            kept[key] = cv
    return list(kept.values()), len(verdicts) - len(kept)


def guard(
    judged: Sequence[ClaimVerdict],
    offline: Sequence[ClaimVerdict],
    contexts: Sequence[Context],
    *,
    question: str | None = None,
    answer: str = "",
    conservative: bool = True,
    strict: bool = True,
) -> GuardResult:
    """The LLM's verdicts checked against the contexts and the offline judge's verdicts;
    ``strict`` quote checks for a request whose text addresses the judge."""
    notes: list[str] = []
    anchored = [cv for cv in judged if cv.claim.answer_start is not None]
    if len(anchored) < len(judged):
        notes.append(
            f"{len(judged) - len(anchored)} judge claims are not in the answer and were dropped"
        )
    # An abstention, a source reference, a pleasantry states no fact: the offline judge
    # does not count them as claims, and neither does the judge's list.
    factual = [cv for cv in anchored if not is_meta(cv.claim.text)]
    if len(factual) < len(anchored):
        notes.append(
            f"{len(anchored) - len(factual)} judge claims state no fact (an abstention, a "
            "source reference) and were not counted"
        )
    anchored = factual
    # Each context's words are read once per evaluation, however many claims quote it.
    context_words: dict[int, set[str]] = {}

    def words_of(index: int) -> set[str]:
        if index not in context_words:
            words, numbers, _ = _norms(contexts[index].text + "\n" + (question or ""))
            context_words[index] = words | numbers
        return context_words[index]

    settled: list[ClaimVerdict] = []
    downgraded = combined = corrected = 0
    disagreement = False
    for cv in anchored:
        conflict = _contradiction(cv, offline) if cv.verdict in _FAITHFUL else None
        if conflict is not None:
            disagreement = True
            if conservative:
                assert conflict.evidence is not None
                settled.append(
                    ClaimVerdict(
                        cv.claim,
                        Verdict.CONTRADICTED,
                        evidence=conflict.evidence,
                        quote=conflict.evidence.text,
                        reason=f"the judge said {cv.verdict.value}; the offline judge finds a "
                        f"different value in context {conflict.evidence.context_index + 1}: "
                        f"{conflict.reason or ''}".rstrip(": "),
                        unsupported=conflict.unsupported,
                    )
                )
                continue
        why = check_quote(cv, contexts, question, words_of=words_of, strict=strict)
        if why is None and strict and cv.verdict is Verdict.CONTRADICTED:
            # Told to, a model can call any claim contradicted and quote a real sentence;
            # where the text itself shows the claim, the verified span wins.
            backed = _backing(cv, offline)
            if backed is not None:
                why = "a passage states the answer text"
        if why is None and strict and cv.verdict is Verdict.INFERRED:
            # Told to, a model can also call a stated claim merely inferred, quoting the very
            # sentence that states it: faithfulness keeps it, groundedness loses it. Where
            # the offline judge finds a span that states it, that verified span wins.
            stated = _stated(cv, offline)
            if stated is not None:
                corrected += 1
                settled.append(
                    replace(
                        stated,
                        claim=cv.claim,
                        quote=stated.evidence.text if stated.evidence else None,
                        reason="the judge said INFERRED, but a passage states the answer text: "
                        "the offline judge finds it SUPPORTED with its own verified span",
                    )
                )
                continue
        if why is None:
            settled.append(cv)
            continue
        place = words_of(cv.evidence.context_index) if cv.evidence else set()
        # The offline judge's own verified verdict comes first; only where it has none does
        # a quote that states part of the claim make it an inference.
        fallback = _downgrade(cv, why, offline, answer, place)
        if fallback.verdict is Verdict.NOT_FOUND and _paraphrases_its_context(
            cv, why, words_of, question
        ):
            combined += 1
            settled.append(
                replace(
                    cv,
                    verdict=Verdict.INFERRED,
                    reason=f"the judge said SUPPORTED, but {why}; the quote speaks of it and "
                    "the quoted context holds its numbers and names, so it is inferred",
                )
            )
        else:
            downgraded += 1
            settled.append(fallback)
    if combined:
        notes.append(
            f"{combined} judge verdicts SUPPORTED by a quote that states part of the claim in "
            "its words are INFERRED (its numbers and names are in the quoted context)"
        )
    if corrected:
        notes.append(
            f"{corrected} judge verdicts INFERRED are SUPPORTED: a passage states the answer "
            "text (the offline judge's verified span)"
        )
    if downgraded:
        notes.append(
            f"{downgraded} judge verdicts downgraded for want of a related, verified quote"
        )
    if disagreement:
        notes.append(
            "the offline judge found a verified contradiction the judge called supported"
            + ("; the conservative verdict stands" if conservative else "")
        )

    settled, repeated = _distinct(settled)
    if repeated:
        notes.append(f"{repeated} judge claims repeat another claim and were counted once")
    uncovered = [o for o in offline if not _covered(o.claim, settled)]
    if uncovered:
        notes.append(f"{len(uncovered)} answer sentences no judge claim covers were judged offline")
        settled.extend(
            replace(o, reason=f"not covered by the judge's claims; offline: {o.reason or ''}")
            for o in uncovered
        )
    settled.sort(key=lambda cv: cv.claim.answer_start if cv.claim.answer_start is not None else -1)
    return GuardResult(settled, disagreement, notes)
