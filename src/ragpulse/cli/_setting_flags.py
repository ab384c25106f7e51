"""Command-line flags made from the settings table: one per row that names a ``flag``.

A flag's help is its row's meaning, its default and its variable; its value is checked by
the row's own parser once the command has loaded what the parser may need (the user's
metric modules), and a bad one is a one-line usage error. A flag left out is read from its
variable, else its default, exactly as ``configure()`` reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import Any

from ragpulse.settings import SOURCES, Invalid, Settings

__all__ = ["add_setting_flags", "checked_setting_flags"]

_DEFAULTS: Mapping[str, object] = {f.name: f.default for f in dataclasses.fields(Settings)}


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value) or "none"
    return "none" if value is None else str(value)


def add_setting_flags(pipeline: Any, service: Any) -> None:
    """Add a flag for every row of the table that names one: a ``ragpulse serve`` setting's
    (a row with no place in Python code) to ``service``, the others to ``pipeline``."""
    for name, source in SOURCES.items():
        if source.flag is None:
            continue
        target = service if source.place is None else pipeline
        meaning = source.plain_help.replace("%", "%%")  # a literal % in argparse's help
        if source.flag.startswith("--no-"):
            # The row says what False means; the flag is that False.
            meaning = meaning.removeprefix("False: ")
            same = f" (as {source.env}=false)" if source.env else ""
            target.add_argument(
                source.flag, dest=name, action="store_const", const=False, help=meaning + same
            )
        else:
            variable = f"; {source.env}" if source.env else ""
            help_text = f"{meaning} (default: {_shown(_DEFAULTS[name])}{variable})"
            metavar = name.rsplit("_", 1)[-1].upper()
            target.add_argument(source.flag, dest=name, metavar=metavar, help=help_text)


def checked_setting_flags(args: argparse.Namespace) -> dict[str, object]:
    """The settings the command line gave, by setting name, each checked by its parser.

    Raises ``ValueError`` naming the flag when a value cannot be used: on a command line a
    bad value is an error, where ``configure()`` logs it and keeps the default.
    """
    given: dict[str, object] = {}
    for name, source in SOURCES.items():
        value = getattr(args, name, None) if source.flag is not None else None
        if value is None:
            continue
        try:
            given[name] = source.parse(value)
        except Invalid as why:
            raise ValueError(f"{source.flag} {value!r}: {why}") from None
    return given
