"""``LexicalJudge``: the offline judge. No network, no model, deterministic and fast.

Each answer claim (a sentence or coordinated clause) is aligned to its best window
in the contexts by content-token coverage, and the window is then aligned to the
claim character by character with rapidfuzz to cut the evidence span. Numbers,
dates, times and capitalised names in a claim must appear in the aligned window.

Verdicts:

- ``SUPPORTED``: one window covers nearly all of the claim's content words and all of
  its numbers and names; the evidence is that window, verified against the context.
- ``CONTRADICTED``: a window covers the claim's other words but carries a different
  number or name where the claim has its own (or the opposite polarity of a
  structured-data flag such as ``"OutdoorSeating": false``).
- ``INFERRED``: the claim's words and all its numbers and names occur across the
  contexts, but no single window states it.
- ``NOT_FOUND``: otherwise.

Against a JSON record context, the record's yes/no facts (``"OutdoorSeating": true``,
``"WiFi": null``) are read by the words of their keys: a claim naming one with the
opposite polarity is ``CONTRADICTED``, one stating a fact the record leaves ``null``
is ``NOT_FOUND``. Sentences that talk to the user or about the sources ("Sure!",
"The passages do not say ...") are not claims.

Text normalisation is generic: case, accents, light suffix stemming, stop words, numbers
("1,000" == "1000" == "one thousand", "4.0" == "4"), clock times ("5 pm" == "17:00"),
month names against ISO dates, derived forms of names ("Venezuelan" for "Venezuela"),
and camelCase / snake_case keys of JSON records.
"""

from __future__ import annotations

import asyncio
import re
import time
import unicodedata
from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from rapidfuzz import fuzz

from ragpulse.evaluation.claims import split_claims
from ragpulse.evaluation.metrics import CorrectnessInputs, assemble
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
from ragpulse.judges._lexical_forms import acronyms, days_a_week, label_end, weekday_count
from ragpulse.judges._lexical_hours import Week, hours_conflict, record_week
from ragpulse.judges._lexical_meta import is_meta
from ragpulse.judges._lexical_record import RecordFlag, flag_mentions, record_flags

__all__ = ["LexicalJudge"]

# --- text normalisation -------------------------------------------------------------

_RAW_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)?")
_CAMEL_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[^\W\d_]+")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")

_STOP_WORDS_TEXT = """
    a about above across after again against all almost also although always am among an
    and another any anyone anything are around as at be became because become been before
    being below between both but by can could did do does doing done down during each
    either else even ever every for from further had has have having he her here hers
    herself him himself his how however i if in into is it its itself just least less
    let like made make many may me might more most much must my myself neither nor of
    off often on once one only onto or other others our ours ourselves out over own per
    quite rather same several shall she should since so some such than that the their
    theirs them themselves then there these they this those though through thus to too
    toward towards under until up upon us very via was we were what whatever when where
    whether which while who whom whose why will with within without would yet you your
    yours yourself yourselves s t
    based according provided given mentioned stated states state says said passage
    passages context contexts information text article document documents data
    structured overall summary answer question
    author authors writer writers reporter reporters
    discuss discusses discussed highlight highlights highlighted emphasize emphasizes
    emphasized emphasise emphasises emphasised conclude concludes concluded
"""
# Titles before a name ("Rep. D'Esposito", "President Obama") are not names themselves.
_TITLES = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "rep", "sen", "gov", "gen", "sir", "rev", "col", "capt",
     "lt", "sgt", "president", "senator", "governor", "representative", "congressman",
     "congresswoman", "minister", "chancellor", "secretary", "mayor", "judge", "justice",
     "chief", "king", "queen", "prince", "princess", "lord", "lady", "pope", "saint"}
)  # fmt: skip
# Temperature scales: units, not names; "°F" and "Fahrenheit" are one word.
_DEGREE_SCALES = {"F": "fahrenheit", "C": "celsius"}
_UNIT_NAMES = frozenset({"fahrenheit", "celsius", "kelvin"})
# Words whose presence flips a statement's polarity.
_NEGATIONS = frozenset({"not", "no", "never", "none", "nor", "without", "cannot", "n't"})

