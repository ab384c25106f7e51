"""The ``ragpulse`` command works on the light install (``make demo`` installs only the demo
and prometheus extras): no subcommand may need another extra just to be listed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs the command with the packages of an extra made unimportable (the first argument).
WITHOUT_EXTRA = """
import sys

missing = set(sys.argv[1].split(","))

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in missing:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from ragpulse.cli.main import main
sys.exit(main(sys.argv[2:]))
"""
SERVE_EXTRA = "uvicorn,grpc"
DEMO_EXTRA = "rank_bm25"


def run(*argv: str, without: str = SERVE_EXTRA) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, without, *argv],
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


def test_ragpulse_demo_without_its_extra_names_the_extra_to_install() -> None:
    done = run("demo", "--requests", "1", without=DEMO_EXTRA)
    assert done.returncode == 2
    assert "`pip install '.[demo]'` in a checkout" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
