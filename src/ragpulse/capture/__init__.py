"""Capture: decorators and helpers that record RAG requests as spans."""

from __future__ import annotations

from ragpulse.capture._content import ContentPolicy, get_policy, set_policy
from ragpulse.capture._record import (
    force_evaluation,
    record_answer,
    record_contexts,
    record_question,
    record_reference,
    record_rubric,
)
from ragpulse.capture.decorators import generation, rag, retrieval
from ragpulse.capture.tool import tool

__all__ = [
    "ContentPolicy",
    "force_evaluation",
    "generation",
    "get_policy",
    "rag",
    "record_answer",
    "record_contexts",
    "record_question",
    "record_reference",
    "record_rubric",
    "retrieval",
    "set_policy",
    "tool",
]