_UNITS = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {
    "hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
    "trillion": 1_000_000_000_000,
}  # fmt: skip
_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
# Addresses write states either way ("Santa Barbara, CA"); compare them by postal code.
_US_STATES = {
    "alabama": "al", "alaska": "ak", "arizona": "az", "arkansas": "ar", "california": "ca",
    "colorado": "co", "connecticut": "ct", "delaware": "de", "florida": "fl", "georgia": "ga",
    "hawaii": "hi", "idaho": "id", "illinois": "il", "indiana": "in", "iowa": "ia",
    "kansas": "ks", "kentucky": "ky", "louisiana": "la", "maine": "me", "maryland": "md",
    "massachusetts": "ma", "michigan": "mi", "minnesota": "mn", "mississippi": "ms",
    "missouri": "mo", "montana": "mt", "nebraska": "ne", "nevada": "nv", "ohio": "oh",
    "oklahoma": "ok", "oregon": "or", "pennsylvania": "pa", "tennessee": "tn", "texas": "tx",
    "utah": "ut", "vermont": "vt", "virginia": "va", "washington": "wa", "wisconsin": "wi",
    "wyoming": "wy",
}  # fmt: skip
_US_STATE_CODES = frozenset(_US_STATES.values())
_BOOL_TRUE = "true"
_BOOL_FALSE = "false"


class _Token(NamedTuple):
    norm: str
    start: int
    end: int
    key: bool
    """A number, date part, time or capitalised name: it must match exactly."""
    number: bool


