"""The ``Judge`` protocol every judge implements."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, runtime_checkable

from ragpulse.evaluation.types import AnnotatorKind, Evaluation, RagRecord


@runtime_checkable
class Judge(Protocol):
    """Turns a ``RagRecord`` into an ``Evaluation``.

    ``evaluate`` must not raise: failures come back as an ``Evaluation`` with
    status ``error`` and an ``error_type``. It runs on ragpulse's worker loop,
    never on the request's thread.
    """

    name: str
    annotator_kind: AnnotatorKind

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation: ...
