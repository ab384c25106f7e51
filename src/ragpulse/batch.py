"""Batch evaluation: JSONL records in, one JSONL result per record out, and a summary.

This is the engine behind ``ragpulse eval``; the CLI only parses arguments and
prints. Input lines hold ``id``, ``question``, ``contexts`` (``context`` is accepted
as an alias), ``answer`` and an optional ``reference``. Output lines have exactly
the keys ``id``, ``status``, ``scores``, ``claims``, ``judge`` and ``error_type``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragpulse.evaluation.types import (
    ALL_METRICS,
    ClaimVerdict,
    Context,
    Evaluation,
    RagRecord,
)
from ragpulse.judges.base import Judge

__all__ = [
    "BadLine",
    "BatchSummary",
    "InputRecord",
    "MetricSummary",
    "evaluate_records",
    "evaluation_to_json",
    "parse_fail_under",
    "read_lines",
    "read_records",
    "record_from_json",
    "summarize",
]


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One valid input line."""

    line: int
    id: str
    record: RagRecord


@dataclass(frozen=True, slots=True)
class BadLine:
    """An input line that could not be read, and why."""

    line: int
    reason: str


def _text_list(value: object, key: str) -> tuple[Context, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (Context(value),)
    if not isinstance(value, list):
        raise ValueError(f"'{key}' must be a list of strings")
    contexts = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            contexts.append(Context(item))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            item_id = item.get("id")
            contexts.append(Context(item["text"], None if item_id is None else str(item_id)))
        else:
            raise ValueError(f"'{key}[{i}]' must be a string")
    return tuple(contexts)


def _optional_text(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"'{key}' must be a string or null")


def record_from_json(obj: object, line: int) -> InputRecord:
    """Validate one decoded input line; raises ``ValueError`` saying what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("a line must be a JSON object")
    if "answer" not in obj:
        raise ValueError("missing 'answer'")
    if "contexts" in obj:
        contexts = _text_list(obj["contexts"], "contexts")
    elif "context" in obj:
        contexts = _text_list(obj["context"], "context")
    else:
        raise ValueError("missing 'contexts' (or 'context')")
    raw_id = obj.get("id")
    record_id = str(line) if raw_id is None else str(raw_id)
    record = RagRecord(
        question=_optional_text(obj, "question"),
        contexts=contexts,
        answer=_optional_text(obj, "answer"),
        reference=_optional_text(obj, "reference"),
    )
    return InputRecord(line, record_id, record)


def read_records(lines: Iterable[str]) -> Iterator[InputRecord | BadLine]:
    """Each non-blank line as an ``InputRecord``, or a ``BadLine`` with its line number."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            yield record_from_json(json.loads(text), number)
        except json.JSONDecodeError as exc:
            yield BadLine(number, f"not valid JSON: {exc.msg} (column {exc.colno})")
        except ValueError as exc:
            yield BadLine(number, str(exc))


def _claim_to_json(verdict: ClaimVerdict) -> dict[str, Any]:
    evidence = verdict.evidence
    return {
        "text": verdict.claim.text,
        "answer_start": verdict.claim.answer_start,
        "answer_end": verdict.claim.answer_end,
        "verdict": verdict.verdict.value,
        "evidence": None
        if evidence is None
        else {
            "context_index": evidence.context_index,
            "start": evidence.start,
            "end": evidence.end,
            "text": evidence.text,
        },
    }


def evaluation_to_json(record_id: str, evaluation: Evaluation) -> dict[str, Any]:
    """The output line for one evaluation (the keys other tools read)."""
    return {
        "id": record_id,
        "status": evaluation.status.value,
        "scores": {metric: evaluation.score(metric) for metric in ALL_METRICS},
        "claims": [_claim_to_json(c) for c in evaluation.claims],
        "judge": evaluation.judge,
        "error_type": evaluation.error_type,
    }


async def _evaluate_safely(judge: Judge, record: RagRecord, metrics: Sequence[str]) -> Evaluation:
    # The Judge protocol says evaluate never raises; a third-party judge might anyway,
    # and one bad record must not end the batch.
    try:
        return await judge.evaluate(record, metrics)
    except Exception as exc:
        return Evaluation.failed(
            type(exc).__name__,
            judge=getattr(judge, "name", type(judge).__name__),
            annotator_kind=getattr(judge, "annotator_kind", "CODE"),
            explanation=str(exc)[:500],
        )


async def evaluate_records(
    records: Sequence[InputRecord],
    judge: Judge,
    metrics: Sequence[str],
    *,
    concurrency: int = 4,
    on_done: Callable[[InputRecord, Evaluation], None] | None = None,
) -> list[Evaluation]:
    """Evaluate every record with at most ``concurrency`` evaluations in flight.

    Results come back in input order; ``on_done`` is called as each one finishes
    (for a progress bar).
    """
    semaphore = asyncio.Semaphore(max(1, concurrency))

    async def one(item: InputRecord) -> Evaluation:
        async with semaphore:
            evaluation = await _evaluate_safely(judge, item.record, metrics)
        if on_done is not None:
            on_done(item, evaluation)
        return evaluation

    return list(await asyncio.gather(*(one(item) for item in records)))


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """Mean, 10th percentile and share below the threshold of one metric's defined scores."""

    metric: str
    count: int
    mean: float | None
    p10: float | None
    below: float | None


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What a batch run found, per metric and per status."""

    metrics: tuple[MetricSummary, ...]
    statuses: dict[str, int] = field(default_factory=dict)
    bad_lines: int = 0

    def mean(self, metric: str) -> float | None:
        """The metric's mean over records where it is defined."""
        for summary in self.metrics:
            if summary.metric == metric:
                return summary.mean
        return None


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default).
    position = (len(sorted_values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def summarize(
    evaluations: Sequence[Evaluation],
    metrics: Sequence[str],
    *,
    threshold: float = 0.7,
    bad_lines: int = 0,
) -> BatchSummary:
    """Per-metric statistics (undefined scores skipped) and counts by status."""
    summaries = []
    for metric in metrics:
        values = sorted(s for e in evaluations if (s := e.score(metric)) is not None)
        if values:
            summaries.append(
                MetricSummary(
                    metric,
                    len(values),
                    sum(values) / len(values),
                    _percentile(values, 0.10),
                    sum(1 for v in values if v < threshold) / len(values),
                )
            )
        else:
            summaries.append(MetricSummary(metric, 0, None, None, None))
    statuses = Counter(e.status.value for e in evaluations)
    return BatchSummary(tuple(summaries), dict(sorted(statuses.items())), bad_lines)


def parse_fail_under(specs: Iterable[str]) -> dict[str, float]:
    """``["groundedness=0.8"]`` -> ``{"groundedness": 0.8}``; raises ``ValueError`` if malformed."""
    gates: dict[str, float] = {}
    for spec in specs:
        metric, sep, value = spec.partition("=")
        metric = metric.strip()
        if not sep or metric not in ALL_METRICS:
            raise ValueError(
                f"--fail-under expects METRIC=VALUE with METRIC one of {', '.join(ALL_METRICS)};"
                f" got {spec!r}"
            )
        try:
            gates[metric] = float(value)
        except ValueError:
            raise ValueError(f"--fail-under {spec!r}: {value!r} is not a number") from None
    return gates


def read_lines(path: Path) -> list[str]:
    """The input file's lines (UTF-8, BOM tolerated)."""
    return path.read_text(encoding="utf-8-sig").splitlines()
