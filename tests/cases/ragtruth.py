"""Where the tests find the RAGTruth development set: beside the repository, never downloaded.

The set lives in ``shared/data/ragtruth_dev.jsonl`` next to the repository's root (CI's clean
clone has it in its parent directory). A linked git worktree sits elsewhere, so the root of
the main worktree is tried too; ``RAGPULSE_RAGTRUTH`` names another file. A test that needs
the set skips without it on a developer's machine and fails under CI (``CI`` set).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELATIVE = Path("shared") / "data" / "ragtruth_dev.jsonl"


def _main_worktree() -> Path | None:
    try:
        common = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=ROOT, capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(common).parent if common else None


def candidates() -> list[Path]:
    """The places tried, in order."""
    found = []
    if os.environ.get("RAGPULSE_RAGTRUTH"):
        found.append(Path(os.environ["RAGPULSE_RAGTRUTH"]))
    found.append(ROOT.parent / RELATIVE)
    main = _main_worktree()
    if main is not None and main != ROOT:
        found.append(main.parent / RELATIVE)
    return found


def ragtruth_dev() -> Path:
    """The RAGTruth development set; skips the test without it (fails it under CI)."""
    for path in candidates():
        if path.is_file():
            return path
    tried = ", ".join(str(p) for p in candidates())
    if os.environ.get("CI"):
        pytest.fail(f"the RAGTruth development set is needed under CI; tried {tried}")
    pytest.skip(f"the RAGTruth development set is not beside the repository (tried {tried})")
