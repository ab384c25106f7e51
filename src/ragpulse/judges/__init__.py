"""Judges: turn a ``RagRecord`` into per-claim verdicts and scores."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragpulse._bucket import TokenBucket
from ragpulse.judges.base import Judge
from ragpulse.judges.cascade import CascadeJudge
from ragpulse.judges.fallback import FallbackJudge
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judges.local.nli import NLIJudge
from ragpulse.judges.local.token_classifier import TokenJudge
from ragpulse.judges.running.breaker import CircuitBreaker
from ragpulse.judges.running.process import ProcessJudge
from ragpulse.judges.running.resilient import ResilienceStats, ResilientJudge, RetryPolicy

if TYPE_CHECKING:
    from ragpulse.judges.llm.openai import OpenAIJudge

__all__ = [
    "CascadeJudge",
    "CircuitBreaker",
    "FallbackJudge",
    "Judge",
    "LexicalJudge",
    "NLIJudge",
    "OpenAIJudge",
    "ProcessJudge",
    "ResilienceStats",
    "ResilientJudge",
    "RetryPolicy",
    "TokenBucket",
    "TokenJudge",
]


def __getattr__(name: str) -> Any:
    # The openai client is an optional extra; import it only when asked for.
    if name == "OpenAIJudge":
        from ragpulse.judges.llm.openai import OpenAIJudge

        return OpenAIJudge
    raise AttributeError(name)
