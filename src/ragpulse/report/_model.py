"""What a report shows of one request, whichever file it was read from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ragpulse.metrics import METRICS, _registry
from ragpulse.metrics._spec import DEFAULT_THRESHOLD
from ragpulse.offline.agreement import HUMAN_PASS_SCORE
from ragpulse.semconv import LABEL_FAIL, LABEL_PASS


@dataclass(frozen=True, slots=True)
class ReportContext:
    """One retrieved passage as it was exported (possibly redacted or capped)."""

    text: str | None
    id: str | None = None
    tool: str | None = None
    """The tool whose result this is (an agent's evidence); ``None`` for a retrieved passage."""


@dataclass(frozen=True, slots=True)
class ReportClaim:
    """One claim, its verdict and where its evidence sits."""

    text: str
    verdict: str
    answer_start: int | None = None
    answer_end: int | None = None
    context_index: int | None = None
    start: int | None = None
    end: int | None = None
    evidence_text: str | None = None
    cited: tuple[int, ...] = ()
    """0-based indexes of the contexts the claim's ``[N]`` markers cite."""
    citation_holds: bool | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Feedback:
    """One person's verdict on a request: a ``ragpulse.feedback`` event read back."""

    trace_id: str
    span_id: str | None
    """``None`` when the event named the trace alone."""
    score: float | None = None
    label: str | None = None
    metric: str | None = None
    """``None``: the answer as a whole."""
    comment: str | None = None
    """As exported: redacted or capped; ``None`` when withheld or not given."""

    @property
    def passed(self) -> bool | None:
        """The person's verdict: a score of 0.5 or more, else a ``pass``/``fail`` label."""
        if self.score is not None:
            return self.score >= HUMAN_PASS_SCORE
        if self.label in (LABEL_PASS, LABEL_FAIL):
            return self.label == LABEL_PASS
        return None


@dataclass(slots=True)
class ReportRequest:
    """One evaluated request: what was asked, answered and retrieved, and what the judge said."""

    id: str
    status: str
    scores: dict[str, float | None] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    """``pass``/``fail`` as recorded on the span; else derived from the thresholds."""
    explanations: dict[str, str] = field(default_factory=dict)
    claims: tuple[ReportClaim, ...] = ()
    question: str | None = None
    answer: str | None = None
    contexts: tuple[ReportContext, ...] | None = None
    """``None`` when the run did not record them (eval output without its input)."""
    judge: str | None = None
    error_type: str | None = None
    slices: dict[str, str] = field(default_factory=dict)
    abstained: bool | None = None
    """The answer declined to answer (``I don't know``)."""
    answerable: bool | None = None
    """Whether the passages held an answer, as the judge saw it."""
    feedback: list[Feedback] = field(default_factory=list)
    """What people said of this request (``ragpulse.feedback`` events linked to it)."""
    conversation_id: str | None = None
    """The conversation this request is a turn of; the page shows its turns together."""
    failed_tools: tuple[str, ...] = ()
    """Evidence tools that failed or returned nothing before the answer."""


@dataclass(slots=True)
class Run:
    """The evaluated requests of one file."""

    name: str
    source: str
    """``eval`` (``ragpulse eval`` output), ``traces`` (OTLP-JSON lines), ``evaluations``
    (in memory) or ``empty`` (a file with no line yet)."""
    requests: list[ReportRequest]
    notes: list[str] = field(default_factory=list)
    """What the reader should know about this run (skipped lines, missing input); the
    command prints each after the file's name, the page under the run's heading."""

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics the run holds, known ones first: those a request scored or explained.

        ``ragpulse eval`` lists every metric in each line's scores, ``null`` where it was not
        computed; a metric that is ``null`` everywhere and explained nowhere was never asked
        for, and the page shows no card for it.
        """
        seen: dict[str, None] = {}
        for request in self.requests:
            for metric, score in request.scores.items():
                if score is not None or metric in request.explanations:
                    seen.setdefault(metric, None)
        known = [m for m in METRICS if m in seen]
        return (*known, *(m for m in seen if m not in METRICS))


MAX_NAMED_LINES = 10
"""Skipped lines named one by one in a run's notes; the rest are counted."""


class SkippedLines:
    """The lines of one file a reader could not use, each with its number and why."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def add(self, number: int, reason: str) -> None:
        """Line ``number`` was skipped for ``reason``."""
        self.lines.append((number, reason))

    def notes(self) -> list[str]:
        """One note per skipped line, up to ``MAX_NAMED_LINES``, then how many more."""
        notes = [f"skipped line {n}: {reason}" for n, reason in self.lines[:MAX_NAMED_LINES]]
        more = len(self.lines) - MAX_NAMED_LINES
        if more > 0:
            notes.append(f"skipped {plural(more, 'more line')} that could not be read")
        return notes


def plural(count: int, noun: str) -> str:
    """``1 request``, ``2 requests``: the count with its noun in agreement."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def threshold_for(metric: str, thresholds: Mapping[str, float]) -> float | None:
    """The configured threshold, else the one the metric declares (``None``: it has no
    pass/fail, as ``context_relevance``); a metric this process does not know (another
    process's own) gets the default a user's metric declares when it names none."""
    if metric in thresholds:
        return thresholds[metric]
    declared = _registry.get(metric)
    return DEFAULT_THRESHOLD if declared is None else declared.threshold
