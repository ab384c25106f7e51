"""What a metric is: one declaration of its name, inputs, computation and signals.

A ``Metric`` says everything ragpulse needs to know about one score, in one place:

- ``name`` and ``needs``: the record fields it reads (``missing`` says in words what
  a record lacks for it to be defined);
- ``findings``: what a judge must find for it (claims against the contexts, the
  question's parts, each context's relevance, ...) and ``judges``: how each built-in
  judge finds that, for the docs and ``ragpulse eval --list-metrics``;
- ``score``: the pure arithmetic from those findings to a ``MetricResult`` (or none,
  when the metric is absent for the record: correctness without a reference);
- ``threshold``: the pass/fail threshold of its ``.label`` (``thresholds=`` overrides);
- ``explain``: its explanation rebuilt under the content policy, and ``content``: the
  texts of the evaluation that explanation may quote (the policy covers them);
- ``strict``: how it reads in strict mode (``strict=True``), where it has a stricter reading;
- ``span_attributes``: attributes it writes on the evaluated span beside the three
  every metric gets (``ragpulse.eval.<name>.score``, ``.label``, ``.explanation``).

Every metric is also a series of the ``ragpulse.evaluation.score`` histogram
(``gen_ai.evaluation.name=<name>``) and a ``gen_ai.evaluation.result`` log event; those
need nothing declared.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragpulse.evaluation.findings import CLAIMS, Findings
from ragpulse.evaluation.types import ClaimVerdict, Evaluation, MetricResult, RagRecord, Usage

__all__ = [
    "DEFAULT_THRESHOLD",
    "CustomMetric",
    "Exported",
    "Metric",
    "ScoreInputs",
    "needs_text",
]

DEFAULT_METRIC_TIMEOUT = 5.0
"""Seconds a user's metric may take on one record before it fails alone (``metric_failed``)."""
DEFAULT_THRESHOLD = 0.7
"""A metric's pass/fail threshold when its module names none."""


@dataclass(frozen=True, slots=True)
class ScoreInputs:
    """What a metric's ``score`` reads: the judged evaluation, the record, the findings."""

    evaluation: Evaluation
    """The judged claims and what was settled of the whole request (abstained, status)."""
    record: RagRecord
    found: Findings
    correctness_mode: str
    """How the judge scores correctness (a ``metrics.correctness.CorrectnessMode``)."""
    beta: float
    """Correctness's F-beta weight (beta > 1 weights recall)."""


class Exported(Protocol):
    """The content policy as an explanation sees it (``ragpulse.signals.privacy``)."""

    @property
    def content(self) -> bool:
        """Whether texts may leave at all (``capture_content``)."""
        ...

    def text(self, text: str) -> str:
        """``text`` as it may leave: scrubbed, redacted, or withheld."""
        ...

    def failing(self, items: Sequence[ClaimVerdict], failed: Sequence[int], of: str) -> str:
        """``; failing claims: #2 …`` for the items at ``failed``, within the policy."""
        ...

    def free_text(self, evaluation: Evaluation, text: str | None) -> str | None:
        """A judge's own free text (an error message, a reason) as the policy lets it leave."""
        ...


Score = Callable[[ScoreInputs], MetricResult | None]
Explain = Callable[[MetricResult, Evaluation, Exported], str | None]
Strict = Callable[[MetricResult, Evaluation], MetricResult]
SpanAttributes = Callable[[Evaluation], Mapping[str, Any]]
Missing = Callable[[RagRecord], str | None]


def needs_text(*fields: str) -> Missing:
    """A ``missing`` check: the first of ``fields`` the record lacks (blank counts as lacking)."""

    def missing(record: RagRecord) -> str | None:
        for name in fields:
            value = getattr(record, name, None)
            empty = not value if not isinstance(value, str) else not value.strip()
            if empty:
                return f"no {name}"
        return None

    return missing


def _never_missing(record: RagRecord) -> str | None:
    return None


@dataclass(frozen=True)
class Metric:
    """One metric, declared once (see the module docstring for each field)."""

    name: str
    description: str
    needs: tuple[str, ...] = ("answer", "contexts")
    findings: tuple[str, ...] = (CLAIMS,)
    """What the judges must find for it (``ragpulse.evaluation.findings``)."""
    judges: Mapping[str, str] = field(default_factory=dict)
    """How each built-in judge finds what the metric reads (``lexical``, ``openai``, ...)."""
    score: Score | None = None
    """The arithmetic from findings to a result (``None`` from it: absent for this record);
    ``None``: the metric measures itself (a user's metric, ``CustomMetric``)."""
    threshold: float | None = DEFAULT_THRESHOLD
    """``None``: the metric has no pass/fail label (a share to read, not to pass)."""
    explain: Explain | None = None
    """The explanation under the content policy; ``None``: the result's own words when
    ``content`` is empty, else the explanation as a judge's free text (redacted or withheld)."""
    content: tuple[str, ...] = ("claims",)
    span_attributes: SpanAttributes | None = None
    missing: Missing = _never_missing
    default: bool = False
    """In the set computed when no metrics are named."""
    widens: bool = False
    """``ragpulse eval`` adds it to a record's default set when ``missing`` says nothing lacks."""
    order: int = 100
    """Where it stands among the built-ins (span, tables, report)."""
    strict: Strict | None = None
    """Its result in strict mode (``strict=True``); ``None``: strict mode leaves it as it is."""


@runtime_checkable
class CustomMetric(Protocol):
    """A user's metric: its declaration, and how it measures one record."""

    @property
    def spec(self) -> Metric:
        """The metric's declaration (name, threshold, explanation policy)."""
        ...

    def measure(self, record: RagRecord) -> Awaitable[tuple[MetricResult, Usage]]:
        """The metric's result for ``record`` (may raise: ``measure_safely`` contains it)."""
        ...
