"""Command-line options of ``ragpulse demo`` (also ``python -m ragpulse.demo``).

Kept free of heavy imports: the ``ragpulse`` command builds every subcommand's
parser at start-up, and the demo's dependencies load only when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ragpulse.cli._judge_options import (
    add_correctness_mode_option,
    add_local_judge_options,
    local_judge_options,
)
from ragpulse.cli._metric_options import add_threshold_option, threshold_overrides
from ragpulse.cli._shared import EXIT_USAGE, _console, _print, _UsageError
from ragpulse.demo import DEFAULT_MODEL
from ragpulse.judges._kinds import JUDGE_KINDS

_DESCRIPTION = (
    "Run a small RAG app (a support bot over a fictional product's documentation) "
    "with a share of answers drifting from their sources, evaluate every answer live, "
    "and show which drifts ragpulse caught. Offline by default; with OPENAI_API_KEY or "
    "--base-url the answers come from a chat model. Clean answers are worded as a chat "
    "model words them (verbatim, reworded, summed up). Each label is read against the "
    "judge's declared threshold; the offline judge scores groundedness without a label "
    "(it cannot decide it on paraphrased answers; docs/judges.md, Labels)."
)


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--requests",
        type=_positive,
        default=60,
        metavar="N",
        help="requests to run (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=int, default=7, help="seed of questions and faults (default: %(default)s)"
    )
    parser.add_argument(
        "--concurrency",
        type=_positive,
        default=4,
        metavar="N",
        help="requests in flight (default: %(default)s)",
    )
    parser.add_argument(
        "--drift",
        type=_fraction,
        default=0.3,
        metavar="SHARE",
        help="share of answers that get an injected fault (default: %(default)s)",
    )
    parser.add_argument(
        "--judge", choices=JUDGE_KINDS, default="lexical", help="evaluator (default: %(default)s)"
    )
    add_correctness_mode_option(parser)
    add_local_judge_options(parser)
    parser.add_argument(
        "--model",
        default=None,
        help=f"chat model for the generator and the openai judge (default: {DEFAULT_MODEL}); "
        "the directory of an ONNX export for --judge nli or tokens, or tiny: a tiny model "
        "built for the run, to see the whole path before exporting a real one",
    )
    parser.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp)"
    )
    add_threshold_option(
        parser,
        "a metric's pass/fail threshold: the table's colours, the flags and the report",
    )
    parser.add_argument(
        "--prometheus-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve /metrics here (default: no /metrics)",
    )
    parser.add_argument(
        "--output-file",
        default=None,
        metavar="PATH",
        help="OTLP-JSON traces file when no OTLP endpoint is set (default: ragpulse-traces.jsonl)",
    )
    parser.add_argument(
        "--no-table", action="store_true", help="print the summary only, not the request table"
    )


def add_parser(subparsers: Any) -> None:
    """Add the ``demo`` subcommand to a ``ragpulse`` argparse subparsers object."""
    parser = subparsers.add_parser(
        "demo", help="run the built-in RAG demo with live evaluation", description=_DESCRIPTION
    )
    _add_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo with parsed arguments; returns the exit code (``_UsageError`` for a bad
    ``--threshold``, which the ``ragpulse`` command prints in one line with exit code 2)."""
    from ragpulse.demo.runner import DemoOptions, run_demo
    from ragpulse.judges._labels import label_thresholds

    thresholds = label_thresholds(args.judge, threshold_overrides(args.threshold))
    options = DemoOptions(
        requests=args.requests,
        seed=args.seed,
        concurrency=args.concurrency,
        drift=args.drift,
        judge=args.judge,
        correctness_mode=args.correctness_mode,
        model=args.model,
        base_url=args.base_url,
        thresholds=thresholds,
        prometheus_port=args.prometheus_port,
        output_file=args.output_file,
        show_table=not args.no_table,
        judge_options=local_judge_options(args),
    )
    return run_demo(options)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ragpulse.demo``: the same options as ``ragpulse demo``."""
    parser = argparse.ArgumentParser(prog="python -m ragpulse.demo", description=_DESCRIPTION)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except _UsageError as exc:
        _print(_console(), f"ragpulse demo: {exc}", "red")
        return EXIT_USAGE
