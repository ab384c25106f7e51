"""pytest fixtures for the real trace receivers: rotel (OTLP sink) and Arize Phoenix.

A missing receiver skips the test on a developer machine and fails it in CI (``CI`` set), so a
CI run can never pass by skipping the proof.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from .phoenix import INSTALL_SCRIPT, PhoenixServer, phoenix_executable
from .rotel_sink import RotelSink, rotel_agent_path


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required when CI is set)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def rotel_binary() -> Path:
    """Path of the ``rotel-agent`` binary from the ``rotel`` package."""
    binary = rotel_agent_path()
    if binary is None:
        _missing("rotel-agent not installed: pip install the project's dev extra")
    return binary


@pytest.fixture
def rotel_sink(rotel_binary: Path) -> Iterator[RotelSink]:
    """A fresh rotel collector that records every span and log record it receives."""
    with RotelSink(binary=rotel_binary) as sink:
        yield sink


@pytest.fixture(scope="session")
def phoenix_server() -> Iterator[PhoenixServer]:
    """One Arize Phoenix for the session, with a throw-away SQLite database."""
    executable = phoenix_executable()
    if executable is None:
        _missing(f"Arize Phoenix not installed: run {INSTALL_SCRIPT}")
    with PhoenixServer(executable) as server:
        yield server


@pytest.fixture
def rotel_to_phoenix(rotel_binary: Path, phoenix_server: PhoenixServer) -> Iterator[RotelSink]:
    """A rotel collector that records traces and forwards them to ``phoenix_server`` (HTTP)."""
    with RotelSink(binary=rotel_binary, forward_to=phoenix_server.otlp_http_endpoint) as sink:
        yield sink
