"""What an alignment reads of the judge that made it: its windows and coverage thresholds.

A protocol, so the alignment depends on these numbers and not on ``LexicalJudge`` itself.
"""

from __future__ import annotations

from typing import Protocol


class AlignmentThresholds(Protocol):
    """The lexical judge's numbers an alignment compares with (``LexicalJudge`` has them)."""

    @property
    def min_window_tokens(self) -> int: ...
    @property
    def window_factor(self) -> float: ...
    @property
    def supported_coverage(self) -> float: ...
    @property
    def inferred_coverage(self) -> float: ...
    @property
    def record_inferred_coverage(self) -> float: ...
    @property
    def span_coverage(self) -> float: ...
    @property
    def contradiction_coverage(self) -> float: ...
    @property
    def max_hits_per_token(self) -> int: ...
