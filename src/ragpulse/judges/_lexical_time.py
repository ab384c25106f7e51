"""Weekdays and times of day: a context's weekly schedule against what a claim says of it.

A context may state a weekly schedule as data (any structured fact whose key or row is
a weekday: ``"Monday": "8:00-18:00"``, ``Monday: 09:00–17:00``, ``| Mon | 9am-5pm |``,
``"Sunday": "closed"``); answers restate it in words ("open seven days a week from 7 am
to 10 pm", "Tuesday through Sunday", "closed on Mondays"). Word overlap cannot tell
those apart from a wrong restatement, since every day name and most hours occur
somewhere in the context, so both sides are read into days and minutes:

- a day the claim has open, where the schedule has no hours (or says closed);
- a day the claim has closed, where the schedule has hours;
- a claim that gives one time range for its days, where the schedule's hours on one
  of those days are different (claims that qualify their hours, "with extended hours
  on weekends", are only checked for their days).

Clock times are parsed with ``dateutil`` in any form people write ("9:00", "09.00",
"9am", "5.30 pm", "17h"), plus "noon" and "midnight". It is deliberately conservative:
a claim or value it cannot read is no conflict.
"""

from __future__ import annotations

import calendar
import datetime
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from dateutil import parser as date_parser

from ragpulse.judges._lexical_structured import Fact

__all__ = [
    "Schedule",
    "ScheduleConflict",
    "days_a_week",
    "parse_clock",
    "parse_hours",
    "read_schedule",
    "schedule_conflict",
    "weekday",
    "weekdays_named",
]

_FULL = tuple(name.lower() for name in calendar.day_name)  # English in every locale Python ships
_DAY_PREFIX = tuple(name[:3] for name in _FULL)
_DAY = (
    r"(?:(?i:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?|"
    r"(?:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)\b\.?)"
)
_DAY_WORD = re.compile(rf"\b({_DAY})")
_RANGE = re.compile(rf"\b({_DAY})\s*(?i:to|through|thru|till|until|-|–|—)\s*({_DAY})")
# "daily" only in lower case: "Our Daily Bread" is a name.
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
_CLOCK = r"(?:\d{1,2}(?:[:.h]\d{1,2})?\s*(?:[ap]\.?m\.?)?|noon|midnight)"
_TIME_RANGE = re.compile(
    rf"(?<![\d:])({_CLOCK})\s*(?:to|until|till|-|–|—)\s*({_CLOCK})(?![\d:])", re.IGNORECASE
)
_MERIDIEM = re.compile(r"([ap])\.?m\.?$", re.IGNORECASE)
_QUALIFIED = re.compile(
    r"\b(?:extended|vary|varies|varying|different|differ|later|earlier|except|until|"
    r"otherwise|and from|while|most|early|closures?)\b",
    re.IGNORECASE,
)
_CLOSED_VALUE = re.compile(r"^\s*(?:closed|shut|none|no hours)\s*$", re.IGNORECASE)
_ALL_DAY_VALUE = re.compile(r"\b(?:24 ?h(?:ours|rs)?|24/7|all day|open 24)\b", re.IGNORECASE)
_DAYS_A_WEEK = re.compile(r"\b(\w+)\s+days\s+(?:a|per|each|every)\s+week\b", re.IGNORECASE)
_MINUTES_A_DAY = 24 * 60
_ALL_DAY = (0, _MINUTES_A_DAY)
_DEFAULT_DAY = datetime.datetime(2000, 1, 1)


@dataclass(frozen=True, slots=True)
class DayHours:
    """One day of a schedule: its hours (None when closed) and where the context says so."""

    hours: tuple[int, int] | None
    start: int
    end: int


Schedule = dict[int, DayHours]
"""Day of the week (0 = Monday) to its hours; a day absent has no hours in the context."""


@dataclass(frozen=True, slots=True)
class ScheduleConflict:
    """Why a claim disagrees with a schedule, and the days of the schedule that show it."""

    reason: str
    days: tuple[int, ...]


def weekday(word: str) -> int | None:
    """The day of the week (0 = Monday) a word names ("Mon", "tuesdays"), or None."""
    prefix = word.strip().lower()[:3]
    return _DAY_PREFIX.index(prefix) if prefix in _DAY_PREFIX and word[:1].isalpha() else None


def _day_of(word: str) -> int | None:
    lowered = word.strip().lower().rstrip(".")
    if lowered.endswith("s") and lowered[:-1] in _FULL:
        lowered = lowered[:-1]
    if lowered in _FULL or lowered in ("mon", "tue", "tues", "wed", "thu", "thur", "thurs"):
        return weekday(lowered)
    if lowered in ("fri", "sat", "sun"):
        return weekday(lowered)
    return None


@lru_cache(maxsize=4096)
def parse_clock(text: str, meridiem: str | None = None) -> int | None:
    """Minutes after midnight of a clock time as people write it, or None.

    A bare hour without minutes or am/pm ("from 5 to 7") is too ambiguous to read,
    unless ``meridiem`` ("a" or "p", from the other end of a range) says which half.
    """
    lowered = text.strip().lower()
    if lowered == "noon":
        return 12 * 60
    if lowered == "midnight":
        return 0
    own = _MERIDIEM.search(lowered)
    digits = _MERIDIEM.sub("", lowered).strip().replace(".", ":").replace("h", ":")
    explicit = ":" in digits  # "9:00", "9.00", "17h": a clock time, not a bare number
    digits = digits.rstrip(":")
    if not digits or not digits.replace(":", "").isdigit():
        return None
    if own is None and not explicit and meridiem is None:
        return None
    half = own.group(1) if own is not None else meridiem
    hour_text, _, minute_text = digits.partition(":")
    if int(hour_text) > 24 or (minute_text and int(minute_text) > 59):
        return None
    if int(hour_text) == 24:
        return 0
    # dateutil reads the clock in every separator and case; the half of the day is ours.
    clock = f"{hour_text}:{minute_text or '0'}" + (
        f" {half}m" if half and int(hour_text) <= 12 else ""
    )
    try:
        parsed = date_parser.parse(clock, default=_DEFAULT_DAY)
    except (ValueError, OverflowError):
        return None
    return parsed.hour * 60 + parsed.minute


