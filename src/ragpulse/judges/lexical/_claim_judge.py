"""What the views of the passages and of the vector ask of the judge: one claim's verdict.

A protocol, so those views depend on this one call and not on ``LexicalJudge`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ragpulse.evaluation.findings import CorrectnessInputs
from ragpulse.evaluation.types import ClaimVerdict, Context
from ragpulse.judges.lexical._align import RecordFacts
from ragpulse.judges.lexical._checkable import CheckableClaim, IndexedContext


class ClaimJudge(Protocol):
    """Judges one claim against indexed passages (``LexicalJudge`` is one)."""

    @property
    def max_context_chars(self) -> int: ...

    def _judge_claim(
        self,
        checkable: CheckableClaim,
        indexed: Sequence[IndexedContext],
        contexts: Sequence[Context],
        *,
        facts: RecordFacts = ...,
        align: bool = ...,
        one_value: bool = ...,
    ) -> ClaimVerdict: ...

    def _correctness(
        self,
        claims: Sequence[CheckableClaim],
        answer: str,
        reference: str,
        question: str | None,
    ) -> tuple[CorrectnessInputs, list[ClaimVerdict]]: ...
