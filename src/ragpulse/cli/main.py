"""The ``ragpulse`` command line: it mounts each command's module (``cli/<command>.py``).

Exit codes, the same for every subcommand:

- 0: success (for ``eval``: every record evaluated and every gate passed);
- 1: a ``--fail-under`` quality gate failed;
- 2: usage error: bad arguments, unreadable input, unwritable output, a judge that
  cannot be built;
- 3: evaluations failed: more records ended in ``error`` (a judge that answers 401,
  a refused connection, an unreadable line) than ``--max-errors`` allows.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from ragpulse._version import __version__
from ragpulse.cli._shared import (
    _COMMON_EXIT_CODES,
    EXIT_EVAL_FAILED,
    EXIT_USAGE,
    Handler,
    _console,
    _HelpFormatter,
    _print,
    _UsageError,
)

__all__ = ["main"]


def _add_calibrate(subparsers: Any) -> None:
    from ragpulse.cli.calibrate import add_parser

    add_parser(subparsers)


def _add_demo(subparsers: Any) -> None:
    from ragpulse.cli.demo import add_parser

    add_parser(subparsers)


def _add_report(subparsers: Any) -> None:
    from ragpulse.cli.report import add_parser

    add_parser(subparsers)


def _add_serve(subparsers: Any) -> None:
    from ragpulse.cli.serve import add_parser

    add_parser(subparsers)


def _add_eval(subparsers: Any) -> None:
    from ragpulse.cli.eval import add_parser

    add_parser(subparsers)


_SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (
    _add_eval,
    _add_calibrate,
    _add_demo,
    _add_report,
    _add_serve,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragpulse",
        description="Quality of a live RAG application, on its own OpenTelemetry spans.",
        epilog=_COMMON_EXIT_CODES,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ragpulse {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ragpulse`` command line; returns the process exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and bad arguments
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler = args.handler
    console = _console()
    try:
        return handler(args)
    except _UsageError as exc:
        _print(console, f"ragpulse {args.command}: {exc}", "red")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _print(console, f"ragpulse {args.command}: interrupted")
        return 130
    except RecursionError:
        _print(console, f"ragpulse {args.command}: input nested too deeply to read", "red")
        return EXIT_USAGE
    except Exception as exc:  # one line, never a traceback
        _print(console, f"ragpulse {args.command} failed: {type(exc).__name__}: {exc}", "red")
        return EXIT_EVAL_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
