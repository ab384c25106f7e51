"""The offline judge: tokens, one alignment per claim and an ordered table of small rules."""

from __future__ import annotations

from ragpulse.judges.lexical.judge import LexicalJudge

__all__ = ["LexicalJudge"]
