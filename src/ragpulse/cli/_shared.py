"""What every ``ragpulse`` command shares: exit codes, the help format, the console."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

from ragpulse._secrets import scrub_secrets

EXIT_OK = 0


EXIT_GATE_FAILED = 1


EXIT_USAGE = 2


EXIT_EVAL_FAILED = 3


Handler = Callable[[argparse.Namespace], int]


_EXIT_CODES = """exit codes:
  0  every record evaluated and every --fail-under gate passed
  1  a --fail-under gate failed
  2  usage error: bad arguments, unreadable input, unwritable output
  3  more records failed (status error) than --max-errors allows"""


_COMMON_EXIT_CODES = """exit codes:
  0  success
  1  a quality gate failed
  2  usage error: bad arguments, unreadable input, unwritable output
  3  evaluations failed (see ragpulse eval --help)"""


class _UsageError(Exception):
    """A problem with what the user asked for; reported in one line, exit code 2."""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's example and exit-code table as written."""


def _console() -> Console:
    # soft_wrap: a long path in a message stays on one line, whatever the terminal width.
    return Console(stderr=True, soft_wrap=True, highlight=False)


# --- ragpulse eval -------------------------------------------------------------------


def _print(console: Console, message: str, style: str = "") -> None:
    """One message line, as written: no markup, no wrapping, credentials scrubbed."""
    console.print(scrub_secrets(message), style=style or None, markup=False)