def _stem(word: str) -> str:
    # Light, symmetric suffix stripping: both sides go through it, so it only has to
    # be consistent, not linguistically right.
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _number_text(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _numeric_parts(raw: str) -> list[str]:
    if _THOUSANDS.fullmatch(raw):
        raw = raw.replace(",", "")
    parts: list[str] = []
    for chunk in re.split(r"[,:]", raw):
        if not chunk:
            continue
        try:
            parts.append(_number_text(float(chunk)))
        except ValueError:
            parts.append(chunk)
    return parts


def _tokenize(text: str, *, names: bool) -> list[_Token]:
    """Normalised tokens with their offsets in ``text``.

    With ``names``, capitalised words (not at a sentence start) are key tokens.
    """
    tokens: list[_Token] = []
    sentence_start = True
    prev_end = 0
    for match in _RAW_TOKEN.finditer(text):
        raw = match.group()
        start, end = match.span()
        if names and (not tokens or _BOUNDARY.search(text, prev_end, start)):
            sentence_start = True
        prev_end = end
        if raw in _DEGREE_SCALES and start > 0 and text[start - 1] == "°":
            # "79°F" is "79 degrees Fahrenheit".
            tokens.append(_Token(_DEGREE_SCALES[raw], start, end, False, False))
            sentence_start = False
            continue
        if not raw[0].isdigit():
            forms = _word_forms(raw)
            if forms is not None:
                for norm, may_be_name in forms:
                    key = names and may_be_name and not sentence_start
                    tokens.append(_Token(norm, start, end, key, False))
                sentence_start = False
                continue
        else:
            sentence_start = False
            # "4.5 stars out of 5": the scale of a rating is not a fact of the record.
            if _SCALE_BEFORE.search(text, max(0, start - 10), start):
                continue
            for part in _numeric_parts(raw):
                tokens.append(_Token(part, start, end, True, True))
            continue
        # Numbers, clock words and months: their meaning depends on their neighbours.
        lower = raw.lower()
        if lower.endswith(("'s", "’s")):
            lower = lower[:-2]
        if lower in ("am", "pm", "a.m", "p.m") and tokens and tokens[-1].number:
            # Clock time: "5 pm" == "5:00 PM" == "17:00". The hour is the first part of
            # the number just before ("5:30" gives the tokens 5 and 30).
            first = len(tokens) - 1
            while first > 0 and tokens[first - 1].start == tokens[-1].start:
                first -= 1
            hour_token = tokens[first]
            hour = int(hour_token.norm) if hour_token.norm.isdigit() else -1
            if 0 <= hour <= 12 and tokens[-1].end >= start - 2:
                hour = (hour % 12) + (12 if lower.startswith("p") else 0)
                tokens[first] = _Token(str(hour), hour_token.start, hour_token.end, True, True)
                continue
        if lower in ("noon", "midday"):
            tokens.append(_Token("12", start, end, True, True))
            continue
        if lower == "midnight":
            tokens.append(_Token("0", start, end, True, True))
            continue
        if lower in _SCALES and tokens and tokens[-1].number:
            last = tokens[-1]
            try:
                value = float(last.norm) * _SCALES[lower]
                tokens[-1] = _Token(_number_text(value), last.start, end, True, True)
                continue
            except ValueError:
                pass
        if lower in _UNITS:
            value_u = _UNITS[lower]
            last_t = tokens[-1] if tokens else None
            if _DETERMINER_BEFORE.search(text, max(0, start - 8), start):
                # "the two countries", "both of its three": a count the sentence refers
                # back to, not a new fact.
                tokens.append(_Token(str(value_u), start, end, False, False))
                sentence_start = False
                continue
            if (
                last_t is not None
                and last_t.number
                and last_t.norm in ("20", "30", "40", "50", "60", "70", "80", "90")
            ):
                tokens[-1] = _Token(str(int(last_t.norm) + value_u), last_t.start, end, True, True)
            else:
                tokens.append(_Token(str(value_u), start, end, True, True))
            sentence_start = False
            continue
        if lower in _MONTHS and (raw[0].isupper() or lower != "may"):
            tokens.append(_Token(str(_MONTHS[lower]), start, end, True, True))
        else:
            # "may" the verb, a lone "pm" or "million": an ordinary word here.
            tokens.append(_Token(_stem(lower), start, end, False, False))
        sentence_start = False
    return tokens


_BOUNDARY = re.compile(r"[.!?\n:]")
_SCALE_BEFORE = re.compile(r"\bout of\s+$", re.IGNORECASE)
_DETERMINER_BEFORE = re.compile(r"\b(?:the|these|those|its|their|all)\s+$", re.IGNORECASE)
# Plural acronyms ("TVs", "CEOs") are one word, not "T" and "Vs".
_PLURAL_ACRONYM = re.compile(r"[A-Z]{2,}s")
_SPECIAL_WORDS = frozenset(
    {"am", "pm", "a.m", "p.m", "noon", "midday", "midnight", *_SCALES, *_UNITS, *_MONTHS}
)


@lru_cache(maxsize=1 << 16)
def _word_forms(raw: str) -> tuple[tuple[str, bool], ...] | None:
    """Normalised parts of a plain word, each with whether it may be a name.

    None for words with a meaning of their own (numbers, months, clock words), which
    the tokenizer handles in context. Cached: texts repeat their words.
    """
    if not raw.isascii():
        # "Nicolás" and "Nicolas" are the same name; accents are dropped on both sides.
        raw = "".join(c for c in unicodedata.normalize("NFKD", raw) if not unicodedata.combining(c))
    lower = raw.lower()
    if lower.endswith(("'s", "’s")):
        lower = lower[:-2]
    if lower in _SPECIAL_WORDS:
        return None
    if _PLURAL_ACRONYM.fullmatch(raw):
        parts = [raw[:-1]]
    elif not raw.islower() and not raw.isupper():
        parts = _CAMEL_PART.findall(raw)
    else:
        parts = [raw]
    forms: list[tuple[str, bool]] = []
    for part in parts:
        part_lower = part.lower()
        if part_lower.endswith(("'s", "’s")):
            part_lower = part_lower[:-2]
        if part_lower in _NEGATIONS or part_lower.endswith("n't"):
            forms.append(("not", False))
            continue
        may_be_name = (
            part[0].isupper()
            and part_lower not in _STOP_WORDS
            and part_lower not in _TITLES
            and part_lower not in _UNIT_NAMES
            and len(part) > 1
        )
        if part[0].isupper() and part_lower in _US_STATES:
            forms.append(("us-state-" + _US_STATES[part_lower], may_be_name))
            continue
        if part.isupper() and len(part) == 2 and part_lower in _US_STATE_CODES:
            forms.append(("us-state-" + part_lower, may_be_name))
            continue
        forms.append((_stem(part_lower), may_be_name))
    return tuple(forms)


# Stop words are compared after stemming, so their stems are stop words too.
_STOP_WORDS = frozenset(form for word in _STOP_WORDS_TEXT.split() for form in (word, _stem(word)))


def _is_content(token: _Token) -> bool:
    return token.key or (token.norm not in _STOP_WORDS and token.norm != "not")


# --- contexts ----------------------------------------------------------------------


@dataclass(slots=True)
class _IndexedContext:
    index: int
    context: Context
    tokens: list[_Token]
    positions: dict[str, list[int]]


def _index_context(index: int, context: Context, max_chars: int) -> _IndexedContext:
    text = context.text[:max_chars]
    tokens = _tokenize(text, names=False)
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(tokens):
        positions.setdefault(token.norm, []).append(i)
    if tokens:
        starts = [t.start for t in tokens]
        for acronym in acronyms(text):
            at = bisect_left(starts, acronym.start)
            if at < len(tokens):
                positions.setdefault(_ACRONYM + acronym.letters, []).append(at)
    return _IndexedContext(index, context, tokens, positions)


@dataclass(slots=True)
class _Alignment:
    context: _IndexedContext
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

    def __init__(
        self,
        *,
        name: str = "lexical",
        supported_coverage: float = 0.8,
        inferred_coverage: float = 0.5,
        record_inferred_coverage: float = 0.2,
        contradiction_coverage: float = 0.7,
        window_factor: float = 2.0,
        min_window_tokens: int = 12,
        max_context_chars: int = 200_000,
        max_hits_per_token: int = 400,
        number_reach: float = 1.0,
        mode: str = "f1",
        beta: float = 1.0,
    ) -> None:
        self.name = name
        self.supported_coverage = supported_coverage
        """Share of a claim's content weight one window must cover for SUPPORTED."""
        self.inferred_coverage = inferred_coverage
        self.record_inferred_coverage = record_inferred_coverage
        """The same against JSON records, whose free-text fields answers summarise loosely."""
        """Share covered across all contexts for INFERRED."""
        self.contradiction_coverage = contradiction_coverage
        """Share of the non-key words a window must cover before a differing number counts."""
        self.window_factor = window_factor
        self.min_window_tokens = min_window_tokens
        self.max_context_chars = max_context_chars
        """Only this many characters of each context are read (bounds the work on huge inputs)."""
        self.max_hits_per_token = max_hits_per_token
        self.number_reach = number_reach
        """How far (in windows) from the aligned window a claim's number may be stated."""
        self.mode = mode
        self.beta = beta

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
        claims = _checkable_claims(answer)
        indexed = [
            _index_context(i, c, self.max_context_chars) for i, c in enumerate(record.contexts)
        ]
        claims = _align_name_forms(claims, indexed)
        claims = _align_surface_forms(claims, indexed)
        asked = _question_words(record.question)
        flags = tuple(f for c in record.contexts for f in record_flags(c.text, _key_words))
        week = next((w for c in record.contexts if (w := record_week(c.text)) is not None), None)
        verdicts = [
            _check_hours(
                self._judge_with_flags(claim, indexed, record.contexts, flags, asked), week
            )
            for claim in claims
        ]
        correctness_inputs = None
        reference_verdicts: list[ClaimVerdict] = []
        if CORRECTNESS in metrics and record.reference and claims:
            reference_context = (Context(record.reference, id="reference"),)
            reference_index = [_index_context(0, reference_context[0], self.max_context_chars)]
            precision_hits = tuple(
                self._judge_claim(c, reference_index, reference_context).verdict
                in (Verdict.SUPPORTED, Verdict.INFERRED)
                for c in claims
            )
            answer_context = (Context(answer, id="answer"),)
            answer_index = [_index_context(0, answer_context[0], self.max_context_chars)]
            reference_verdicts = [
                self._judge_claim(c, answer_index, answer_context)
                for c in _checkable_claims(record.reference)
            ]
            recall_hits = tuple(
                v.verdict in (Verdict.SUPPORTED, Verdict.INFERRED) for v in reference_verdicts
            )
            correctness_inputs = CorrectnessInputs(precision_hits, recall_hits)
        return assemble(
            verdicts,
            metrics=metrics,
            judge=self.name,
            annotator_kind=self.annotator_kind,
            duration_ms=(time.perf_counter() - started) * 1000,
            correctness_inputs=correctness_inputs,
            reference_claims=reference_verdicts,
            mode=self.mode,
            beta=self.beta,
        )

    # --- one claim ----------------------------------------------------------------------

    def _judge_with_flags(
        self,
        checkable: _CheckableClaim,
        indexed: Sequence[_IndexedContext],
        contexts: Sequence[Context],
        flags: Sequence[RecordFlag],
        asked: frozenset[str],
    ) -> ClaimVerdict:
        """The claim's verdict, checked against the yes/no facts of JSON record contexts."""
        verdict = self._judge_claim(checkable, indexed, contexts, record=bool(flags), asked=asked)
        if not flags or verdict.verdict in (Verdict.SUPPORTED, Verdict.CONTRADICTED):
            return verdict
        claim = checkable.claim
        mentions = flag_mentions(claim.text, [(t.norm, t.start) for t in checkable.tokens], flags)
        if not mentions:
            return verdict
        for mention in mentions:
            if mention.agrees is False:
                value = "true" if mention.flag.value else "false"
                return ClaimVerdict(
                    claim,
                    Verdict.CONTRADICTED,
                    reason=f"the record has {mention.flag.key}: {value}",
                )
        unknown = [m.flag.key for m in mentions if m.agrees is None]
        # "There is no information about WiFi" is what the record says of an unknown.
        if unknown and not _HEDGE.search(claim.text):
            return ClaimVerdict(
                claim,
                Verdict.NOT_FOUND,
                reason="the record leaves unknown: " + ", ".join(unknown),
            )
        # Every named flag agrees: the claim paraphrases the record, unless it also
        # carries a number or name the contexts do not have.
        keys_found = all(
            any(t.norm in c.positions for c in indexed) for t in checkable.tokens if t.key
        )
        if verdict.verdict is Verdict.NOT_FOUND and keys_found:
            return ClaimVerdict(
                claim,
                Verdict.INFERRED,
                reason="the record's flags state it: " + ", ".join(m.flag.key for m in mentions),
            )
        return verdict

    def _judge_claim(
        self,
        checkable: _CheckableClaim,
        indexed: Sequence[_IndexedContext],
        contexts: Sequence[Context],
        *,
        record: bool = False,
        asked: frozenset[str] = frozenset(),
    ) -> ClaimVerdict:
        """The claim's verdict against ``contexts``.

        Words of the user's question (``asked``) are not new content: an answer that
        restates the question ("the proper way to dispose of a worn USA flag is ...")
        may be INFERRED on them, though only a context can make it SUPPORTED.
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
        everywhere = {
            norm for norm in weights if norm in asked or any(norm in c.positions for c in indexed)
        }
        global_share = sum(weights[n] for n in everywhere) / total
        missing_keys = keys - everywhere
        if best is not None:
            share = best.weight / total
            window_missing_keys = keys - best.covered
            if share >= self.supported_coverage and not window_missing_keys:
                evidence = self._evidence(claim, best, contexts)
                if _polarity_conflict(checkable.negated, best):
                    return ClaimVerdict(
                        claim, Verdict.CONTRADICTED, reason="the record's flag says the opposite"
                    )
                return ClaimVerdict(
                    claim,
                    Verdict.SUPPORTED,
                    evidence=evidence,
                    quote=evidence.text if evidence else None,
                    reason=f"{share:.0%} of the claim's words in one span",
                )
            # A contradiction needs a claim value that occurs nowhere in the contexts, in a
            # window that otherwise matches the claim (its remaining words and values).
            absent = window_missing_keys & missing_keys
            rest = total - sum(weights[n] for n in absent)
            if (
                absent
                and rest > 0
                and best.weight / rest >= self.contradiction_coverage
                and _window_has_other_key(best, absent, tokens)
            ):
                return ClaimVerdict(
                    claim,
                    Verdict.CONTRADICTED,
                    reason="a matching span has a different value than "
                    + ", ".join(sorted(absent)),
                )
        inferred_coverage = self.record_inferred_coverage if record else self.inferred_coverage
        # A number found in the contexts but far from the rest of what the claim says
        # ("killed 16 Sherpas" where 16 counts something else) is not stated by them,
        # unless another passage states it beside a word of the claim (facts combined
        # across passages are INFERRED). Records are exempt: their values sit under
        # keys, not in sentences.
        reach = int(window * self.number_reach)
        numbers = {t.norm for t in tokens if t.number} - asked
        stray = {
            n
            for n in numbers
            if best is None
            or (
                not _near(best, n, reach)
                and not _stated_elsewhere(indexed, best, n, weights, reach)
            )
        }
        if stray and not missing_keys and not record:
            return ClaimVerdict(
                claim,
                Verdict.NOT_FOUND,
                reason="no span states it with " + ", ".join(sorted(stray)),
            )
        if not missing_keys and global_share >= inferred_coverage:
            return ClaimVerdict(
                claim, Verdict.INFERRED, reason=f"{global_share:.0%} of words found"
            )
        reason = (
            f"not in the contexts: {', '.join(sorted(missing_keys))}"
            if missing_keys
            else f"only {global_share:.0%} of the claim's words found"
        )
        return ClaimVerdict(claim, Verdict.NOT_FOUND, reason=reason)

    def _best_window(
        self, ctx: _IndexedContext, weights: dict[str, float], window: int
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
        self, claim: Claim, alignment: _Alignment, contexts: Sequence[Context]
    ) -> Evidence | None:
        tokens = alignment.context.tokens
        text = alignment.context.context.text
        start = tokens[alignment.first].start
        end = tokens[alignment.last].end
        # Character-level alignment inside the window tightens the span to what the
        # claim actually says.
        region = text[start:end]
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
    r"provided|indicated?|listed|clear)\b",
    re.IGNORECASE,
)
_LEAD_IN_END = re.compile(r":\s*$")
_FLAG_AFTER = re.compile(r"\s*[\"']?\s*:\s*(true|false)\b", re.IGNORECASE)
# Occurrences of a number looked at when checking where else it is stated (bounds the work).
_MAX_NUMBER_SITES = 50
# How far beyond the aligned window a differing number or name may sit.
_CONTRADICTION_MARGIN = 3


# "(Passage 2)", "as passage 1 states", "Documents 1 and 3": which source a claim cites is
# not a fact about the world, and its number is in no context.
_SOURCE_CITATION = re.compile(
    r"\b(?:passage|document|doc|context|source|reference|snippet|excerpt|chunk|result)s?"
    r"\s*(?:#|no\.?\s*)?\[?\d+\]?(?:\s*(?:,|and|&|or|-|–)\s*\[?\d+\]?)*",
    re.IGNORECASE,
)


def _stated_elsewhere(
    indexed: Sequence[_IndexedContext],
    best: _Alignment,
    norm: str,
    weights: dict[str, float],
    reach: int,
) -> bool:
    """Whether a context other than the aligned one has ``norm`` beside another claim word."""
    for ctx in indexed:
        if ctx is best.context:
            continue
        for position in ctx.positions.get(norm, ())[:_MAX_NUMBER_SITES]:
            lo, hi = max(0, position - reach), position + reach + 1
            if any(t.norm in weights and t.norm != norm for t in ctx.tokens[lo:hi]):
                return True
    return False


def _near(alignment: _Alignment, norm: str, reach: int) -> bool:
    """Whether ``norm`` occurs within ``reach`` tokens of the aligned window."""
    lo, hi = alignment.first - reach, alignment.last + reach
    return any(lo <= p <= hi for p in alignment.context.positions.get(norm, ()))


def _check_hours(verdict: ClaimVerdict, week: Week | None) -> ClaimVerdict:
    """The verdict, or CONTRADICTED where the claim misstates the record's opening hours."""
    if week is None or verdict.verdict is Verdict.CONTRADICTED:
        return verdict
    conflict = hours_conflict(verdict.claim.text, week)
    if conflict is None:
        return verdict
    return ClaimVerdict(verdict.claim, Verdict.CONTRADICTED, reason=conflict)


def _question_words(question: str | None) -> frozenset[str]:
    """Normalised words and acronyms of the user's question."""
    if not question:
        return frozenset()
    words = {t.norm for t in _tokenize(question, names=False)}
    words.update(_ACRONYM + a.letters for a in acronyms(question))
    return frozenset(words)


def _inside(token: _Token, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(start <= token.start and token.end <= end for start, end in ranges)


def _is_lead_in(claim: Claim) -> bool:
    """A line introducing what follows ("Here is the summary:") states nothing itself."""
    return bool(_LEAD_IN_END.search(claim.text))


@dataclass(frozen=True, slots=True)
class _CheckableClaim:
    claim: Claim
    tokens: list[_Token]
    """Content tokens (stop words and negations dropped)."""
    negated: bool


def _checkable_claims(text: str) -> list[_CheckableClaim]:
    """The text's claims that state something.

    Not lead-ins, not talk about the conversation or the sources, not content-free fragments.
    """
    checkable = []
    for claim in split_claims(text):
        if _is_lead_in(claim) or is_meta(claim.text):
            continue
        all_tokens = _tokenize(claim.text, names=True)
        cited = [m.span() for m in _SOURCE_CITATION.finditer(claim.text)]
        cited.append((0, label_end(claim.text)))
        tokens = [t for t in all_tokens if _is_content(t) and not _inside(t, cited)]
        if tokens:
            negated = any(t.norm == "not" for t in all_tokens)
            checkable.append(_CheckableClaim(claim, tokens, negated))
    return checkable


# Names are compared by their derived forms from this many letters ("Venezuelan" for
# "Venezuela", "Americans" for "America"); shorter names must match exactly.
_NAME_PREFIX = 5
_NAME_SUFFIX_SLACK = 3


def _align_name_forms(
    claims: list[_CheckableClaim], indexed: Sequence[_IndexedContext]
) -> list[_CheckableClaim]:
    """The claims, with names the contexts spell in a derived form rewritten to that form."""
    missing = {
        t.norm
        for c in claims
        for t in c.tokens
        if t.key and not t.number and len(t.norm) >= _NAME_PREFIX
        and not any(t.norm in ctx.positions for ctx in indexed)
    }  # fmt: skip
    if not missing:
        return claims
    by_prefix: dict[str, list[str]] = {}
    for ctx in indexed:
        for norm in ctx.positions:
            if len(norm) >= _NAME_PREFIX and norm[0].isalpha():
                by_prefix.setdefault(norm[:_NAME_PREFIX], []).append(norm)
    aliases: dict[str, str] = {}
    for name in missing:
        for candidate in sorted(by_prefix.get(name[:_NAME_PREFIX], ())):
            longer, shorter = (candidate, name) if len(candidate) > len(name) else (name, candidate)
            if longer.startswith(shorter) and len(longer) - len(shorter) <= _NAME_SUFFIX_SLACK:
                aliases[name] = candidate
                break
    if not aliases:
        return claims
    return [
        _CheckableClaim(
            c.claim,
            [t._replace(norm=aliases.get(t.norm, t.norm)) for t in c.tokens],
            c.negated,
        )
        for c in claims
    ]


_ACRONYM = "acr:"
"""Index entries of acronyms ("acr:us"), apart from the words of the text."""


def _align_surface_forms(
    claims: list[_CheckableClaim], indexed: Sequence[_IndexedContext]
) -> list[_CheckableClaim]:
    """The claims, with acronyms and week-day counts the contexts state otherwise resolved.

    A name the contexts lack is found when they write its acronym ("United States" for
    "U.S."), and an acronym when they spell it out; "seven days a week" is found when
    the contexts name seven days.
    """
    known = set().union(*(ctx.positions for ctx in indexed)) if indexed else set()
    weekdays: int | None = None
    aligned = []
    for checkable in claims:
        text = checkable.claim.text
        tokens = list(checkable.tokens)
        changed = False
        if any(t.key and t.norm not in known for t in tokens):
            for acronym in acronyms(text):
                entry = _ACRONYM + acronym.letters
                inside = [i for i, t in enumerate(tokens) if acronym.start <= t.start < acronym.end]
                if entry not in known or not any(
                    tokens[i].key and tokens[i].norm not in known for i in inside
                ):
                    continue
                for i in inside:
                    tokens[i] = tokens[i]._replace(norm=entry)
                changed = True
        for start, end in days_a_week(text):
            if weekdays is None:
                weekdays = weekday_count(ctx.context.text for ctx in indexed)
            kept = [t for t in tokens if not (start <= t.start < end and t.norm == str(weekdays))]
            changed = changed or len(kept) != len(tokens)
            tokens = kept
        if changed and tokens:
            checkable = _CheckableClaim(checkable.claim, tokens, checkable.negated)
        aligned.append(checkable)
    return aligned


@lru_cache(maxsize=1 << 12)
def _key_words(key: str) -> tuple[str, ...]:
    """Normalised content words of a record key ("RestaurantsTakeOut", "review_stars").

    Cached: records of one kind repeat their keys.
    """
    return tuple(t.norm for t in _tokenize(key.replace("_", " "), names=False) if _is_content(t))


def _window_has_other_key(
    alignment: _Alignment, keys: set[str], claim_tokens: list[_Token]
) -> bool:
    """Whether the window holds a number or name the claim does not have (a different value)."""
    tokens = alignment.context.tokens
    text = alignment.context.context.text
    claim_norms = {t.norm for t in claim_tokens}
    claim_has_number = any(t.number for t in claim_tokens if t.norm in keys)
    lo = max(0, alignment.first - _CONTRADICTION_MARGIN)
    hi = min(len(tokens), alignment.last + 1 + _CONTRADICTION_MARGIN)
    for token in tokens[lo:hi]:
        if token.norm in claim_norms:
            continue
        if token.number and claim_has_number:
            return True
        if (
            not token.number
            and text[token.start].isupper()
            and token.norm not in _STOP_WORDS
            and any(not t.number for t in claim_tokens if t.norm in keys - alignment.covered)
        ):
            return True
    return False


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
