"""The plain types every part of ragpulse speaks: records in, evaluations out.

No I/O and no OpenTelemetry SDK here; the target span is kept as an opaque
``SpanContext`` so judges can be tested without a tracer.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, overload

from ragpulse.errors import RETRYABLE_ERRORS, EvalStatus

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

__all__ = [
    "CITATION",
    "COMPLETENESS",
    "CORRECTNESS",
    "FAITHFULNESS",
    "GROUNDEDNESS",
    "RELEVANCY",
    "RETRYABLE_ERRORS",
    "AnnotatorKind",
    "Claim",
    "ClaimVerdict",
    "Context",
    "ContextJudgement",
    "ContextSource",
    "Contexts",
    "EvalStatus",
    "Evaluation",
    "Evidence",
    "MetricResult",
    "RagRecord",
    "Usage",
    "Verdict",
    "record_size",
]

AnnotatorKind = Literal["LLM", "CODE"]

FAITHFULNESS = "faithfulness"
GROUNDEDNESS = "groundedness"
CORRECTNESS = "correctness"
RELEVANCY = "relevancy"
COMPLETENESS = "completeness"
CITATION = "citation"


class Verdict(str, enum.Enum):
    """What a judge says of one claim against the retrieved contexts."""

    SUPPORTED = "SUPPORTED"
    """A verbatim span of a context states it."""
    INFERRED = "INFERRED"
    """It follows from the contexts, but no span states it."""
    NOT_FOUND = "NOT_FOUND"
    """The contexts are silent."""
    CONTRADICTED = "CONTRADICTED"
    """A context states the opposite or a different value."""


@dataclass(frozen=True, slots=True)
class Context:
    """One retrieved passage as the evaluator sees it (raw, never redacted)."""

    text: str
    id: str | None = None
    score: float | None = None
    tool: str | None = None
    """The tool whose result this is (an agent's evidence); ``None`` for a retrieved passage.
    A tool result's ``id`` is its call id where the trace gives one."""


ContextSource = tuple[int, int, int, int]
"""Where a run of a record's contexts was retrieved: ``(span_id, document, context, length)``.

``contexts[context : context + length]`` are the documents ``document`` to
``document + length - 1`` of the retrieval span ``span_id`` (0-based, as in
``retrieval.documents.N`` and ``gen_ai.retrieval.documents``). One run per
retriever call, and a plain tuple: the request's thread makes one per call.
"""


class Contexts(Sequence[Context]):
    """A record's retrieved passages in order, read-only; each item reads as a ``Context``.

    A plain passage (a ``str``) stays a ``str`` until it is read: a request that
    retrieved 100,000 short passages hands them over in one tuple, and whoever
    reads them (the judge, on the worker's thread or in its own process) pays for
    the ``Context`` objects, never the request's thread.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Context | str] = ()) -> None:
        self._items: tuple[Context | str, ...] = tuple(items)

    def stored(self) -> tuple[Context | str, ...]:
        """The passages as held: a plain passage still its ``str`` (cheap to hand on)."""
        return self._items

    def texts(self) -> list[str]:
        """Each passage's text, without making a ``Context`` of it."""
        return [item if type(item) is str else item.text for item in self._items]  # type: ignore[union-attr]

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Context: ...
    @overload
    def __getitem__(self, index: slice) -> Contexts: ...
    def __getitem__(self, index: int | slice) -> Context | Contexts:
        if isinstance(index, slice):
            return Contexts(self._items[index])
        item = self._items[index]
        return Context(item) if type(item) is str else item  # type: ignore[return-value]

    def __iter__(self) -> Iterator[Context]:
        for item in self._items:
            yield Context(item) if type(item) is str else item  # type: ignore[misc]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Contexts({list(self)!r})"

    def __reduce__(self) -> tuple[type[Contexts], tuple[tuple[Context | str, ...]]]:
        return Contexts, (self._items,)


@dataclass(frozen=True, slots=True)
class RagRecord:
    """Everything one RAG request produced that an evaluation needs."""

    question: str | None
    contexts: Sequence[Context]
    """The retrieved passages in order (a tuple of ``Context``, or ``Contexts``)."""
    answer: str | None
    reference: str | None = None
    name: str | None = None
    """The evaluation unit's name (the ``@rag`` function or the trace root)."""
    span_context: SpanContext | None = None
    """The evaluated span; results are written onto it."""
    attributes: Mapping[str, object] = field(default_factory=dict)
    """Low-cardinality facts for sampling rules and metric attributes."""
    rubric: tuple[str, ...] = ()
    """Required points a complete answer covers (completeness); empty: none given."""
    sources: tuple[ContextSource, ...] = ()
    """The retrieval spans the contexts came from (where their per-document scores go);
    empty where unknown (``record_contexts``, a record read from a file)."""
    conversation_id: str | None = None
    """The conversation (``gen_ai.conversation.id``, OpenInference ``session.id``) this turn
    belongs to; it goes onto the unit span, the log events and the report."""
    failed_tools: tuple[str, ...] = ()
    """Evidence tools whose call failed (an error status or result) or returned nothing
    before the answer was given: the ``tool_failure`` diagnosis."""


@dataclass(frozen=True, slots=True)
class Claim:
    """An atomic, single-subject statement of an answer (or of a reference)."""

    text: str
    answer_start: int | None = None
    """Character range of the claim in the answer, where it maps to one."""
    answer_end: int | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    """A verified span of a context: it occurs there at ``start:end``."""

    context_index: int
    start: int
    end: int
    text: str
    context_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    """A claim, the judge's verdict, and the evidence that survived verification."""

    claim: Claim
    verdict: Verdict
    evidence: Evidence | None = None
    """Set only when the quoted span was found in the named context."""
    quote: str | None = None
    """What the judge quoted, verified or not (kept for explanations)."""
    reason: str | None = None
    unsupported: tuple[tuple[int, int], ...] = ()
    """Answer ranges of the words no context states, where the judge can tell them apart
    from the rest of the claim (empty: the whole claim, or nothing to flag)."""
    cited: tuple[int, ...] = ()
    """0-based indexes of the contexts the claim's ``[N]`` markers cite."""
    citation_holds: bool | None = None
    """Whether a cited context supports the claim; ``None`` when it cites nothing."""
    confidence: float | None = None
    """How sure the judge is of this verdict, 0–1; ``None`` when the judge does not say."""

    @property
    def grounded(self) -> bool:
        """SUPPORTED with a verified evidence span."""
        return self.verdict is Verdict.SUPPORTED and self.evidence is not None


@dataclass(frozen=True, slots=True)
class ContextJudgement:
    """What a judge found of one retrieved passage (the context metrics read it)."""

    index: int
    """0-based position in retrieval order."""
    id: str | None = None
    relevance: float | None = None
    """How relevant the passage is to the question, 0-1; ``None`` without a question."""
    relevant: bool | None = None
    """Whether it helps answer: it supports a reference claim (with a reference), else
    its relevance to the question is at least one half. Context precision ranks it."""
    used: bool = False
    """The answer drew on it: a supported claim's evidence lies in it, or a held citation."""


@dataclass(frozen=True, slots=True)
class MetricResult:
    """One metric's score; ``None`` when undefined (no claims, no reference)."""

    name: str
    score: float | None
    explanation: str | None = None
    status: EvalStatus = EvalStatus.OK


@dataclass(frozen=True, slots=True)
class Usage:
    """What one evaluation cost the judge."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The result of judging one ``RagRecord``."""

    status: EvalStatus
    metrics: Mapping[str, MetricResult]
    claims: tuple[ClaimVerdict, ...] = ()
    judge: str = ""
    annotator_kind: AnnotatorKind = "CODE"
    usage: Usage = Usage()
    duration_ms: float = 0.0
    error_type: str | None = None
    explanation: str | None = None
    retry_after: float | None = None
    """Seconds the judge's server asked us to wait (``Retry-After``), if any."""
    reference_claims: tuple[ClaimVerdict, ...] = ()
    """Reference claims judged against the answer (correctness recall side)."""
    disagreement: bool | None = None
    """True when the offline cross-check found a verified contradiction the judge called
    supported; None when the judge made no cross-check."""
    abstained: bool | None = None
    """The answer declines to answer ("I don't know"); None when not checked."""
    answerable: bool | None = None
    """Whether the contexts could answer the question; None when not checked."""
    required_points: tuple[ClaimVerdict, ...] = ()
    """Rubric points judged against the answer (completeness): SUPPORTED when covered."""
    question_parts: tuple[ClaimVerdict, ...] = ()
    """Parts of the question judged against the answer (relevancy): SUPPORTED when addressed."""
    slices: Mapping[str, str] = field(default_factory=dict)
    """Low-cardinality cuts of this evaluation (``sources``, ``question``, ``abstained``,
    ``cited``), written on the span and the score histogram."""
    escalated: bool | None = None
    """Cascade judge: True when its screen was unsure and the escalation judge was asked;
    None when no cascade judged."""
    judge_model: str | None = None
    """The model of the judge that decided (an LLM judge's model name, a local judge's
    exported model); None for a judge without one (the offline judge)."""
    same_family: bool | None = None
    """True when ``judge_model`` is of the generator's model family (``evaluation.families``);
    None when either is unknown."""
    contexts: tuple[ContextJudgement, ...] = ()
    """Each retrieved passage as judged (relevance, use); empty when not judged."""
    reference_support: tuple[ClaimVerdict, ...] = ()
    """Reference claims judged against the contexts (context recall): SUPPORTED or
    INFERRED when the contexts hold them."""
    diagnosis: str | None = None
    """``ok``, ``retrieval_miss``, ``generation_drift`` or ``unanswerable_ok``
    (``ragpulse.evaluation.diagnosis``); None when the evaluation failed."""
    diagnosis_reason: str | None = None
    """Why, in ragpulse's own words (no request text)."""

    def score(self, metric: str) -> float | None:
        """The metric's score, or ``None`` when it is absent or undefined."""
        result = self.metrics.get(metric)
        return None if result is None else result.score

    @classmethod
    def failed(
        cls,
        error_type: str,
        *,
        judge: str,
        annotator_kind: AnnotatorKind,
        explanation: str | None = None,
        usage: Usage = Usage(),
        duration_ms: float = 0.0,
        retry_after: float | None = None,
    ) -> Evaluation:
        """An evaluation that could not be made; never raised, always recorded."""
        return cls(
            status=EvalStatus.ERROR,
            metrics={},
            judge=judge,
            annotator_kind=annotator_kind,
            usage=usage,
            duration_ms=duration_ms,
            error_type=error_type,
            explanation=explanation,
            retry_after=retry_after,
        )


# A record's fixed cost beyond its texts: the record, its tuple of contexts, a queue slot.
_RECORD_OVERHEAD = 512


def record_size(record: RagRecord) -> tuple[int, int]:
    """``(characters judged, bytes held)`` of a record: answer, contexts, reference, question.

    The characters are what ``max_input_chars`` bounds (the question is not counted:
    it is short, and a judge reads it only as a premise); the bytes are the strings'
    memory, what ``max_queue_bytes`` bounds. Linear in the number of contexts.
    """
    texts = [record.answer or "", record.reference or ""]
    contexts = record.contexts
    if isinstance(contexts, Contexts):
        texts.extend(contexts.texts())  # no Context made on the request's thread
    else:
        texts.extend(context.text for context in contexts)
    chars = sum(map(len, texts))
    held = sum(map(sys.getsizeof, texts)) + sys.getsizeof(record.question or "")
    return chars, held + _RECORD_OVERHEAD * (1 + len(record.contexts))
