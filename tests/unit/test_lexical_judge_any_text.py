"""The offline judge judges any text: no input makes it fail with an exception of its own.

Records are built from a seeded random mix of the pieces its tokenizer treats specially
(numbers past a float's range, Unicode digits that are not decimals, characters whose
lower case is longer, clock words, units, durations, months, structured data...). Each
record must come back judged (``ok`` or ``no_claims``), with every evidence span cut from
its context. The seeds are fixed, so a failure names a record that can be replayed.
"""

from __future__ import annotations

import json
import random

from ragpulse.evaluation import Context, EvalStatus, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge

RECORDS = 1500
_PIECES = (
    "9" * 400, "9" * 5000, "9" * 305, "1,000", "1,000,000.5", "5:30", "12:00:00", "3.", ".5",
    "0", "007", "٣", "²", "½", "①", "pm", "am", "a.m", "p.m", "noon", "midnight", "dozen", "a",
    "an", "one", "twelve", "months", "year", "minutes", "hours", "weeks", "thousand", "trillion",
    "°F", "°", "F", "C", "May", "may", "Jan", "Sun", "The", "not", "never", "can't", "Eiffel",
    "Tower's", "TVs", "camelCase", "snake_case", "—", "-", "'", "’", ".", "!", "?", "\n", ":",
    ",", "(", ")", "[1]", "{", "}", '"', "Sources:", "According", "to", "the", "passage", "all",
    "only", "first", "e.g.", "U.S.", "Dr.", "No.", "$", "%", "€", "1e309", "inf", "nan", "Ⅻ",
    "ß", "İ", "ẞ", "ﬁ", "\u0301", "\u200b", "\x00", "🙂", "twenty-five", "90", "1.5", "days",
    "within", "for", "than", "the two", "yes", "no", "true", "null",
)  # fmt: skip


def _text(rng: random.Random, words: int) -> str:
    glue = " " if rng.random() < 0.7 else ""
    return glue.join(rng.choice(_PIECES) for _ in range(words))


def _context(rng: random.Random) -> str:
    if rng.random() < 0.2:
        value = rng.choice([True, False, None, 1e308, 10**30, _text(rng, 3)])
        return json.dumps({_text(rng, 2): _text(rng, 3), "wait_minutes": value})
    return _text(rng, rng.randint(0, 60))


def _record(seed: int) -> RagRecord:
    rng = random.Random(seed)
    return RagRecord(
        question=_text(rng, rng.randint(0, 10)) or None,
        contexts=tuple(Context(_context(rng)) for _ in range(rng.randint(0, 3))),
        answer=_text(rng, rng.randint(0, 40)),
        reference=_text(rng, rng.randint(0, 20)) if rng.random() < 0.5 else None,
    )


def test_no_text_makes_the_judge_fail() -> None:
    judge = LexicalJudge()
    failed = []
    for seed in range(RECORDS):
        record = _record(seed)
        evaluation = judge.evaluate_sync(record)
        if evaluation.status not in (EvalStatus.OK, EvalStatus.NO_CLAIMS):
            failed.append((seed, evaluation.error_type, evaluation.explanation))
            continue
        for claim in evaluation.claims:
            evidence = claim.evidence
            if evidence is not None:
                text = record.contexts[evidence.context_index].text
                assert text[evidence.start : evidence.end] == evidence.text, seed
    assert not failed, f"{len(failed)} of {RECORDS} records failed; first: {failed[:3]}"
