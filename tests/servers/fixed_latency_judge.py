"""A judge that waits a fixed time (an I/O-bound judge's shape), then scores like the lexical one.

``ragpulse serve --judge tests.servers.fixed_latency_judge:FixedLatencyJudge`` with the
repository on ``PYTHONPATH``; ``RAGPULSE_TEST_JUDGE_LATENCY`` sets the wait in seconds
(default 0.2).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection
from typing import Literal

from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge


class FixedLatencyJudge:
    """Sleeps ``latency`` seconds without holding the GIL, then judges lexically."""

    name = "fixed-latency"
    annotator_kind: Literal["LLM", "CODE"] = "CODE"

    def __init__(self, latency: float | None = None) -> None:
        self.latency = (
            latency
            if latency is not None
            else float(os.environ.get("RAGPULSE_TEST_JUDGE_LATENCY", "0.2"))
        )
        self._lexical = LexicalJudge()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        await asyncio.sleep(self.latency)
        return await self._lexical.evaluate(record, metrics)
