"""Text normalisation for the lexical judge: words, numbers, dates and names as tokens.

Case, accents, light suffix stemming, stop words, numbers ("1,000" == "1000" == "one
thousand", "4.0" == "4"), clock times ("5 pm" == "17:00"), month names against numeric
dates, weekday abbreviations ("Mon" == "Monday"), unit abbreviations ("km" ==
"kilometres"), durations in any unit ("90 minutes" == "1.5 hours", "a week" == "7 days",
"twelve months" == "one year"), "a dozen" == 12, temperature scales,
and camelCase / snake_case keys of structured data. Numbers, dates, times and
capitalised names are *key* tokens: a claim's key tokens must match exactly.
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "FUNCTION_WORDS",
    "STOP_WORDS",
    "WEEKDAYS",
    "Token",
    "duration_norm",
    "is_content",
    "is_duration_unit",
    "is_month",
    "key_words",
    "tokenize",
]

_RAW_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)?")
_CAMEL_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[^\W\d_]+")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")

_FUNCTION_WORDS_TEXT = """
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
"""
# Words about the sources and the telling, not the facts: stop words too.
_SOURCE_WORDS_TEXT = """
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
_DOZEN = 12
_SCALES = {
    "dozen": _DOZEN, "hundred": 100, "thousand": 1_000, "million": 1_000_000,
    "billion": 1_000_000_000, "trillion": 1_000_000_000_000,
}  # fmt: skip
_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
# Abbreviations and spellings of one unit or day: compared in one form.
_SAME_WORD = {
    "km": "kilometer", "kilometre": "kilometer", "metre": "meter", "cm": "centimeter",
    "centimetre": "centimeter", "mm": "millimeter", "millimetre": "millimeter",
    "kg": "kilogram", "kilo": "kilogram", "lb": "pound", "lbs": "pound", "ft": "foot",
    "feet": "foot", "litre": "liter", "ml": "milliliter", "millilitre": "milliliter",
    "percent": "%", "pct": "%", "yr": "year", "yrs": "year", "celsiu": "celsius",
    "kilobyte": "kb", "megabyte": "mb", "gigabyte": "gb", "terabyte": "tb", "usd": "dollar",
    "eur": "euro", "jpy": "yen", "gram": "gram", "oz": "ounce", "mi": "mile", "inche": "inch",
    "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday",
    "thu": "thursday", "thur": "thursday", "thurs": "thursday", "fri": "friday",
    "sat": "saturday", "sun": "sunday",
}  # fmt: skip
WEEKDAYS = frozenset(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
"""Weekday names as normalised: a day is a time, never a name that can contradict one."""
# Weekday abbreviations are only read as days when capitalised ("Sun", not "the sun").
_DAY_ABBREVIATIONS = frozenset(
    ("mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun")
)
# Durations are compared in seconds: "90 minutes", "1.5 hours" and "an hour and a half"
# written as digits are one value; "24 hours" is "a day", "7 days" "a week", and a month
# is thirty days ("two months" is "60 days"). Years are counted as years (an age, "19
# years old", is a number of years), and twelve months are one ("12 months" is "a year").
_DAY_SECONDS = 86_400
_DURATION_SECONDS = {
    "second": 1, "sec": 1, "secs": 1, "minute": 60, "min": 60, "mins": 60, "hour": 3_600,
    "hr": 3_600, "hrs": 3_600, "day": _DAY_SECONDS, "week": 7 * _DAY_SECONDS,
    "month": 30 * _DAY_SECONDS,
}  # fmt: skip
_YEAR = "year"
_MONTHS_A_YEAR = 12
# A period named by one of these and no number ("for one day", "within an hour") is one
# unit long.
_ONE = frozenset({"one", "a", "an"})
# ... only after a word that measures time ("within a week", "for an hour", "a one-minute
# timeout"), not in a rate ("600 requests a minute", "twice a day") or an idiom ("one day
# she left").
_PERIOD_BEFORE = frozenset(
    {"for", "within", "in", "after", "over", "under", "than", "about", "least", "last",
     "past", "next", "another", "a", "the"}
)  # fmt: skip


class Token(NamedTuple):
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
    if not math.isfinite(value):
        return repr(value)  # a product past a float's range ("inf")
    return str(int(value)) if value == int(value) else repr(value)


def _numeric_parts(raw: str) -> list[str]:
    if _THOUSANDS.fullmatch(raw):
        raw = raw.replace(",", "")
    parts: list[str] = []
    for chunk in re.split(r"[,:]", raw):
        if not chunk:
            continue
        try:
            value = float(chunk)
        except ValueError:
            parts.append(chunk)
            continue
        # Past a float's range, a number is compared as written.
        parts.append(_number_text(value) if math.isfinite(value) else chunk)
    return parts


def tokenize(text: str, *, names: bool) -> list[Token]:
    """Normalised tokens with their offsets in ``text``.

    With ``names``, capitalised words (not at a sentence start) are key tokens.
    """
    tokens: list[Token] = []
    append = tokens.append
    sentence_start = True
    # Sentence boundaries, found once: a word starts a sentence when one lies between it
    # and the word before.
    boundaries = [m.start() for m in _BOUNDARY.finditer(text)] if names else []
    boundary, last_boundary = 0, len(boundaries)
    prev_end = 0
    for match in _RAW_TOKEN.finditer(text):
        raw = match.group()
        start, end = match.span()
        if names:
            while boundary < last_boundary and boundaries[boundary] < prev_end:
                boundary += 1
            if not tokens or (boundary < last_boundary and boundaries[boundary] < start):
                sentence_start = True
        prev_end = end
        if raw in _DEGREE_SCALES and start > 0 and text[start - 1] == "°":
            # "79°F" is "79 degrees Fahrenheit".
            append(_new(Token, (_DEGREE_SCALES[raw], start, end, False, False)))
            sentence_start = False
            continue
        if not raw[0].isdecimal():  # "²" and "①" are digits, not decimals: read as words
            forms = _word_forms(raw)
            if forms is not None:
                if len(forms) == 1:
                    norm, may_be_name = forms[0]
                    if not (
                        tokens
                        and norm in _DURATION_WORDS
                        and _as_duration(tokens, forms, text, start)
                    ):
                        key = names and may_be_name and not sentence_start
                        append(_new(Token, (norm, start, end, key, False)))
                else:
                    for norm, may_be_name in forms:
                        key = names and may_be_name and not sentence_start
                        append(_new(Token, (norm, start, end, key, False)))
                sentence_start = False
                continue
        else:
            sentence_start = False
            if len(raw) < 16 and raw.isdecimal():
                # A plain integer that a float holds exactly (most numbers): the text
                # _numeric_parts would give it, without its work.
                append(_new(Token, (str(int(raw)), start, end, True, True)))
                continue
            for part in _numeric_parts(raw):
                append(_new(Token, (part, start, end, True, True)))
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
            norm = hour_token.norm
            hour = int(norm) if len(norm) <= 2 and norm.isdecimal() else -1
            if 0 <= hour <= 12 and tokens[-1].end >= start - 2:
                hour = (hour % 12) + (12 if lower.startswith("p") else 0)
                tokens[first] = Token(str(hour), hour_token.start, hour_token.end, True, True)
                continue
        if lower in ("noon", "midday"):
            tokens.append(Token("12", start, end, True, True))
            continue
        if lower == "midnight":
            tokens.append(Token("0", start, end, True, True))
            continue
        if lower == "dozen" and tokens and tokens[-1].norm in _ONE:
            # "a dozen" is 12.
            last = tokens[-1]
            tokens[-1] = Token(str(_DOZEN), last.start, end, True, True)
            continue
        if lower in _SCALES and tokens and tokens[-1].number:
            last = tokens[-1]
            try:
                value = float(last.norm) * _SCALES[lower]
            except ValueError:
                value = math.inf
            if math.isfinite(value):  # else not a number, or past a float's range
                tokens[-1] = Token(_number_text(value), last.start, end, True, True)
                continue
        if lower in _UNITS:
            value_u = _UNITS[lower]
            last_t = tokens[-1] if tokens else None
            if _DETERMINER_BEFORE.search(text, max(0, start - 8), start):
                # "the two countries", "both of its three": a count the sentence refers
                # back to, not a new fact.
                tokens.append(Token(str(value_u), start, end, False, False))
                sentence_start = False
                continue
            if (
                last_t is not None
                and last_t.number
                and last_t.norm in ("20", "30", "40", "50", "60", "70", "80", "90")
            ):
                tokens[-1] = Token(str(int(last_t.norm) + value_u), last_t.start, end, True, True)
            else:
                tokens.append(Token(str(value_u), start, end, True, True))
            sentence_start = False
            continue
        if lower in _MONTHS and (raw[0].isupper() or lower != "may"):
            tokens.append(Token(str(_MONTHS[lower]), start, end, True, True))
        else:
            # "may" the verb, a lone "pm" or "million": an ordinary word here.
            append(_new(Token, (_stem(lower), start, end, False, False)))
        sentence_start = False
    return tokens


def is_duration_unit(word: str) -> bool:
    """Whether a normalised word is a unit of time a duration is compared in."""
    return word in _DURATION_SECONDS


def is_month(word: str) -> bool:
    """Whether ``word`` (as written) names a month, which the tokenizer reads as a number."""
    return word.lower() in _MONTHS


def duration_norm(value: float, unit: str) -> str:
    """The normalised form of a duration of ``value`` ``unit`` (a stemmed unit word)."""
    return _number_text(value * _DURATION_SECONDS[unit]) + "s"


def _as_duration(
    tokens: list[Token], forms: tuple[tuple[str, bool], ...], text: str, start: int
) -> bool:
    """Turn "90" before "minutes" into one duration token; whether it did.

    A count of years stays a number before the word "year" ("twelve months" gives "1"
    and "year", as "one year" does), and so does the count in "the two weeks" (a count
    the sentence refers back to: not a key token, but the same value).
    """
    if len(forms) != 1 or not tokens:
        return False
    unit = forms[0][0]
    if (unit not in _DURATION_SECONDS and unit != _YEAR) or not _JOINED.fullmatch(
        text, tokens[-1].end, start
    ):
        return False
    last = tokens[-1]
    if last.norm in _ONE:
        # "one year", "within a week": one unit, unless "a" starts a rate.
        if len(tokens) < 2 or tokens[-2].norm not in _PERIOD_BEFORE:
            return False
        value, key = 1.0, True
    else:
        if len(tokens) > 1 and tokens[-2].start == last.start:
            return False  # a clock time or a date, not a count
        try:
            value = float(last.norm)
        except ValueError:
            return False
        if not math.isfinite(value):
            return False  # past a float's range: the number stays as written
        key = last.number
    if unit == "month" and value and value % _MONTHS_A_YEAR == 0:
        value, unit = value / _MONTHS_A_YEAR, _YEAR
    if unit == _YEAR:
        tokens[-1] = Token(_number_text(value), last.start, last.end, key, key)
        word = _RAW_TOKEN.match(text, start)
        tokens.append(Token(_YEAR, start, start if word is None else word.end(), False, False))
        return True
    tokens[-1] = Token(duration_norm(value, unit), last.start, last.end, key, key)
    return True


# The words a duration ends with (``_as_duration`` reads nothing else).
_DURATION_WORDS = frozenset({*_DURATION_SECONDS, _YEAR})
# A token made without ``Token.__new__``'s Python frame: tokenize makes one per word.
_new = tuple.__new__

_JOINED = re.compile(r"[\s-]{0,2}")
_BOUNDARY = re.compile(r"[.!?\n:]")
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
            and part_lower not in STOP_WORDS
            and part_lower not in _TITLES
            and part_lower not in _UNIT_NAMES
            and len(part) > 1
        )
        if part_lower in _DAY_ABBREVIATIONS and not part[0].isupper():
            forms.append((part_lower, False))
            continue
        stem = _stem(part_lower)
        forms.append((_SAME_WORD.get(part_lower, _SAME_WORD.get(stem, stem)), may_be_name))
    return tuple(forms)


# Stop words are compared after stemming, so their stems are stop words too.
FUNCTION_WORDS = frozenset(
    form for word in _FUNCTION_WORDS_TEXT.split() for form in (word, _stem(word))
)
"""The grammatical stop words (no word about the sources, such as "data" or "text")."""
STOP_WORDS = FUNCTION_WORDS | frozenset(
    form for word in _SOURCE_WORDS_TEXT.split() for form in (word, _stem(word))
)


def is_content(token: Token) -> bool:
    return token.key or (token.norm not in STOP_WORDS and token.norm != "not")


@lru_cache(maxsize=1 << 12)
def key_words(key: str) -> tuple[str, ...]:
    """Normalised content words of a record key ("MaxRetryCount", "shipping_days").

    Cached: records of one kind repeat their keys.
    """
    return tuple(t.norm for t in tokenize(key.replace("_", " "), names=False) if is_content(t))
