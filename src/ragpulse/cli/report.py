"""Command-line options of ``ragpulse report``; the ``ragpulse`` command mounts this parser."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_USAGE = 2

_DESCRIPTION = (
    "Write one self-contained HTML page (no network needed) of an evaluated run: per-metric "
    "distributions and pass rates by slice, counts by status, a sortable and filterable list of "
    "requests, and each request's claims beside their evidence. Given two runs (before, after), "
    "the page also compares them. A run is `ragpulse eval` output or the OTLP-JSON traces file "
    "configure() writes (ragpulse-traces.jsonl)."
)
_EPILOG = """examples:
  ragpulse eval answers.jsonl --output run-a.jsonl
  ragpulse report run-a.jsonl --input answers.jsonl -o report.html
  ragpulse report ragpulse-traces.jsonl -o report.html
  ragpulse report ragpulse-traces.jsonl --feedback ragpulse-logs.jsonl -o report.html
  ragpulse report run-a.jsonl run-b.jsonl --input answers.jsonl -o diff.html
"""


def _threshold(text: str) -> tuple[str, float]:
    metric, sep, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not sep or not metric.strip() or not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(
            f"expected METRIC=VALUE with VALUE in [0, 1], got {text!r}"
        )
    return metric.strip(), number


def add_parser(subparsers: Any) -> None:
    """Add the ``report`` subcommand to a ``ragpulse`` argparse subparsers object."""
    parser = subparsers.add_parser(
        "report",
        help="write an HTML page of a run, or compare two runs",
        description=textwrap.fill(_DESCRIPTION, 78),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "runs", nargs="+", type=Path, metavar="RUN.jsonl", help="one run, or two to compare"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("ragpulse-report.html"),
        help="the HTML file to write (default: ragpulse-report.html)",
    )
    parser.add_argument(
        "--input",
        type=Path,
        action="append",
        default=[],
        metavar="RECORDS.jsonl",
        help="the records `ragpulse eval` read, for questions, answers and passages "
        "(once for all runs, or once per run)",
    )
    parser.add_argument(
        "--feedback",
        type=Path,
        action="append",
        default=[],
        metavar="LOGS.jsonl",
        help="OTLP-JSON log lines holding ragpulse.feedback events (the -logs file configure() "
        "writes beside the traces), or plain lines {trace_id, span_id, score, label, metric, "
        "comment}: each person's verdict is shown beside the judge's "
        "(repeatable; default: none)",
    )
    parser.add_argument(
        "--threshold",
        type=_threshold,
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="pass/fail threshold where a run recorded no label "
        "(defaults: faithfulness 0.7, groundedness 0.7, correctness 0.5)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Write the page; returns the exit code (2 for unreadable or unsuitable input)."""
    from ragpulse.report import RunFileError, write_report
    from ragpulse.report._model import plural

    if len(args.runs) > 2:
        print("ragpulse report: give one run, or two to compare", file=sys.stderr)
        return EXIT_USAGE
    try:
        runs = write_report(
            args.runs,
            args.output,
            inputs=args.input,
            thresholds=dict(args.threshold),
            feedback=args.feedback,
        )
    except (OSError, UnicodeDecodeError, RunFileError) as exc:
        print(f"ragpulse report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for run in runs:
        for note in run.notes:
            print(f"ragpulse report: {run.name}: {note}", file=sys.stderr)
    counts = ", ".join(f"{run.name}: {plural(len(run.requests), 'request')}" for run in runs)
    print(f"ragpulse report: wrote {args.output} ({counts})", file=sys.stderr)
    return EXIT_OK
