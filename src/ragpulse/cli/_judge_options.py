"""The judge options of every command that builds a judge, declared once."""

from __future__ import annotations

import argparse
from typing import Any

from ragpulse.judges._kinds import DEFAULT_BAND, ESCALATION_KINDS, JUDGE_KINDS, parse_band
from ragpulse.metrics.correctness import CORRECTNESS_MODES, DEFAULT_CORRECTNESS_MODE

__all__ = [
    "add_correctness_mode_option",
    "add_judge_options",
    "add_local_judge_options",
    "local_judge_options",
]


def add_judge_options(
    parser: argparse.ArgumentParser,
    *,
    choices: tuple[str, ...] | None = JUDGE_KINDS,
    judge_help: str | None = None,
) -> None:
    """``--judge``, ``--model``, ``--base-url``, ``--api-key`` and the local judges' group.

    ``choices=None`` lets ``--judge`` name more than the built-ins (``ragpulse serve``
    takes ``MODULE:NAME``), its help then given by ``judge_help``.
    """
    parser.add_argument(
        "--judge", choices=choices, default="lexical", help=judge_help or JUDGE_HELP
    )
    parser.add_argument("--model", help=MODEL_HELP)
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for --judge openai")
    parser.add_argument(
        "--api-key", help="API key for --judge openai (default: the OPENAI_API_KEY variable)"
    )
    add_local_judge_options(parser)


def add_correctness_mode_option(parser: argparse.ArgumentParser) -> None:
    """``--correctness-mode``, the same in every command that builds a judge."""
    parser.add_argument(
        "--correctness-mode",
        choices=CORRECTNESS_MODES,
        default=DEFAULT_CORRECTNESS_MODE,
        help="agreement: only answer claims the reference supports or contradicts count "
        "for precision; precision, recall, f1: Ragas' definitions (default: %(default)s)",
    )


def _band_argument(text: str) -> tuple[float, float]:
    try:
        return parse_band(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


JUDGE_HELP = (
    "lexical (offline), openai (any OpenAI-compatible endpoint), nli or tokens (a local ONNX "
    "model), or cascade (the offline judge, escalating what it is unsure of) "
    "(default: %(default)s)"
)
"""Help of ``--judge``, the same in every command that builds a judge."""


MODEL_HELP = (
    "the model name for --judge openai (and a cascade escalating to it); the directory of "
    "an ONNX export for --judge nli or tokens"
)
"""Help of ``--model``, the same in every command that builds a judge."""


def add_local_judge_options(parser: argparse.ArgumentParser) -> None:
    """The options of the local model judges and the cascade, the same in every command."""
    group = parser.add_argument_group(
        "local model judges and the cascade",
        "--judge nli|tokens --model DIR runs an ONNX export (optimum-cli export onnx) on "
        "the CPU; --judge cascade screens with the offline judge and escalates the unsure.",
    )
    group.add_argument(
        "--label-map",
        metavar="I=NAME,...",
        help="name a local model's classes, e.g. 1=supported for a binary model",
    )
    group.add_argument(
        "--judge-threads",
        type=int,
        default=None,
        metavar="N",
        help="inference threads per judge process of a local model (default: the process's "
        "share of the CPUs it may use)",
    )
    group.add_argument(
        "--device",
        default="cpu",
        metavar="DEVICE",
        help="where a local model runs: cpu, cuda (needs onnxruntime-gpu) or onnxruntime "
        "providers in order, comma-separated; one that is missing is noted and the CPU "
        "used (default: %(default)s)",
    )
    group.add_argument(
        "--escalate",
        choices=ESCALATION_KINDS,
        default="openai",
        help="the judge --judge cascade escalates to; --model is its model (default: %(default)s)",
    )
    group.add_argument(
        "--cascade-band",
        type=_band_argument,
        default=DEFAULT_BAND,
        metavar="LOW,HIGH",
        help="claim confidences the screen is unsure of (default: 0.35,0.85)",
    )


def local_judge_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``build_judge`` that ``add_local_judge_options`` parsed."""
    return {
        "label_map": getattr(args, "label_map", None),
        "threads": getattr(args, "judge_threads", None),
        "device": getattr(args, "device", "cpu"),
        "escalate": getattr(args, "escalate", "openai"),
        "band": getattr(args, "cascade_band", DEFAULT_BAND),
    }