def _ranges(text: str) -> list[tuple[int, int]]:
    ranges = []
    for match in _TIME_RANGE.finditer(text):
        closing_half = _MERIDIEM.search(match.group(2).strip())
        hint = closing_half.group(1).lower() if closing_half is not None else None
        closing = parse_clock(match.group(2))
        opening = parse_clock(match.group(1))
        if opening is None and hint is not None:
            # "5:30 to 9:30 pm": the opening takes the closing's half of the day unless
            # that would open after closing ("11 to 9 pm" opens at 11 am).
            opening = parse_clock(match.group(1), hint)
            if opening is not None and closing is not None and opening > closing:
                opening = parse_clock(match.group(1), "a" if hint == "p" else "p")
        if closing is None and opening is not None:
            opening_half = _MERIDIEM.search(match.group(1).strip())
            if opening_half is not None:
                closing = parse_clock(match.group(2), opening_half.group(1).lower())
        if opening is not None and closing is not None:
            ranges.append((opening, closing))
    return ranges


def parse_hours(value: str) -> tuple[int, int] | bool | None:
    """A schedule value: (opening, closing) minutes, None when closed, False when unreadable.

    Equal opening and closing ("00:00-00:00", "00:00-24:00") and "24 hours" mean open all day.
    """
    if _CLOSED_VALUE.match(value):
        return None
    if _ALL_DAY_VALUE.search(value):
        return _ALL_DAY
    ranges = _ranges(value)
    if len(ranges) != 1:
        return False
    opening, closing = ranges[0]
    return _ALL_DAY if opening == closing else (opening, closing)


def read_schedule(facts: Sequence[Fact]) -> Schedule | None:
    """The weekly schedule among a context's facts, or None when it has none.

    A schedule is two or more facts whose key (or table row) is a weekday and whose
    value reads as hours or as closed.
    """
    schedule: Schedule = {}
    for fact in facts:
        if not isinstance(fact.value, str) and fact.value is not False:
            continue
        day = _day_of(fact.key)
        if day is None and fact.path:
            day = _day_of(fact.path[0])
        if day is None or day in schedule:
            continue
        hours = None if fact.value is False else parse_hours(str(fact.value))
        if hours is False:
            continue
        schedule[day] = DayHours(hours if isinstance(hours, tuple) else None, fact.start, fact.end)
    return schedule if len(schedule) >= 2 else None


def weekdays_named(texts: Iterable[str]) -> int:
    """How many distinct days of the week the texts name."""
    return len({_day_of(m.group(1)) for text in texts for m in _DAY_WORD.finditer(text)} - {None})


def days_a_week(text: str) -> Iterator[tuple[int, int]]:
    """Character ranges of the numbers in "N days a week" phrases."""
    for match in _DAYS_A_WEEK.finditer(text):
        yield match.span(1)


def _days_between(first: str, last: str) -> set[int]:
    start, end = _day_of(first), _day_of(last)
    if start is None or end is None:
        return set()
    return {(start + i) % 7 for i in range((end - start) % 7 + 1)}


def _claimed_days(claim: str) -> tuple[set[int], set[int]]:
    """Days the claim has open, and days it has closed."""
    closed: set[int] = set()
    for match in _CLOSED.finditer(claim):
        words = next(g for g in match.groups() if g)
        closed.update(d for w in _DAY_WORD.findall(words) if (d := _day_of(w)) is not None)
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
        day = _day_of(word)
        if day is not None and word not in closed_text:
            opened.add(day)
    return opened - closed, closed


def _say(days: Iterable[int]) -> str:
    return ", ".join(calendar.day_name[d] for d in sorted(days))


def schedule_conflict(claim: str, schedule: Schedule) -> ScheduleConflict | None:
    """Why ``claim`` disagrees with ``schedule``, or None when it does not."""
    if not any(p.search(claim) for p in (_DAY_WORD, _EVERY_DAY, _WEEKDAYS, _WEEKENDS)):
        return None
    opened, closed = _claimed_days(claim)
    open_days = {d for d, h in schedule.items() if h.hours is not None}
    shut = {d for d in opened if d not in open_days}
    if shut:
        stated = tuple(sorted(d for d in shut if d in schedule)) or tuple(sorted(schedule))
        return ScheduleConflict(f"the context has no hours on {_say(shut)}", stated)
    contrary = {d for d in closed if d in open_days}
    if contrary:
        return ScheduleConflict(
            f"the context has hours on {_say(contrary)}", tuple(sorted(contrary))
        )
    ranges = _ranges(claim)
    if len(ranges) != 1 or _QUALIFIED.search(claim) or not opened:
        return None
    claimed = ranges[0]
    differing = {
        d for d in opened if (h := schedule[d].hours) is not None and h not in (claimed, _ALL_DAY)
    }
    if differing:
        return ScheduleConflict(
            f"the context has other hours on {_say(differing)}", tuple(sorted(differing))
        )
    return None
