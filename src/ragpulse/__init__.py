"""ragpulse: faithfulness, groundedness and correctness of a live RAG application,
written onto the request's own OpenTelemetry span."""

from __future__ import annotations

# First: it imports the SDK's tracing module before any module below does.
import ragpulse._sdk_import  # noqa: F401
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
from ragpulse.settings.options import (
    BoundsOptions,
    ContentOptions,
    EvaluationOptions,
    ExportOptions,
    JudgeOptions,
    SamplingOptions,
)

__all__ = [
    "METRICS",
    "BoundsOptions",
    "Claim",
    "ClaimVerdict",
    "ContentOptions",
    "ContentPolicy",
    "Context",
    "EvalSampler",
    "EvalStatus",
    "EvaluatingSpanProcessor",
    "Evaluation",
    "EvaluationOptions",
    "Evidence",
    "ExportOptions",
    "Handle",
    "JudgeOptions",
    "MetricResult",
    "RagRecord",
    "RubricMetric",
    "SamplingOptions",
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
