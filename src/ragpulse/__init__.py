"""ragpulse: faithfulness, groundedness and correctness of a live RAG application,
written onto the request's own OpenTelemetry span."""

from __future__ import annotations

from ragpulse import judges
from ragpulse._feedback import feedback
from ragpulse._version import __version__
from ragpulse.capture import (
    ContentPolicy,
    force_evaluation,
    generation,
    rag,
    record_answer,
    record_contexts,
    record_question,
    record_reference,
    record_rubric,
    retrieval,
    tool,
)
from ragpulse.config import Handle, configure
from ragpulse.evaluation.types import (
    Claim,
    ClaimVerdict,
    Context,
    EvalStatus,
    Evaluation,
    Evidence,
    MetricResult,
    RagRecord,
    Verdict,
)
from ragpulse.metrics import METRICS, RubricMetric, metric
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings import Settings

__all__ = [
    "METRICS",
    "Claim",
    "ClaimVerdict",
    "ContentPolicy",
    "Context",
    "EvalSampler",
    "EvalStatus",
    "EvaluatingSpanProcessor",
    "Evaluation",
    "Evidence",
    "Handle",
    "MetricResult",
    "RagRecord",
    "RubricMetric",
    "Settings",
    "Verdict",
    "__version__",
    "configure",
    "feedback",
    "force_evaluation",
    "generation",
    "judges",
    "metric",
    "rag",
    "record_answer",
    "record_contexts",
    "record_question",
    "record_reference",
    "record_rubric",
    "retrieval",
    "tool",
]
