"""Opening hours: a record's week against what a claim says of it."""

from __future__ import annotations

import json

import pytest

from ragpulse.evaluation import Context, RagRecord, Verdict
from ragpulse.judges._lexical_hours import Week, hours_conflict, record_week
from ragpulse.judges._lexical_record import parse_record
from ragpulse.judges.lexical import LexicalJudge

HOURS = {
    "Tuesday": "11:0-21:0",
    "Wednesday": "11:0-21:0",
    "Thursday": "11:0-21:0",
    "Friday": "11:0-22:30",
    "Saturday": "9:0-22:30",
    "Sunday": "9:0-21:0",
}
LISTING = json.dumps({"name": "Casa Verde", "hours": HOURS, "stars": 4.0}, indent=2)


def _week(text: str) -> Week | None:
    record = parse_record(text)
    return record_week(record) if record is not None else None


def _conflict(claim: str) -> str | None:
    week = _week(LISTING)
    assert week is not None
    return hours_conflict(claim, week)


def test_a_record_week_is_read_in_days_and_minutes() -> None:
    week = _week(LISTING)
    assert week is not None
    assert week[1] == (11 * 60, 21 * 60)
    assert week[4] == (11 * 60, 22 * 60 + 30)
    assert 0 not in week


def test_texts_without_a_week_have_none() -> None:
    assert _week("Open Tuesday to Sunday from 11 am.") is None
    assert _week(json.dumps({"name": "Casa Verde", "stars": 4.0})) is None
    assert _week("{not json") is None


@pytest.mark.parametrize(
    "claim",
    [
        "Casa Verde is open Tuesday through Sunday.",
        "It is closed on Mondays.",
        "From Tuesday to Thursday it is open from 11:00 AM to 9:00 PM.",
        "On Saturday it opens at 9 am.",
        "It serves lunch and dinner with weekend brunch hours that vary.",
        "Our Daily Bread is a bakery.",
        "The business operates from Tuesday to Sunday, with varying hours each day.",
        "It is open from 11 am to 9 pm most days, closing later on Fridays and Saturdays.",
    ],
)
def test_claims_that_agree_with_the_record_or_cannot_be_read_are_no_conflict(
    claim: str,
) -> None:
    assert _conflict(claim) is None


@pytest.mark.parametrize(
    ("claim", "reason"),
    [
        ("Casa Verde is open seven days a week.", "no hours on Mon"),
        ("It is open Monday through Saturday.", "no hours on Mon"),
        ("It is closed on Sundays.", "hours on Sun"),
        ("It is open every day except Friday, when it is closed.", "no hours on Mon"),
        ("From Tuesday to Sunday it is open from 11 am to 9 pm.", "other hours on Fri, Sat, Sun"),
        ("On weekends it is open from 10:00 to 22:00.", "other hours on Sat, Sun"),
    ],
)
def test_claims_that_misstate_the_week_are_conflicts(claim: str, reason: str) -> None:
    conflict = _conflict(claim)
    assert conflict is not None
    assert reason in conflict


def test_the_opening_time_takes_the_half_of_the_day_that_keeps_it_before_closing() -> None:
    assert _conflict("On Friday it is open from 11 to 10:30 pm.") is None
    assert _conflict("On Wednesday it is open from 11:00 to 9 pm.") is None


def test_the_judge_contradicts_a_claim_that_misstates_the_hours() -> None:
    record = RagRecord(
        question=None,
        contexts=(Context(LISTING),),
        answer="Casa Verde is open Tuesday to Sunday from 11 am to 9 pm. It has 4 stars.",
    )
    evaluation = LexicalJudge().evaluate_sync(record, ("faithfulness",))
    verdicts = [c.verdict for c in evaluation.claims]
    assert verdicts[0] is Verdict.CONTRADICTED
    assert "other hours on Fri, Sat, Sun" in (evaluation.claims[0].reason or "")
    assert verdicts[1] is not Verdict.CONTRADICTED
