"""The ``ragpulse`` command line. Each subcommand is one ``_add_<name>`` function.

Exit codes: 0 success, 1 a ``--fail-under`` quality gate failed, 2 usage error
(bad arguments, unreadable input, a judge that cannot be built).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragpulse.batch import (
    BadLine,
    BatchSummary,
    InputRecord,
    evaluate_records,
    evaluation_to_json,
    parse_fail_under,
    read_lines,
    read_records,
    summarize,
)
from ragpulse.evaluation.types import ALL_METRICS, Evaluation
from ragpulse.judges.base import Judge

__all__ = ["main"]

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], int]


class _UsageError(Exception):
    """A problem with what the user asked for; reported in one line, exit code 2."""


# --- ragpulse eval -------------------------------------------------------------------


def _add_eval(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a JSONL file of RAG records",
        description="Evaluate each JSONL record (id, question, contexts, answer, reference) and "
        "write one JSON result per line, with a summary table on stderr.",
    )
    parser.add_argument("input", type=Path, metavar="INPUT.jsonl")
    parser.add_argument("--judge", choices=("lexical", "openai"), default="lexical")
    parser.add_argument("--model", help="model name for --judge openai")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for --judge openai")
    parser.add_argument("--api-key", help="API key for --judge openai (else OPENAI_API_KEY)")
    parser.add_argument(
        "--metrics",
        default=",".join(ALL_METRICS),
        help="comma-separated subset of: " + ", ".join(ALL_METRICS),
    )
    parser.add_argument("--output", type=Path, help="output JSONL file (default: stdout)")
    parser.add_argument("--concurrency", type=int, default=4, help="evaluations in flight")
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.7,
        help="the summary reports the share of scores below this value",
    )
    parser.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="exit 1 when the metric's mean is below VALUE (repeatable)",
    )
    parser.set_defaults(handler=_run_eval)


def _parse_metrics(text: str) -> list[str]:
    metrics = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in metrics if m not in ALL_METRICS]
    if unknown or not metrics:
        raise _UsageError(
            f"--metrics: unknown {', '.join(unknown) or '(empty)'}; "
            f"choose from {', '.join(ALL_METRICS)}"
        )
    return metrics


def _build_judge(args: argparse.Namespace) -> Judge:
    if args.judge == "lexical":
        from ragpulse.judges.lexical import LexicalJudge

        return LexicalJudge()
    try:
        from ragpulse.judges.openai import OpenAIJudge
    except ImportError as exc:
        raise _UsageError(
            f"--judge openai is not available ({exc}); install it with "
            "`pip install 'ragpulse[openai]'`"
        ) from None
    options = {"model": args.model, "base_url": args.base_url, "api_key": args.api_key}
    try:
        judge: Judge = OpenAIJudge(**{k: v for k, v in options.items() if v is not None})
    except Exception as exc:
        raise _UsageError(f"--judge openai could not be built: {exc}") from None
    return judge


def _format(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _print_summary(console: Console, summary: BatchSummary, threshold: float) -> None:
    table = Table(title="ragpulse eval")
    table.add_column("metric")
    table.add_column("n", justify="right")
    table.add_column("mean", justify="right")
    table.add_column("p10", justify="right")
    table.add_column(f"below {threshold:g}", justify="right")
    for m in summary.metrics:
        below = "-" if m.below is None else f"{m.below:.1%}"
        table.add_row(m.metric, str(m.count), _format(m.mean), _format(m.p10), below)
    console.print(table)
    statuses = Table(title="by status")
    statuses.add_column("status")
    statuses.add_column("records", justify="right")
    for status, count in summary.statuses.items():
        statuses.add_row(status, str(count))
    if summary.bad_lines:
        statuses.add_row("bad input line", str(summary.bad_lines))
    console.print(statuses)


def _check_gates(console: Console, summary: BatchSummary, gates: dict[str, float]) -> int:
    failed = False
    for metric, minimum in gates.items():
        mean = summary.mean(metric)
        if mean is None:
            console.print(f"[red]FAIL[/] {metric}: no defined scores to compare with {minimum:g}")
            failed = True
        elif mean < minimum:
            console.print(f"[red]FAIL[/] {metric}: mean {mean:.3f} < {minimum:g}")
            failed = True
        else:
            console.print(f"[green]PASS[/] {metric}: mean {mean:.3f} >= {minimum:g}")
    return EXIT_GATE_FAILED if failed else EXIT_OK


def _write_results(
    out: TextIO, records: Sequence[InputRecord], evaluations: Sequence[Evaluation]
) -> None:
    for item, evaluation in zip(records, evaluations, strict=True):
        out.write(json.dumps(evaluation_to_json(item.id, evaluation), ensure_ascii=False))
        out.write("\n")


def _run_eval(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    metrics = _parse_metrics(args.metrics)
    gates = _parse_gates(args.fail_under)
    if args.concurrency < 1:
        raise _UsageError("--concurrency must be at least 1")
    try:
        lines = read_lines(args.input)
    except (OSError, UnicodeDecodeError) as exc:
        raise _UsageError(f"cannot read {args.input}: {exc}") from None
    judge = _build_judge(args)

    records: list[InputRecord] = []
    bad = 0
    for item in read_records(lines):
        if isinstance(item, BadLine):
            bad += 1
            console.print(f"[yellow]skipped line {item.line}[/]: {item.reason}")
        else:
            records.append(item)

    with Progress(
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("eval", total=len(records))
        evaluations = asyncio.run(
            evaluate_records(
                records,
                judge,
                metrics,
                concurrency=args.concurrency,
                on_done=lambda _item, _evaluation: progress.advance(task),
            )
        )

    if args.output is None:
        _write_results(sys.stdout, records, evaluations)
        sys.stdout.flush()
    else:
        try:
            with args.output.open("w", encoding="utf-8") as out:
                _write_results(out, records, evaluations)
        except OSError as exc:
            raise _UsageError(f"cannot write {args.output}: {exc}") from None

    summary = summarize(evaluations, metrics, threshold=args.threshold, bad_lines=bad)
    _print_summary(console, summary, args.threshold)
    return _check_gates(console, summary, gates)


def _parse_gates(specs: Sequence[str]) -> dict[str, float]:
    try:
        return parse_fail_under(specs)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


# --- entry point -----------------------------------------------------------------------


def _add_demo(subparsers: Any) -> None:
    # The demo's options live with the demo; only its parser is mounted here.
    from ragpulse.demo.cli import add_parser

    add_parser(subparsers)


def _add_report(subparsers: Any) -> None:
    # The page's options live with the report package; only its parser is mounted here.
    from ragpulse.report._cli import add_parser

    add_parser(subparsers)


def _add_serve(subparsers: Any) -> None:
    # The service's options live with the service; only its parser is mounted here.
    from ragpulse.serve._cli import add_parser

    add_parser(subparsers)


_SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (_add_eval, _add_demo, _add_report, _add_serve)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragpulse",
        description="Quality of a live RAG application, on its own OpenTelemetry spans.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ragpulse`` command line; returns the process exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on bad arguments
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler = args.handler
    try:
        return handler(args)
    except _UsageError as exc:
        Console(stderr=True).print(f"[red]ragpulse {args.command}:[/] {exc}")
        return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
