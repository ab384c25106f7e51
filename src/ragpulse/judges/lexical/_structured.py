"""Structured contexts read as facts of any schema: JSON, ``key: value`` lines, tables.

Retrieved contexts are often data rather than prose: an API payload, a product record,
a config excerpt, a Markdown or CSV table. Each value in them is a fact named by the
path of keys above it (``("attributes", "parking", "garage")`` for JSON, the row label
and the column header for a table). Facts keep the character range of their key and
value in the context, so a verdict that rests on one can cite it as evidence.

Nothing here knows a schema: keys are whatever the data calls them, values are read
as yes/no (``true``, ``"yes"``, ``false``, ``"no"``), unknown (``null``, empty) or text.
The work is linear in the context and bounded by ``MAX_FACTS`` per context.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["MAX_FACTS", "Fact", "read_facts"]

MAX_FACTS = 5_000
"""Facts read from one context at most (bounds the work on huge payloads)."""
MAX_STRUCTURED_CHARS = 500_000
"""Contexts longer than this are not parsed as data (they are still read as text)."""
_MAX_DEPTH = 16
_TRUE = frozenset({"true", "yes", "y"})
_FALSE = frozenset({"false", "no", "n"})
_UNKNOWN = frozenset({"null", "none", "n/a", "na", "unknown", "-", ""})

# A ``key: value`` line: a short key (at most six words), then the value. List bullets
# may lead it; a key with nothing after the colon opens a nested block.
_KEY_VALUE = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-*•][ \t]+)?(?P<key>[^\W\d][\w .'/()&+-]{0,60}?)[ \t]*[:=]"
    r"(?:[ \t]+(?P<value>\S[^\n]*?))?[ \t]*$",
    re.MULTILINE,
)
_MAX_KEY_WORDS = 6
_MAX_VALUE_CHARS = 120
_TABLE_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LOOKAHEAD = 20_000
_JSON_SCALAR = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null')


@dataclass(frozen=True, slots=True)
class Fact:
    """One value of a structured context, named by its path of keys."""

    path: tuple[str, ...]
    """Keys from the outermost to the value's own (table: row label, column header)."""
    value: bool | str | None
    """True/False for yes/no values, None for unknown ones, else the text as written."""
    start: int
    """Where the fact's key (or first cell) starts in the context."""
    end: int
    """Where its value ends."""
    group: bool = False
    """Whether its siblings are all yes/no or unknown values (a group of flags)."""
    beside_flags: bool = False
    """Whether a sibling is a yes/no value (an unknown here is an unknown yes/no)."""

    @property
    def key(self) -> str:
        """The value's own key."""
        return self.path[-1] if self.path else ""


def _scalar(text: str) -> bool | str | None:
    lowered = text.strip().strip("\"'").strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    if lowered in _UNKNOWN:
        return None
    return text.strip()


def read_facts(text: str) -> list[Fact]:
    """The facts of a structured context; empty for prose."""
    if len(text) > MAX_STRUCTURED_CHARS:
        return []
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        facts = _json_facts(text)
        if facts is not None:
            return facts
    facts = list(_table_facts(text))
    if not facts:
        facts = _csv_facts(text)
    facts.extend(_key_value_facts(text))
    return facts[:MAX_FACTS]


# --- JSON --------------------------------------------------------------------------


