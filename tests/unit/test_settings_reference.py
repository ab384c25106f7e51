"""docs/settings.md lists exactly what ``Settings`` has: fields, keywords, variables, defaults."""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

import ragpulse
from ragpulse.settings import _SOURCES, Settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
HEADER = "| field | keyword | variable | default | meaning |"
OTHER_KEYWORDS_HEADER = "| keyword | meaning |"
# Not a setting: the values that were replaced by their default (documented in the text).
OUTPUT_FIELDS = {"rejected"}


def _table(header: str) -> list[list[str]]:
    """The cells of the rows of the Markdown table that starts with ``header``."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(header) + 2  # skip the |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


ROWS = {_code(row[0])[0]: row for row in _table(HEADER)}
SETTINGS = [f for f in fields(Settings) if f.name not in OUTPUT_FIELDS]


def test_the_page_lists_every_settings_field_and_no_other() -> None:
    assert sorted(ROWS) == sorted(f.name for f in SETTINGS)


@pytest.mark.parametrize("name", [f.name for f in SETTINGS])
def test_a_fields_variables_are_the_ones_settings_reads(name: str) -> None:
    source = _SOURCES[name]
    expected = {env for env in (source.env, source.older_env) if env is not None}
    assert set(_code(ROWS[name][2])) == expected


@pytest.mark.parametrize("field", SETTINGS, ids=lambda f: f.name)
def test_a_fields_default_is_the_one_settings_uses(field: object) -> None:
    name = field.name  # type: ignore[attr-defined]
    default = field.default  # type: ignore[attr-defined]
    assert default is not MISSING
    written = ast.literal_eval(_code(ROWS[name][3])[0])
    assert written == (str(default) if isinstance(default, Path) else default)
    assert type(written) is (str if isinstance(default, Path) else type(default))


def test_every_configure_keyword_is_listed_once() -> None:
    keywords = set(inspect.signature(ragpulse.configure).parameters)
    listed = [k for row in ROWS.values() for k in _code(row[1])]
    listed += [k for row in _table(OTHER_KEYWORDS_HEADER) for k in _code(row[0])]
    assert sorted(listed) == sorted(keywords)


@pytest.mark.parametrize("name", [f.name for f in SETTINGS])
def test_a_field_is_its_own_keyword_exactly_when_configure_takes_it(name: str) -> None:
    keywords = set(inspect.signature(ragpulse.configure).parameters)
    assert (name in _code(ROWS[name][1])) == (name in keywords)
