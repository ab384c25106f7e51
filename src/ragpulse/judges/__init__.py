"""Judges: turn a ``RagRecord`` into per-claim verdicts and scores.

The judges themselves: the offline ``LexicalJudge``, the local-model ``NLIJudge`` and
``TokenJudge``, the ``OpenAIJudge``, and the ``Judge`` protocol they keep. What runs a judge
(its processes, retries, breaker, the cascade and the fallback, the factory that builds one
from settings) is ``ragpulse.judging``, a floor above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragpulse._bucket import TokenBucket
from ragpulse.judges.base import Judge
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judges.local.nli import NLIJudge
from ragpulse.judges.local.token_classifier import TokenJudge

if TYPE_CHECKING:
    from ragpulse.judges.llm.openai import OpenAIJudge

__all__ = [
    "Judge",
    "LexicalJudge",
    "NLIJudge",
    "OpenAIJudge",
    "TokenBucket",
    "TokenJudge",
]


def __getattr__(name: str) -> Any:
    # The openai client is an optional extra; import it only when asked for.
    if name == "OpenAIJudge":
        from ragpulse.judges.llm.openai import OpenAIJudge

        return OpenAIJudge
    raise AttributeError(name)
