"""The lexical judge's rules: an ordered table of small named checks over one alignment.

Each rule reads a claim's ``ClaimAlignment`` and returns a verdict or ``None``; the first
verdict wins. The checks that catch a wrong answer come first (a contradiction outranks
everything), then the ones that withhold support, then the base verdicts from coverage
alone (``supported``, ``flags_agree``, ``inferred``); a claim no rule decides is
NOT_FOUND. ``bench/ablation.py`` switches each non-base rule off in turn and measures
what it adds; ``docs/offline-judge.md`` lists the figures.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import NamedTuple

from ragpulse.evaluation.types import ClaimVerdict, Verdict
from ragpulse.judges.lexical._align import ClaimAlignment, ranges_of, verdict
from ragpulse.judges.lexical._extent import (
    bounds,
    is_quantity,
    may_state_extent,
    states,
    unbounded_extents,
)
from ragpulse.judges.lexical._polarity import polarity_flip
from ragpulse.judges.lexical._scope import sentence_bounds, widening_words
from ragpulse.judges.lexical._tokens import STOP_WORDS, WEEKDAYS, Token

__all__ = ["BASE", "RULES", "Rule", "decide"]


class Rule(NamedTuple):
    """One named check of the table."""

    name: str
    check: Callable[[ClaimAlignment], ClaimVerdict | None]
    catches: str
    """What it catches, in a few words (the docs table)."""


# How far (in tokens) either side of the window the sentence a claim restates is looked for.
_RESTATED_REACH = 60
# How far beyond the window a differing number or name may sit.
_CONTRADICTION_MARGIN = 3
# Words after a widening word flagged with it ("any flight", "the fastest response time").
_WIDENED_REACH = 2
# The word after a number that names what it counts ("2-year", "30 days").
_WORD_AFTER = re.compile(r"[\s-]{0,2}[^\W\d_]+")
_FLAG_AFTER = re.compile(r"\s*[\"']?\s*:\s*(true|false)\b", re.IGNORECASE)


# --- contradictions ------------------------------------------------------------------


def flag_value(a: ClaimAlignment) -> ClaimVerdict | None:
    """A yes/no value of a structured context says the opposite ("Waterproof: no")."""
    for mention in a.mentions:
        if mention.agrees is False:
            flag = mention.flag
            return verdict(
                a,
                Verdict.CONTRADICTED,
                f"the context has {flag.key}: {'true' if flag.value else 'false'}",
                a.span(flag.context_index, flag.fact.start, flag.fact.end),
                ranges_of(a.checkable, frozenset(flag.words), reach=0),
            )
    return None


def window_flag(a: ClaimAlignment) -> ClaimVerdict | None:
    """A ``"key": true|false`` in the supporting window says the opposite of the claim."""
    if not a.supported_window or a.best is None:
        return None
    tokens, text = a.best.context.tokens, a.best.context.context.text
    values = {
        match.group(1).lower()
        for token in tokens[a.best.first : a.best.last + 1]
        if (match := _FLAG_AFTER.match(text, token.end)) is not None
    }
    if values != {"true" if a.checkable.negated else "false"}:
        return None
    return verdict(
        a, Verdict.CONTRADICTED, "a yes/no value in the span says the opposite", a.evidence
    )


def other_value(a: ClaimAlignment) -> ClaimVerdict | None:
    """A window matching the claim's other words has another number or name in its place.

    The claim's value must occur nowhere in the contexts. With ``one_value`` (against a
    reference) it must be the claim's one difference: a claim that differs in two ("the
    Solo plan costs $6" against "the Business plan costs $19") speaks of another thing.
    """
    absent = _values_in_place(a)
    if not absent:
        return None
    other = _other_key_at(a, absent)
    if other is None:
        return None
    return _conflict(
        a, other, "a matching span has a different value than " + ", ".join(sorted(absent)), absent
    )


def extent(a: ClaimAlignment) -> ClaimVerdict | None:
    """The matching span bounds with a number what the claim says has no bound ("a 2-year
    limited warranty" against "a lifetime warranty"), or says has none where the claim
    gives a number ("unlimited data" against "5 GB of data").

    Aligned as ``other_value`` aligns: the window must match the claim's other words, and
    what conflicts must sit in or beside it, beside a word the claim's extent qualifies
    (``lexical._extent``).
    """
    if a.best is None:
        return None
    return _bounded_in_window(a) or _unbounded_in_window(a)


def negation(a: ClaimAlignment) -> ClaimVerdict | None:
    """The sentence the claim restates denies what it affirms ("cannot be returned")."""
    if not a.restating or a.best is None:
        return None
    ctx, best = a.best.context, a.best
    # The sentence may sit just beside the window: its words also occur in the window's
    # other sentences.
    flip = polarity_flip(
        a.claim.text,
        _said(a),
        ctx.tokens,
        ctx.context.text,
        max(0, best.first - _RESTATED_REACH),
        min(len(ctx.tokens) - 1, best.last + _RESTATED_REACH),
    )
    if flip is None:
        return None
    return verdict(
        a,
        Verdict.CONTRADICTED,
        f"the context states the opposite of {flip.word!r}",
        a.span(ctx.index, flip.start, flip.end),
        a.ranges((flip.word,)),
    )


# --- withheld support ----------------------------------------------------------------


def widening(a: ClaimAlignment) -> ClaimVerdict | None:
    """A universal word dropping the passage's condition, or a superlative it lacks."""
    if not a.restating or a.best is None:
        return None
    said = _said(a)
    tokens, text = a.best.context.tokens, a.best.context.context.text
    start, end = sentence_bounds(text, tokens[a.best.first].start, tokens[a.best.last].end)
    wider = widening_words(
        a.claim.text,
        said,
        lambda n: any(n in c.positions for c in a.indexed),
        text[start:end],
        superlatives=not a.record,
    )
    if not wider:
        return None
    ranges: list[tuple[int, int]] = []
    if a.claim.answer_start is not None:
        for i, token in enumerate(said):
            if token.norm in wider:
                last = said[min(len(said) - 1, i + _WIDENED_REACH)]
                ranges.append((a.claim.answer_start + token.start, a.claim.answer_start + last.end))
    return verdict(
        a,
        Verdict.NOT_FOUND,
        "the contexts do not say it so widely: " + ", ".join(sorted(wider)),
        unsupported=tuple(ranges),
    )


# --- base verdicts -------------------------------------------------------------------


def supported(a: ClaimAlignment) -> ClaimVerdict | None:
    """One window states nearly all of the claim, all its numbers and names."""
    if not a.supported_window:
        return None
    return verdict(
        a, Verdict.SUPPORTED, f"{a.window_share:.0%} of the claim's words in one span", a.evidence
    )


def flags_agree(a: ClaimAlignment) -> ClaimVerdict | None:
    """Every yes/no fact the claim names agrees, and its numbers and names are stated."""
    if not a.mentions or any(m.agrees is not True for m in a.mentions):
        return None
    if not all(t.norm in a.in_contexts for t in a.tokens if t.key):
        return None
    return verdict(
        a,
        Verdict.INFERRED,
        "the context's yes/no values state it: " + ", ".join(m.flag.key for m in a.mentions),
    )


def inferred(a: ClaimAlignment) -> ClaimVerdict | None:
    """The contexts together state the claim's words; one window holds a share of them."""
    if not a.inferable:
        return None
    return verdict(a, Verdict.INFERRED, f"{a.global_share:.0%} of words found")


def not_found(a: ClaimAlignment) -> ClaimVerdict:
    """What no rule decided: the claim's words or values are not in the contexts."""
    coverage = a.judge.record_inferred_coverage if a.record else a.judge.inferred_coverage
    if a.missing_keys:
        reason = f"not in the contexts: {', '.join(sorted(a.missing_keys))}"
    elif a.global_share >= coverage:
        reason = f"its words are scattered: at most {a.window_share:.0%} in one span"
    else:
        reason = f"only {a.global_share:.0%} of the claim's words found"
    unstated = a.missing_keys or set(a.weights) - a.everywhere
    return verdict(a, Verdict.NOT_FOUND, reason, unsupported=a.ranges(unstated))


RULES: tuple[Rule, ...] = (
    Rule("flag_value", flag_value, "a yes/no value of the data says the opposite"),
    Rule("window_flag", window_flag, "a true/false beside the claim's words says the opposite"),
    Rule("other_value", other_value, "another number or name where the claim has its own"),
    Rule("extent", extent, "a number where the claim has no bound, or no bound for its number"),
    Rule("negation", negation, "the restated sentence denies what the claim affirms"),
    Rule("widening", widening, "a universal word or superlative the passage does not use"),
    Rule("supported", supported, "base: one window states the claim"),
    Rule("flags_agree", flags_agree, "base: the data's yes/no values state the claim"),
    Rule("inferred", inferred, "base: the contexts together state the claim"),
)
BASE = frozenset({"supported", "flags_agree", "inferred"})
"""The verdicts from coverage alone: not switched off by the ablation."""


def decide(a: ClaimAlignment, rules: tuple[Rule, ...] = RULES) -> ClaimVerdict:
    """The first verdict the table's rules give, else NOT_FOUND."""
    for rule in rules:
        found = rule.check(a)
        if found is not None:
            return found
    return not_found(a)


# --- helpers -------------------------------------------------------------------------


def _said(a: ClaimAlignment) -> list[Token]:
    """All the claim's tokens, stop words too (the sentence rules read its wording): read
    once per alignment, however many rules ask."""
    return a.said


def _values_in_place(a: ClaimAlignment) -> set[str]:
    """The claim's numbers and names no context states, when the window matches the rest.

    Empty unless the best window holds ``contradiction_coverage`` of the claim's other
    weight (and, with ``one_value``, they are the claim's one difference): only then does
    the window speak of what the claim speaks of, and what it has in their place differs.
    """
    best = a.best
    if best is None or a.supported_window:
        return set()
    absent = a.window_missing_keys - a.in_contexts
    if not absent or not _matches_apart_from(a, absent):
        return set()
    if a.one_value and _value_runs(a.tokens, absent) != 1:
        return set()
    return absent


def _matches_apart_from(a: ClaimAlignment, absent: set[str]) -> bool:
    """Whether the best window holds ``contradiction_coverage`` of the claim's weight
    besides its words in ``absent``."""
    rest = a.total - sum(a.weights[n] for n in absent)
    return (
        a.best is not None and rest > 0 and a.best.weight / rest >= a.judge.contradiction_coverage
    )


def _beside_window(a: ClaimAlignment) -> range:
    """The token positions of the best window and ``_CONTRADICTION_MARGIN`` either side,
    where the conflicting value of a claim the window matches may sit."""
    assert a.best is not None
    lo = max(0, a.best.first - _CONTRADICTION_MARGIN)
    return range(lo, min(len(a.best.context.tokens), a.best.last + 1 + _CONTRADICTION_MARGIN))


def _conflict(
    a: ClaimAlignment, at: int, reason: str, norms: Collection[str], value_end: int = 0
) -> ClaimVerdict:
    """CONTRADICTED: the window and its conflicting token ``at`` (through the character
    ``value_end``, when its value is written further) as the evidence, the claim's words in
    ``norms`` (with their phrases) marked in the answer."""
    assert a.best is not None
    best, tokens = a.best, a.best.context.tokens
    first, last = min(best.first, at), max(best.last, at)
    return verdict(
        a,
        Verdict.CONTRADICTED,
        reason,
        a.span(best.context.index, tokens[first].start, max(tokens[last].end, value_end)),
        a.ranges(norms),
    )


def _bounded_in_window(a: ClaimAlignment) -> ClaimVerdict | None:
    """The claim leaves unbounded what a number beside the matching window bounds."""
    best = a.best
    # The window must state all the claim's numbers and names: the extent is its one
    # difference.
    if best is None or a.window_missing_keys or not may_state_extent(t.norm for t in a.tokens):
        return None
    said, text = a.said, a.claim.text
    extents = unbounded_extents(said, text)
    if not extents:
        return None
    tokens, context = best.context.tokens, best.context.context.text
    claim_words = {t.norm for t in said}
    for found in extents:
        if any(states(found.word, c.tokens, c.positions) for c in a.indexed):
            continue
        if not _matches_apart_from(a, {found.word} & a.weights.keys()):
            continue
        for at in _beside_window(a):
            if (
                tokens[at].norm not in claim_words
                and is_quantity(tokens, at, context)
                and bounds(found.heads, tokens, at, context)
            ):
                claimed = text[said[found.first].start : said[found.at].end]
                value = _quantity_text(tokens, at, context)
                return _conflict(
                    a,
                    at,
                    f"a matching span has {value!r} where the claim has {claimed!r}",
                    {found.word},
                    tokens[at].start + len(value),
                )
    return None


def _unbounded_in_window(a: ClaimAlignment) -> ClaimVerdict | None:
    """The matching window leaves unbounded what the claim bounds with a number."""
    absent = _values_in_place(a)
    if not absent:
        return None
    assert a.best is not None
    tokens, context = a.best.context.tokens, a.best.context.context.text
    near = _beside_window(a)
    stated = unbounded_extents(tokens, context, near.start, near.stop)
    if not stated:
        return None
    said, text = a.said, a.claim.text
    numbers = [i for i, t in enumerate(said) if t.norm in absent and is_quantity(said, i, text)]
    # The claim's absent values must be these quantities alone: a number and its unit
    # ("5 GB", whose capitals read as a name), no other name.
    quantities = {said[j].norm for i in numbers for j in (i, i + 1) if j < len(said)}
    if not numbers or not absent <= quantities:
        return None
    # A claim that has the passage's extent (or its word: "not unlimited") is not read
    # against it; an end word alone is no extent ("limited to 5 GB" against "no limit").
    claim_words = {t.norm for t in said}
    claim_extents = {e.word for e in unbounded_extents(said, text)}
    for found in stated:
        if found.word in claim_extents or (not found.end and found.word in claim_words):
            continue
        if any(bounds(found.heads, said, i, text) for i in numbers):
            words = context[tokens[found.first].start : tokens[found.at].end]
            return _conflict(
                a,
                found.first,
                f"a matching span says {words!r} where the claim has "
                + ", ".join(repr(_quantity_text(said, i, text)) for i in numbers),
                absent,
                tokens[found.last].end,
            )
    return None


def _quantity_text(tokens: list[Token], at: int, text: str) -> str:
    """The number at ``tokens[at]`` as written, with the word after it ("2-year", "30 days")."""
    unit = _WORD_AFTER.match(text, tokens[at].end)
    return text[tokens[at].start : tokens[at].end if unit is None else unit.end()]


def _value_runs(tokens: list[Token], norms: set[str]) -> int:
    """How many separate values the claim's words in ``norms`` make (adjacent words: one)."""
    runs, inside = 0, False
    for token in tokens:
        hit = token.norm in norms
        runs += hit and not inside
        inside = hit
    return runs


def _other_key_at(a: ClaimAlignment, absent: set[str]) -> int | None:
    """Where the window holds a number or name the claim does not have.

    Against data only a number counts: there a window spans several fields, and a
    capitalised word beside the claim's is another field's value more often than the
    claim's counterpart.
    """
    assert a.best is not None
    tokens, text = a.best.context.tokens, a.best.context.context.text
    claim_norms = {t.norm for t in a.tokens}
    has_number = any(t.number for t in a.tokens if t.norm in absent)
    uncovered = absent - a.best.covered
    misses_name = not a.record and any(not t.number for t in a.tokens if t.norm in uncovered)
    for at in _beside_window(a):
        token = tokens[at]
        if token.norm in claim_norms:
            continue
        if token.number and has_number:
            return at
        if (
            misses_name
            and not token.number
            and text[token.start].isupper()
            and token.norm not in STOP_WORDS
            and token.norm not in WEEKDAYS
        ):
            return at
    return None