class _Locator:
    """Finds each parsed key and value in the JSON text, in document order (one pass)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.cursor = 0

    def key(self, key: str) -> int:
        pattern = re.compile(re.escape(json.dumps(key, ensure_ascii=False)) + r"\s*:\s*")
        # Keys come in document order, close to the cursor; a key written otherwise (an
        # escape) is not searched for to the end of the text, once per key.
        match = pattern.search(self.text, self.cursor, self.cursor + _LOOKAHEAD)
        if match is None:
            return self.cursor
        self.cursor = match.end()
        return match.start()

    def value(self) -> int:
        match = _JSON_SCALAR.match(self.text, self.cursor)
        if match is None:
            # An array item: skip the comma and blanks before it.
            skip = re.compile(r"[\s,\[]*").match(self.text, self.cursor)
            at = skip.end() if skip is not None else self.cursor
            match = _JSON_SCALAR.match(self.text, at)
        if match is None:
            return self.cursor
        self.cursor = match.end()
        return match.end()


def _json_facts(text: str) -> list[Fact] | None:
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict | list):
        return None
    facts: list[Fact] = []
    _walk_json(parsed, (), _Locator(text), facts, 0)
    return facts


def _is_flag(value: object) -> bool:
    return isinstance(value, bool) or value is None


def _walk_json(
    node: object, path: tuple[str, ...], at: _Locator, facts: list[Fact], depth: int
) -> None:
    if depth > _MAX_DEPTH or len(facts) >= MAX_FACTS:
        return
    if isinstance(node, dict):
        group = bool(node) and all(_is_flag(v) for v in node.values())
        beside = any(isinstance(v, bool) for v in node.values())
        for key, value in node.items():
            start = at.key(str(key))
            child = (*path, str(key))
            if isinstance(value, dict | list):
                _walk_json(value, child, at, facts, depth + 1)
            else:
                end = at.value()
                facts.append(Fact(child, _json_value(value), start, max(end, start), group, beside))
            if len(facts) >= MAX_FACTS:
                return
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, dict | list):
                _walk_json(item, path, at, facts, depth + 1)
            else:
                start = at.cursor
                end = at.value()
                facts.append(Fact(path, _json_value(item), start, max(end, start)))
            if len(facts) >= MAX_FACTS:
                return


def _json_value(value: object) -> bool | str | None:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return _scalar(value)
    return str(value)


# --- key: value lines ----------------------------------------------------------------


def _key_value_facts(text: str) -> Iterator[Fact]:
    # A stack of (indent, key) for nested blocks ("hours:" then indented day lines).
    parents: list[tuple[int, str]] = []
    for match in _KEY_VALUE.finditer(text):
        key = match.group("key").strip()
        if len(key.split()) > _MAX_KEY_WORDS or "|" in match.group(0):
            continue
        indent = len(match.group("indent").expandtabs(4))
        while parents and parents[-1][0] >= indent:
            parents.pop()
        value = match.group("value")
        if value is not None and len(value) > _MAX_VALUE_CHARS:
            continue  # a labelled paragraph ("Passage 1: ..."), not a value
        path = (*(k for _, k in parents), key)
        if value is None:
            parents.append((indent, key))
            continue
        yield Fact(path, _scalar(value), match.start("key"), match.end("value"))


# --- tables --------------------------------------------------------------------------


def _cells(line: str, offset: int, separator: str) -> list[tuple[str, int, int]]:
    """Cells of a table line with their offsets in the context."""
    cells = []
    position = 0
    for part in line.split(separator):
        start = offset + position + (len(part) - len(part.lstrip()))
        cells.append((part.strip(), start, start + len(part.strip())))
        position += len(part) + 1
    return cells


def _rows_to_facts(rows: list[list[tuple[str, int, int]]]) -> Iterator[Fact]:
    """A table's cells as facts: (row label, column header), or the row label alone.

    A two-column table is a list of named values (``| Waterproof | no |``): its row
    label names the value. A wider one names each cell by its row and its column.
    """
    header = [cell for cell, _, _ in rows[0]]
    for row in rows[1:]:
        if not row:
            continue
        label, label_start, _ = row[0]
        if len(header) == 2 and len(row) == 2:
            cell, _, cell_end = row[1]
            yield Fact((label,), _scalar(cell), label_start, cell_end)
            continue
        for column, (cell, _, cell_end) in enumerate(row[1:], start=1):
            name = header[column] if column < len(header) else str(column)
            yield Fact((label, name), _scalar(cell), label_start, cell_end)


def _table_facts(text: str) -> Iterator[Fact]:
    """Markdown tables: a header row, a separator row, then data rows."""
    lines = list(re.finditer(r"[^\n]+", text))
    i = 0
    while i + 1 < len(lines):
        head, separator = lines[i], lines[i + 1]
        if "|" in head.group() and _TABLE_SEPARATOR.match(separator.group()):
            rows = [_pipe_cells(head.group(), head.start())]
            j = i + 2
            while j < len(lines) and "|" in lines[j].group():
                rows.append(_pipe_cells(lines[j].group(), lines[j].start()))
                j += 1
            yield from _rows_to_facts(rows)
            i = j
        else:
            i += 1


def _pipe_cells(line: str, offset: int) -> list[tuple[str, int, int]]:
    body_start = line.index("|") + 1 if line.lstrip().startswith("|") else 0
    body = line[body_start:]
    if body.rstrip().endswith("|"):
        body = body.rstrip()[:-1]
    return _cells(body, offset + body_start, "|")


def _csv_facts(text: str) -> list[Fact]:
    """A CSV table: two or more lines with the same number (two or more) of fields."""
    lines = [m for m in re.finditer(r"[^\n]+", text) if m.group().strip()]
    if len(lines) < 2 or "," not in lines[0].group():
        return []
    try:
        parsed = list(csv.reader(m.group() for m in lines))
    except csv.Error:
        return []
    width = len(parsed[0])
    # A quote left open joins the lines after it into one field: not a table row by line.
    if len(parsed) != len(lines) or width < 2 or any(len(row) != width for row in parsed):
        return []
    rows = []
    for match, fields in zip(lines, parsed, strict=True):
        cells, position = [], 0
        for field in fields:
            at = match.group().find(field, position) if field else position
            at = position if at < 0 else at
            cells.append((field.strip(), match.start() + at, match.start() + at + len(field)))
            position = at + len(field)
        rows.append(cells)
    return list(_rows_to_facts(rows))[:MAX_FACTS]
