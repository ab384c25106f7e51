"""The docs say a thing once, where it belongs, and read as reference."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)


def test_how_to_run_serve_is_shown_on_the_serve_page_alone() -> None:
    showing = {
        page.name
        for page in PAGES
        for block in _SH_BLOCK.findall(page.read_text(encoding="utf-8"))
        if re.search(r"^\s*(OTEL_\w+=\S+ \\\n\s*)?ragpulse serve ", block, re.M)
    }
    assert showing == {"serve.md"}
    for name in ("README.md", "operations.md"):
        page = ROOT / name if name == "README.md" else ROOT / "docs" / name
        assert "serve.md)" in page.read_text(encoding="utf-8"), name


def test_the_reliability_page_reads_as_reference_not_as_a_changelog() -> None:
    text = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    for phrase in ("(before)", "(now)", "today's code", "Until then", "no longer", "since;"):
        assert phrase not in text, phrase
