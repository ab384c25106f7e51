"""Render rules.yaml with other time windows, e.g. seconds instead of minutes for a live test.

rules.yaml stays the only copy of the alert logic; this script rewrites every range selector
(``[15m]``) and every ``for:`` duration through explicit maps and refuses a duration it has no
mapping for, so a new rule cannot keep a production window by accident.

    python render_rules.py rules.yaml > rules.test-windows.yaml

Needs PyYAML.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

# Production window -> test window. The ratios need not be exact; what matters is that the
# windows keep their order (15m < 1h < 1d) so each rule still means the same thing.
TEST_RANGE_WINDOWS: Mapping[str, str] = {"15m": "20s", "1h": "40s", "1d": "2m"}
TEST_FOR_DURATIONS: Mapping[str, str] = {"5m": "2s", "15m": "5s"}

_RANGE_SELECTOR = re.compile(r"\[([0-9]+[smhdwy])\]")


def _rewrite_ranges(expr: str, windows: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        window = match.group(1)
        if window not in windows:
            raise ValueError(f"no test window for range [{window}] in: {expr}")
        return f"[{windows[window]}]"

    return _RANGE_SELECTOR.sub(replace, expr)


def render_rules(
    source: str,
    windows: Mapping[str, str] = TEST_RANGE_WINDOWS,
    for_durations: Mapping[str, str] = TEST_FOR_DURATIONS,
) -> str:
    """Return the rules document ``source`` with its windows and ``for`` durations rewritten."""
    document: dict[str, Any] = yaml.safe_load(source)
    for group in document["groups"]:
        for rule in group["rules"]:
            rule["expr"] = _rewrite_ranges(str(rule["expr"]), windows)
            if "for" in rule:
                duration = str(rule["for"])
                if duration not in for_durations:
                    raise ValueError(f"no test duration for `for: {duration}`")
                rule["for"] = for_durations[duration]
    header = "# Rendered from rules.yaml by render_rules.py with test-sized windows. Do not edit.\n"
    return header + yaml.safe_dump(document, sort_keys=False, width=100)


def main(argv: list[str] | None = None) -> int:
    """Command line: render a rules file with the test windows to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rules", type=Path, help="the rules.yaml to render")
    args = parser.parse_args(argv)
    sys.stdout.write(render_rules(args.rules.read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
