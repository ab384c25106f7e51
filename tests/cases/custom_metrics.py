"""The user's own metrics, in an importable module, as a user would write them."""

from __future__ import annotations

import ragpulse


@ragpulse.metric("shouting")
def shouting(record: ragpulse.RagRecord) -> float | ragpulse.MetricResult | None:
    """Share of the answer's letters that are not capitals (1.0: no shouting)."""
    letters = [c for c in record.answer or "" if c.isalpha()]
    if not letters:
        return None
    capitals = sum(1 for c in letters if c.isupper())
    score = 1.0 - capitals / len(letters)
    return ragpulse.MetricResult("shouting", score, f"{capitals} of {len(letters)} capitals")


@ragpulse.metric("broken")
def broken(record: ragpulse.RagRecord) -> float:
    """A metric with a bug: it raises on every record."""
    raise KeyError("sources")


@ragpulse.metric("too_big", threshold=None)
def too_big(record: ragpulse.RagRecord) -> float:
    """A metric that returns a value outside [0, 1]."""
    return float(len(record.answer or ""))
