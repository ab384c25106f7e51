"""Rewrite docs/judges.md's demo section from what the default ``ragpulse demo`` prints now.

Runs the demo with its defaults (60 requests, seed 7, the lexical judge) in a temporary
directory and rewrites, in "The demo: injected faults and what caught them":

- the per-kind table's caught and false-alarm columns (rows in the order of ``FaultKind``),
  and the number of clean answers the prose names;
- the excerpt: the table's header, the rows of the requests it already shows (chosen by hand:
  one of each kind worth showing), and every line from "Mean scores" on, with the telemetry
  and report paths cut to their file names.

``tests/integration/test_demo.py`` (``test_the_judges_page_quotes_the_default_runs_output``)
fails when the page and the output part; run this, read the diff, commit it.

    python scripts/judges_demo_excerpt.py
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ragpulse.demo.generator import FaultKind

PAGE = Path(__file__).resolve().parents[1] / "docs" / "judges.md"
SECTION = "## The demo: injected faults and what caught them"
_ROW = re.compile(r"^ *(\d+)a? \S")
_KIND = re.compile(r"^  (\w+) +caught (\d+/\d+), signal \w+, false alarms (\d+)/(\d+)$")


def run_demo() -> list[str]:
    """The default run's stdout, piped (so the table is printed whole)."""
    with tempfile.TemporaryDirectory() as directory:
        done = subprocess.run(
            [sys.executable, "-m", "ragpulse.demo"],
            cwd=directory,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
    return [line.rstrip() for line in done.stdout.splitlines()]


def excerpt(printed: list[str], shown: list[str]) -> list[str]:
    """The header, the rows of the requests in ``shown`` and the summary, paths cut."""
    header = next(line for line in printed if " question " in line and line.endswith("flagged"))
    first = printed.index(header)
    table = printed[first : next(i for i in range(first, len(printed)) if not printed[i])]
    rows = [line for line in table if (m := _ROW.match(line)) and m.group(1) in shown]
    start = next(i for i, line in enumerate(printed) if line.startswith("Mean scores"))
    summary = []
    for line in printed[start:]:
        if line.startswith(("  this run wrote", "  and ", "RESULT ")):
            continue  # the files' counts and the line for machines: the page leaves them out
        if line.startswith(("  traces ", "  logs ", "  metrics ")):
            signal, path = line.split()
            line = f"  {signal:<7} {Path(path).name}"
        elif line.startswith("Report ("):
            line = line.rsplit(": ", 1)[0] + ": " + Path(line.rsplit(": ", 1)[1]).name
        summary.append(line)
    return [header, *rows, "", *summary]


def rewrite(page: str, printed: list[str]) -> str:
    head, rest = page.split(SECTION, 1)
    section, tail = rest.split("\n## ", 1)
    by_kind = {m.group(1): m for line in printed if (m := _KIND.match(line))}
    clean = next(m.group(4) for m in by_kind.values())
    rows = iter(FaultKind)

    def row(match: re.Match[str]) -> str:
        found = by_kind[next(rows).value]
        return f"{match.group(1)}| {found.group(2)} | {found.group(3)}/{found.group(4)} |"

    section = re.sub(r"^(\| [^|]+ \| [^|]+ )\| \d+/\d+ \| \d+/\d+ \|$", row, section, flags=re.M)
    section = re.sub(r"on the \d+ clean answers", f"on the {clean} clean answers", section)
    before, block = section.split("```text\n", 1)
    old, after = block.split("```", 1)
    shown = [m.group(1) for line in old.splitlines() if (m := _ROW.match(line))]
    block = "\n".join(excerpt(printed, shown)) + "\n"
    return f"{head}{SECTION}{before}```text\n{block}```{after}\n## {tail}"


def main() -> int:
    PAGE.write_text(rewrite(PAGE.read_text(encoding="utf-8"), run_demo()), encoding="utf-8")
    print(f"rewrote {PAGE.name}; read `git diff docs/judges.md` before committing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
