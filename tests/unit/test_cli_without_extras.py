"""The ``ragpulse`` command works on the light install (``make demo`` installs only the demo
and prometheus extras): no subcommand may need another extra just to be listed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs the command with the serve extra's packages made unimportable.
WITHOUT_SERVE_EXTRA = """
import sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"uvicorn", "grpc"}:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Missing())
from ragpulse.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_SERVE_EXTRA, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_the_command_and_its_help_work_without_the_serve_extra() -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    assert "serve" in done.stdout and "demo" in done.stdout


def test_ragpulse_serve_without_its_extra_says_what_to_install() -> None:
    done = run("serve", "--http", "127.0.0.1:0")
    assert done.returncode == 2
    assert "serve extra is not installed" in done.stderr
    assert "Traceback" not in done.stderr
