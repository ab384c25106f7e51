"""``docs/settings.md``'s tables, rendered from the settings table.

``python -m ragpulse.settings.reference docs/settings.md`` rewrites the page's generated
part (between its two markers) in place; ``tests/unit/test_settings_reference.py`` fails
when the page and the table disagree.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from ragpulse.settings import SOURCES, Settings
from ragpulse.settings.options import OPTIONS_OF

__all__ = ["BEGIN", "END", "render", "rewrite"]

BEGIN = "<!-- generated from the settings table: python -m ragpulse.settings.reference -->"
END = "<!-- end of the generated tables -->"

_CLASS_OF = {group: cls.__name__ for group, cls in OPTIONS_OF.items()}


def _default(value: object) -> str:
    """The default as a Python literal (a path as its text)."""
    return f"`{str(value)!r}`" if isinstance(value, Path) else f"`{value!r}`"


def _where(name: str) -> str:
    """Where Python code sets the setting ``name``: a keyword or an options field."""
    source = SOURCES[name]
    if source.place is None:
        return ""
    if source.place == "configure":
        return f"`configure({name}=)`"
    return f"`{_CLASS_OF[source.place]}({source.option or name}=)`"


def render() -> str:
    """The generated part of the page: one table per section, then the serve-only rows."""
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    header = "| setting | set in Python | variable | `ragpulse serve` | default | meaning |"
    rule = "|---|---|---|---|---|---|"
    sections: list[tuple[str, str, list[str]]] = [
        ("`configure()` keywords", "configure", []),
        *[(f"`{_CLASS_OF[g]}` (`configure({g}=...)`)", g, []) for g in _CLASS_OF],
        ("Variables only, and defaults of parts built in code", "", []),
        ("`ragpulse serve`", "serve", []),
    ]
    by_place = {place: rows for _, place, rows in sections}
    for name, source in SOURCES.items():
        place = source.place or ("serve" if name.startswith("serve_") else "")
        cells = [
            f"`{name}`",
            _where(name),
            f"`{source.env}`" if source.env else "",
            f"`{source.flag}`" if source.flag else "",
            _default(defaults[name]),
            source.help,
        ]
        by_place[place].append("| " + " | ".join(cells) + " |")
    parts = [BEGIN]
    for title, _, rows in sections:
        parts += ["", f"### {title}", "", header, rule, *rows]
    parts += ["", END]
    return "\n".join(parts)


def rewrite(page: Path) -> bool:
    """Put ``render()`` between the page's markers; True when the page changed."""
    text = page.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    updated = text[:start] + render() + text[end:]
    if updated != text:
        page.write_text(updated, encoding="utf-8")
    return updated != text


if __name__ == "__main__":
    for argument in sys.argv[1:] or ["docs/settings.md"]:
        print(f"{argument}: {'rewritten' if rewrite(Path(argument)) else 'unchanged'}")
