"""Opening hours: a record's week against what a claim says of it.

A JSON record context often carries opening hours as an object keyed by the days of
the week (``"hours": {"Monday": "7:0-22:0", ...}``); answers restate them in words
("open seven days a week from 7 am to 10 pm", "Tuesday through Sunday", "closed on
Mondays"). Word overlap cannot tell those apart from a wrong restatement, since every
day name and most hours occur somewhere in the record. This module reads both sides
into days and minutes and says where a claim disagrees with the record:

- a day the claim has the business open, with no hours in the record;
- a day the claim has it closed, with hours in the record;
- a claim that gives one time range for its days, where the record's hours on one of
  those days are different (claims that qualify their hours, "with extended hours on
  weekends", are only checked for their days).

It is deliberately conservative: a claim it cannot read is no conflict. The same
reading of day names counts the days plain-text contexts name, against which "open
seven days a week" is checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["Week", "days_a_week", "hours_conflict", "record_week", "weekdays_named"]

Week = Mapping[int, tuple[int, int] | None]
"""Day of the week (0 = Monday) to opening and closing minute, None where unreadable."""

_DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# Full names in any case; the short forms only capitalised ("Sun", not the "sun").
_DAY = (
    r"(?:(?i:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?|"
    r"(?:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)\b\.?)"
)
_DAY_WORD = re.compile(rf"\b({_DAY})")
_RANGE = re.compile(rf"\b({_DAY})\s*(?i:to|through|thru|till|until|-|–|—)\s*({_DAY})")
# "daily" only in lower case: "Our Daily Bread" is a name. "each day" is left out: "with
# varying hours each day" speaks of the days just named.
_EVERY_DAY = re.compile(
    r"\b(?:(?i:every ?day|seven days|7 days|all week|every day of the week)|daily)\b"
)
_WEEKDAYS = re.compile(r"\bweekdays\b", re.IGNORECASE)
_WEEKENDS = re.compile(r"\bweekends?\b", re.IGNORECASE)
_CLOSED = re.compile(
    rf"\b(?i:closed) (?i:on |every |all )?((?:{_DAY}(?:,\s*|\s+and\s+|\s+)?)+)|"
    rf"\b((?:{_DAY}(?:,\s*|\s+and\s+)?)+) (?i:being|is|are) (?i:closed)\b|"
    rf"\b((?:{_DAY}(?:,\s*|\s+and\s+)?)+) (?i:when) (?i:it |they )?(?i:is |are )?(?i:closed)\b"
)
_TIME = r"(?:\d{1,2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?|noon|midnight)"
_TIME_RANGE = re.compile(
    rf"(?<![\d:])({_TIME})\s*(?:to|until|till|-|–|—)\s*({_TIME})(?![\d:])", re.IGNORECASE
)
_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2}))?\s*([ap])?", re.IGNORECASE)
# Words by which a claim says its hours differ on some days.
_QUALIFIED = re.compile(
    r"\b(?:extended|vary|varies|varying|different|differ|later|earlier|except|until|"
    r"otherwise|and from|while|most|early|closures?)\b",
    re.IGNORECASE,
)
_RECORD_HOURS = re.compile(r"(\d{1,2}):(\d{1,2})\s*-\s*(\d{1,2}):(\d{1,2})")
_MINUTES_A_DAY = 24 * 60
_DAYS_A_WEEK = re.compile(r"\b(\w+)\s+days\s+(?:a|per|each|every)\s+week\b", re.IGNORECASE)


def _day_index(word: str) -> int | None:
    prefix = word.lower()[:3]
    return _DAY_NAMES.index(prefix) if prefix in _DAY_NAMES else None


def _walk(obj: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    if depth > 6:
        return
    if isinstance(obj, dict):
        yield obj
        for value in obj.values():
            yield from _walk(value, depth + 1)
    elif isinstance(obj, list):
        for item in obj:
            yield from _walk(item, depth + 1)


def weekdays_named(texts: Iterable[str]) -> int:
    """How many distinct days of the week the texts name."""
    return len({_day_index(m.group(1)) for text in texts for m in _DAY_WORD.finditer(text)})


def days_a_week(text: str) -> Iterator[tuple[int, int]]:
    """Character ranges of the numbers in "N days a week" phrases."""
    for match in _DAYS_A_WEEK.finditer(text):
        yield match.span(1)


def record_week(record: dict[str, Any]) -> Week | None:
    """The opening hours of a parsed JSON record, or None when it has none.

    They are the first object, at any depth, whose keys are all days of the week.
    """
    for candidate in _walk(record):
        days = {_day_index(str(k)): v for k, v in candidate.items()}
        if len(days) < 2 or None in days:
            continue
        week: dict[int, tuple[int, int] | None] = {}
        for day, value in ((d, v) for d, v in days.items() if d is not None):
            match = _RECORD_HOURS.fullmatch(str(value).strip()) if value is not None else None
            if match is None:
                week[day] = None
                continue
            h1, m1, h2, m2 = (int(g) for g in match.groups())
            opening, closing = (h1 * 60 + m1) % _MINUTES_A_DAY, (h2 * 60 + m2) % _MINUTES_A_DAY
            # "0:0-0:0" is how listings write "open all day" as often as "unknown".
            week[day] = None if opening == closing else (opening, closing)
        return week
    return None


def _clock(text: str, meridiem_hint: str | None) -> int | None:
    lowered = text.lower().replace(".", "")
    if lowered == "noon":
        return 12 * 60
    if lowered == "midnight":
        return 0
    match = _CLOCK.match(lowered)
    if match is None:
        return None
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    meridiem = match.group(3) or meridiem_hint
    if hour > 24 or minute > 59:
        return None
    if meridiem is not None and hour <= 12:
        hour = hour % 12 + (12 if meridiem == "p" else 0)
    elif meridiem is None and not match.group(2):
        return None  # a bare number ("from 5 to 7") is too ambiguous to compare
    return (hour * 60 + minute) % _MINUTES_A_DAY


def _time_ranges(claim: str) -> list[tuple[int, int]]:
    ranges = []
    for match in _TIME_RANGE.finditer(claim):
        closing_meridiem = _CLOCK.match(match.group(2).lower().replace(".", ""))
        hint = closing_meridiem.group(3) if closing_meridiem is not None else None
        closing = _clock(match.group(2), hint)
        opening = _clock(match.group(1), None)
        if opening is None and hint is not None:
            # "5:30 to 9:30 pm": the opening takes the closing's half of the day unless
            # that would open after closing ("11 to 9 pm" opens at 11 am).
            opening = _clock(match.group(1), hint)
            other = _clock(match.group(1), "a" if hint == "p" else "p")
            if opening is not None and closing is not None and opening > closing:
                opening = other
        if opening is not None and closing is not None:
            ranges.append((opening, closing))
    return ranges


def _days_between(first: str, last: str) -> set[int]:
    start, end = _day_index(first), _day_index(last)
    if start is None or end is None:
        return set()
    return {(start + i) % 7 for i in range((end - start) % 7 + 1)}


def _claimed_days(claim: str) -> tuple[set[int], set[int]]:
    """Days the claim has the business open, and days it has it closed."""
    closed: set[int] = set()
    for match in _CLOSED.finditer(claim):
        words = next(g for g in match.groups() if g)
        closed.update(d for w in _DAY_WORD.findall(words) if (d := _day_index(w)) is not None)
    opened: set[int] = set()
    rest = claim
    for match in _RANGE.finditer(claim):
        opened |= _days_between(match.group(1), match.group(2))
        rest = rest.replace(match.group(0), " ")
    if _EVERY_DAY.search(claim):
        opened |= set(range(7))
    if _WEEKDAYS.search(claim):
        opened |= set(range(5))
    if _WEEKENDS.search(claim):
        opened |= {5, 6}
    closed_text = " ".join(m.group(0) for m in _CLOSED.finditer(rest))
    for word in _DAY_WORD.findall(rest):
        day = _day_index(word)
        if day is not None and word not in closed_text:
            opened.add(day)
    return opened - closed, closed


def _say(days: set[int]) -> str:
    return ", ".join(_DAY_NAMES[d].capitalize() for d in sorted(days))


def hours_conflict(claim: str, week: Week) -> str | None:
    """Why ``claim`` disagrees with the record's ``week``, or None when it does not."""
    if not any(p.search(claim) for p in (_DAY_WORD, _EVERY_DAY, _WEEKDAYS, _WEEKENDS)):
        return None
    opened, closed = _claimed_days(claim)
    missing = {d for d in opened if d not in week}
    if missing:
        return f"the record has no hours on {_say(missing)}"
    contrary = {d for d in closed if week.get(d) is not None}
    if contrary:
        return f"the record has hours on {_say(contrary)}"
    ranges = _time_ranges(claim)
    if len(ranges) != 1 or _QUALIFIED.search(claim) or not opened:
        return None
    claimed = ranges[0]
    differing = {d for d in opened if (hours := week.get(d)) is not None and hours != claimed}
    if differing:
        return f"the record has other hours on {_say(differing)}"
    return None
