"""A known set for human feedback: requests the judge passes or fails, and people's verdicts.

``run_app`` runs ``tests/integration/apps/feedback_app.py`` on ``PLAN`` in its own process
(``configure()`` as the environment says: files in ``cwd``, or an OTLP endpoint); ``EXPECTED``
is the agreement of judge and people on it, worked out by hand below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "tests" / "integration" / "apps" / "feedback_app.py"

# Groundedness: the judge passes the five grounded answers and fails the five drifted ones.
# People pass four of the grounded and one of the drifted:
#   judge pass / people pass 4, judge pass / people fail 1, judge fail / people pass 1,
#   judge fail / people fail 4 (n = 10).
#   observed agreement p_o = (4 + 4) / 10 = 0.8
#   chance agreement   p_e = P(judge pass) P(people pass) + P(judge fail) P(people fail)
#                          = 0.5 * 0.5 + 0.5 * 0.5 = 0.5
#   kappa = (p_o - p_e) / (1 - p_e) = 0.3 / 0.5 = 0.6
# Overall (feedback without a metric), on four requests: the judge passes the two grounded
# (every metric it scored passes) and fails the two drifted; people pass both grounded and
# one drifted: p_o = 3 / 4 = 0.75, p_e = 0.5 * 0.75 + 0.5 * 0.25 = 0.5, kappa = 0.25 / 0.5 = 0.5.
# One more event carries a label that is no verdict (thumbs_up): it is not compared.
PLAN: list[dict[str, Any]] = [
    {"grounded": True, "groundedness": 1.0, "overall": 1.0, "target": "span",
     "comment": "Right, and my SSN 078-05-1120 is on file"},
    {"grounded": True, "groundedness": 0.8, "overall": None, "label": "pass", "target": "ids"},
    {"grounded": True, "groundedness": 0.5, "target": "trace"},
    {"grounded": True, "groundedness": 0.9, "target": "span"},
    {"grounded": True, "groundedness": 0.2, "target": "ids", "label": "thumbs_up"},
    {"grounded": False, "groundedness": 0.0, "overall": 0.0, "target": "span",
     "comment": "Wrong hours"},
    {"grounded": False, "groundedness": 0.1, "overall": 0.75, "target": "trace"},
    {"grounded": False, "groundedness": 0.3, "target": "ids"},
    {"grounded": False, "groundedness": 0.6, "target": "span"},
    {"grounded": False, "groundedness": 0.4, "target": "span"},
]  # fmt: skip
EXPECTED = {
    # metric: (pairs, agreement, kappa, judge pass, people pass)
    "groundedness": (10, 0.8, 0.6, 5, 5),
    "overall": (4, 0.75, 0.5, 2, 3),
}


def app_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment a subprocess of the tests runs in: this checkout, and `extra`."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **extra}
    for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        if key not in extra:
            env.pop(key, None)
    return env


def run_app(
    cwd: Path, env: dict[str, str] | None = None, plan: list[dict[str, Any]] | None = None
) -> list[str]:
    """Run the app on ``plan`` (PLAN by default); returns the span ids of its requests, in order."""
    done = subprocess.run(
        [sys.executable, str(APP), json.dumps(PLAN if plan is None else plan)],
        cwd=cwd,
        env=app_env(env or {}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    ids: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return ids
