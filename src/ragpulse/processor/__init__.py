"""The evaluating span processor: it holds a sampled unit's span until its scores are written."""

from __future__ import annotations

from ragpulse.processor.span_processor import EvaluatingSpanProcessor

__all__ = ["EvaluatingSpanProcessor"]
