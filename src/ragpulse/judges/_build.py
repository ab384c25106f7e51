"""The judges a command names (``--judge lexical|openai``), built in one place.

``ragpulse eval``, ``ragpulse calibrate``, ``ragpulse serve`` and the demo all offer
the same two judges; they build them here, so an option means the same thing in
each and a missing extra gets the same clear message.
"""

from __future__ import annotations

import argparse
from typing import Any

from ragpulse.evaluation.metrics import CORRECTNESS_MODES, DEFAULT_CORRECTNESS_MODE
from ragpulse.judges.base import Judge
from ragpulse.judges.lexical import LexicalJudge
from ragpulse.judges.resilient import ResilientJudge

__all__ = ["JUDGE_KINDS", "JudgeUnavailable", "add_correctness_mode_option", "build_judge"]

JUDGE_KINDS = ("lexical", "openai")


class JudgeUnavailable(Exception):
    """The named judge cannot be built here; the message says why and what to do."""


def add_correctness_mode_option(parser: argparse.ArgumentParser) -> None:
    """``--correctness-mode``, the same in every command that builds a judge."""
    parser.add_argument(
        "--correctness-mode",
        choices=CORRECTNESS_MODES,
        default=DEFAULT_CORRECTNESS_MODE,
        help="agreement: only answer claims the reference supports or contradicts count "
        "for precision; precision, recall, f1: Ragas' definitions (default: %(default)s)",
    )


def build_judge(
    kind: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    resilient: bool = False,
    correctness_mode: str = DEFAULT_CORRECTNESS_MODE,
) -> Judge:
    """The judge ``kind`` names, ``resilient`` wrapping an LLM judge in ``ResilientJudge``.

    ``resilient`` suits callers that call the judge themselves (``ragpulse eval``,
    ``ragpulse calibrate``): a 429 or a timeout is retried with backoff and
    ``Retry-After``, and a judge that is down trips the breaker instead of being called
    for every record. ``configure()`` and ``ragpulse serve`` wrap judges themselves.
    The offline judge is returned as it is: it has nothing to retry.
    ``correctness_mode`` is the judge's correctness mode; an unknown one is refused.
    """
    if kind == "lexical":
        try:
            return LexicalJudge(correctness_mode=correctness_mode)
        except ValueError as exc:
            raise JudgeUnavailable(str(exc)) from None
    if kind != "openai":
        raise JudgeUnavailable(f"unknown judge {kind!r}; use {' or '.join(JUDGE_KINDS)}")
    try:
        from ragpulse.judges.openai import OpenAIJudge
    except ImportError as exc:
        raise JudgeUnavailable(
            f"the openai judge is not available ({exc}); install the openai extra "
            "(`pip install '.[openai]'` in a checkout)"
        ) from None
    options: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "api_key": api_key,
        "correctness_mode": correctness_mode,
    }
    try:
        judge: Judge = OpenAIJudge(**{k: v for k, v in options.items() if v is not None})
    except Exception as exc:
        raise JudgeUnavailable(f"the openai judge could not be built: {exc}") from None
    return ResilientJudge(judge) if resilient else judge
