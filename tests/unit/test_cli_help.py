"""Every option of every ``ragpulse`` subcommand says what it does and, once, its default."""

from __future__ import annotations

import argparse

import pytest

from ragpulse.cli.main import _parser, main


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def _help_shown(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The option's help text as ``--help`` prints it (formatter additions included)."""
    return parser._get_formatter()._expand_help(action)


SUBCOMMANDS = sorted(_subcommands())


def test_the_command_has_the_subcommands_these_tests_cover() -> None:
    assert {"eval", "calibrate", "demo", "report", "serve"} <= set(SUBCOMMANDS)


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_option_has_help_text(name: str) -> None:
    parser = _subcommands()[name]
    silent = [a.dest for a in _options(parser) if not (a.help or "").strip()]
    assert silent == [], f"ragpulse {name}: options without help: {silent}"


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_no_option_states_its_default_twice_or_a_default_of_none(name: str) -> None:
    parser = _subcommands()[name]
    for action in _options(parser):
        shown = _help_shown(parser, action)
        assert shown.count("(default") <= 1, f"ragpulse {name} {action.dest}: {shown}"
        assert "(default: None)" not in shown, f"ragpulse {name} {action.dest}: {shown}"


def test_serve_help_shows_the_default_ports(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "(default: 127.0.0.1:4318)" in shown
    assert "(default: 127.0.0.1:4317)" in shown


@pytest.mark.parametrize("rounds", ["-5", "1000000000", "many"])
def test_calibrate_refuses_a_bootstrap_count_out_of_bounds(
    rounds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", "labelled.jsonl", "--bootstrap", rounds]) == 2
    assert "argument --bootstrap" in capsys.readouterr().err


def test_python_dash_m_ragpulse_runs_the_same_command() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ragpulse", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "usage: ragpulse" in done.stdout
