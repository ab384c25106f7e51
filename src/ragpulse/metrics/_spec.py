"""What a metric is: one declaration of its name, inputs, computation and signals.

A ``Metric`` says everything ragpulse needs to know about one score, in one place:

- ``name`` and ``needs``: the record fields it reads (``missing`` says in words what
  a record lacks for it to be defined);
- ``findings``: what a judge must find for it (claims against the contexts, the
  question's parts, each context's relevance, ...) and ``judges``: how each built-in
  judge finds that, for the docs and ``ragpulse eval --list-metrics``;
- ``score``: the pure arithmetic from those findings to a ``MetricResult``;
- ``threshold``: the pass/fail threshold of its ``.label`` (``thresholds=`` overrides);
- ``explain``: its explanation rebuilt under the content policy, and ``content``: the
  texts of the evaluation that explanation may quote (the policy covers them);
- ``span_attributes``: attributes it writes on the evaluated span beside the three
  every metric gets (``ragpulse.eval.<name>.score``, ``.label``, ``.explanation``).

Every metric is also a series of the ``gen_ai.evaluation.score`` histogram
(``gen_ai.evaluation.name=<name>``) and a ``gen_ai.evaluation.result`` log event; those
need nothing declared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ragpulse.evaluation.types import ClaimVerdict, Evaluation, MetricResult, RagRecord

if TYPE_CHECKING:
    from ragpulse.evaluation.vector import VectorInputs

__all__ = [
    "DEFAULT_THRESHOLD",
    "Exported",
    "Metric",
    "ScoreInputs",
    "needs_text",
]

DEFAULT_THRESHOLD = 0.7
"""A metric's pass/fail threshold when its module names none."""


@dataclass(frozen=True, slots=True)
class ScoreInputs:
    """What a metric's ``score`` reads: the judged evaluation, the record, the findings."""

    evaluation: Evaluation
    record: RagRecord
    found: VectorInputs


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


Score = Callable[[ScoreInputs], MetricResult]
Explain = Callable[[MetricResult, Evaluation, Exported], str | None]
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
    findings: tuple[str, ...] = ("claims",)
    judges: Mapping[str, str] = field(default_factory=dict)
    """How each built-in judge finds what the metric reads (``lexical``, ``openai``, ...)."""
    score: Score | None = None
    """The arithmetic from findings to a result; ``None``: ``evaluation.metrics.assemble``
    makes it from the claims (faithfulness, groundedness, correctness)."""
    threshold: float | None = DEFAULT_THRESHOLD
    """``None``: the metric has no pass/fail label (a share to read, not to pass)."""
    explain: Explain | None = None
    """The explanation under the content policy; ``None``: the claims' (failing claims)."""
    content: tuple[str, ...] = ("claims",)
    span_attributes: SpanAttributes | None = None
    missing: Missing = _never_missing
    default: bool = False
    """In the set computed when no metrics are named."""
    widens: bool = False
    """``ragpulse eval`` adds it to a record's default set when ``missing`` says nothing lacks."""
    order: int = 100
    """Where it stands among the built-ins (span, tables, report)."""
