"""What runs any judge: child processes, the wire format, retries, the breaker and the budget,
the composites (a cascade, a fallback) and the factory that builds a judge from settings.

It sits above ``ragpulse.settings`` and ``ragpulse.signals`` (the children make signals and
read the content policy), and the judges themselves (``ragpulse.judges``) sit below both.
"""

from __future__ import annotations

from ragpulse.judging.breaker import CircuitBreaker
from ragpulse.judging.cascade import CascadeJudge
from ragpulse.judging.fallback import FallbackJudge
from ragpulse.judging.process import ProcessJudge
from ragpulse.judging.resilient import ResilienceStats, ResilientJudge, RetryPolicy

__all__ = [
    "CascadeJudge",
    "CircuitBreaker",
    "FallbackJudge",
    "ProcessJudge",
    "ResilienceStats",
    "ResilientJudge",
    "RetryPolicy",
]
