"""docs/settings.md, the options objects, configure() and serve's flags all come from one table."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest

import ragpulse
from ragpulse.settings import GROUPS, SOURCES, Settings
from ragpulse.settings.options import NOT_SETTINGS, OPTION_CLASSES, option_settings, setting_of
from ragpulse.settings.reference import BEGIN, END, render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
OUTPUT_FIELDS = {"rejected"}  # not a setting: the values replaced by their default
SETTINGS = [f for f in dataclasses.fields(Settings) if f.name not in OUTPUT_FIELDS]
GROUP_KEYWORDS = set(GROUPS)
OBJECT_KEYWORDS = {"calibration", "on_evaluation", "sampler", "worker"}


def _generated() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text[text.index(BEGIN) : text.index(END) + len(END)]


def test_the_page_is_the_table_rendered() -> None:
    # Run `python -m ragpulse.settings.reference docs/settings.md` after changing a row.
    assert _generated() == render()


def test_the_table_has_a_row_for_every_settings_field_and_no_other() -> None:
    assert sorted(SOURCES) == sorted(f.name for f in SETTINGS)


@pytest.mark.parametrize("field", SETTINGS, ids=lambda f: f.name)
def test_the_page_gives_each_default_as_the_literal_settings_uses(field: object) -> None:
    name, default = field.name, field.default  # type: ignore[attr-defined]
    row = next(line for line in _generated().splitlines() if line.startswith(f"| `{name}` |"))
    written = ast.literal_eval(re.findall(r"`([^`]+)`", row.split(" | ")[4])[0])
    assert written == (str(default) if isinstance(default, Path) else default)


def test_configure_takes_at_most_twenty_keywords_each_a_row_a_group_or_an_object() -> None:
    keywords = set(inspect.signature(ragpulse.configure).parameters)
    own = {name for name, source in SOURCES.items() if source.place == "configure"}
    assert len(keywords) <= 20
    assert keywords == own | GROUP_KEYWORDS | OBJECT_KEYWORDS


@pytest.mark.parametrize("cls", OPTION_CLASSES, ids=lambda c: c.__name__)
def test_an_options_objects_fields_are_exactly_its_groups_rows(cls: type) -> None:
    rows = {source.option or name for name, source in SOURCES.items() if source.place == cls.group}  # type: ignore[attr-defined]
    fields = {f.name for f in dataclasses.fields(cls)} - NOT_SETTINGS
    assert fields == rows
    assert all(f.default is None for f in dataclasses.fields(cls))


def test_every_group_is_a_configure_keyword_taking_its_options_class() -> None:
    parameters = inspect.signature(ragpulse.configure).parameters
    for cls in OPTION_CLASSES:
        assert cls.__name__ in str(parameters[cls.group].annotation)  # type: ignore[attr-defined]


def test_an_options_field_sets_the_setting_its_row_names() -> None:
    given = option_settings(
        ragpulse.ExportOptions(timeout=3.0),
        ragpulse.JudgeOptions(model="m", nice=5),
        ragpulse.ContentOptions(conventions="genai", redact=str.upper),
    )
    assert given == {
        "export_timeout": 3.0,
        "judge_model": "m",
        "judge_nice": 5,
        "capture_conventions": "genai",
    }
    assert setting_of("bounds", "hold_timeout") == "hold_timeout"


def test_a_mistyped_group_is_refused_at_once() -> None:
    with pytest.raises(TypeError, match="not an options object"):
        option_settings(ragpulse.BoundsOptions(), {"hold_timeout": 3})  # type: ignore[arg-type]


def test_no_setting_has_two_names() -> None:
    # No aliases: each setting is one row, one Python spelling, at most one variable.
    spellings = [
        (source.place, source.option or name)
        for name, source in SOURCES.items()
        if source.place is not None
    ]
    assert len(spellings) == len(set(spellings))
    variables = [source.env for source in SOURCES.values() if source.env]
    assert len(variables) == len(set(variables))
    flags = [source.flag for source in SOURCES.values() if source.flag]
    assert len(flags) == len(set(flags))


def test_serve_has_an_option_for_every_row_that_names_one_checked_by_its_parser() -> None:
    import argparse

    from ragpulse.cli._setting_flags import checked_setting_flags
    from ragpulse.cli.serve import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    for name, source in SOURCES.items():
        if source.flag is not None:
            value = [] if source.flag.startswith("--no-") else ["1"]
            assert getattr(parser.parse_args(["serve", source.flag, *value]), name) is not None
    args = parser.parse_args(
        ["serve", "--hold-timeout", "12", "--no-content", "--drain-timeout", "4.5"]
    )
    assert checked_setting_flags(args) == {
        "hold_timeout": 12.0,
        "capture_content": False,
        "serve_drain_timeout": 4.5,
    }
    with pytest.raises(ValueError, match=r"--buffer-bytes '12x': not a number"):
        checked_setting_flags(parser.parse_args(["serve", "--buffer-bytes", "12x"]))
