"""The ``ragpulse`` command line: one module per command. Library code never imports it."""

from __future__ import annotations

from ragpulse.cli.main import main

__all__ = ["main"]
