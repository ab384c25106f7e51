"""No process ragpulse starts outlives the application that started it.

A real app, configured as a user configures one, has a request evaluated with a metric of
its own that hangs for good (its bounds an hour long, so that nothing but the app's end can
stop it). The metric's process writes its pid and its parent's (the judge's process) to a
file. Then the app ends: killed with SIGKILL, or by returning from its script (exit 0, the
hung evaluation abandoned at the shutdown's grace). Both processes must be gone soon after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states in /proc"),
]

ROOT = Path(__file__).resolve().parents[2]
GONE_WITHIN = 60.0  # a bound for the poll, not a pace: they go within a second

METRICS = """
import os
import time
from pathlib import Path

import ragpulse


@ragpulse.metric("hangs", timeout=3600)
def hangs(record):
    Path(os.environ["PID_FILE"]).write_text(f"{os.getpid()} {os.getppid()}")
    while True:
        time.sleep(0.1)
"""

APP = """
import os
import sys
import time
from pathlib import Path

import ragpulse

ragpulse.configure(
    service_name="lifetime-app",
    metrics=("faithfulness", "hangs"),
    evaluation=ragpulse.EvaluationOptions(metric_modules=["hang_metrics.py"]),
    judging=ragpulse.JudgeOptions(evaluation_timeout=3600),
    bounds=ragpulse.BoundsOptions(hold_timeout=3600),
)


@ragpulse.rag(name="support-bot")
def answer(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."


answer("When is support open?")
pid_file = Path(os.environ["PID_FILE"])
deadline = time.monotonic() + 120
while not pid_file.exists() or not pid_file.read_text().strip():
    assert time.monotonic() < deadline, "the metric never ran"
    time.sleep(0.05)
print("hanging", flush=True)
if sys.argv[1] == "wait":
    time.sleep(3600)
"""


def alive(pid: int) -> bool:
    """Running or sleeping: not gone, and not a zombie waiting for a parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


def wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.parametrize("ending", ["sigkill", "exit-0"])
def test_the_judge_and_metric_processes_end_with_the_application(
    tmp_path: Path, ending: str
) -> None:
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    (tmp_path / "hang_metrics.py").write_text(METRICS, encoding="utf-8")
    pid_file = tmp_path / "metric.pid"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    env.update(PYTHONPATH=str(ROOT / "src"), PID_FILE=str(pid_file))
    app = subprocess.Popen(
        [sys.executable, "app.py", "wait" if ending == "sigkill" else "return"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert app.stdout is not None
        assert app.stdout.readline().strip() == "hanging", app.stderr.read() if app.stderr else ""
        metric, judge = map(int, pid_file.read_text().split())
        assert alive(metric) and alive(judge)
        if ending == "sigkill":
            app.send_signal(signal.SIGKILL)
        app.wait(timeout=120)  # exit 0: within the shutdown grace
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    if ending == "exit-0":
        assert app.returncode == 0, app.stderr.read() if app.stderr else ""
    left = wait_gone([metric, judge])
    for pid in left:  # do not leave them behind for the next test either
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after the app ended: {left} (metric {metric}, judge {judge})"


WATCHED = """
import os
import subprocess
import sys
import time

child = subprocess.Popen([sys.executable, "-c", '''
import os, time
from ragpulse.judging._lifeline import die_with_parent
die_with_parent(int(os.environ["PARENT"]), kernel_signal=False)
print("watching", flush=True)
time.sleep(3600)
'''], env={**os.environ, "PARENT": str(os.getpid())}, stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "watching"
print(child.pid, flush=True)
time.sleep(3600)
"""


def test_without_the_kernels_signal_a_process_still_ends_with_its_parent(tmp_path: Path) -> None:
    # The portable watch alone (a process started off the main thread, or not on Linux).
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    parent = subprocess.Popen(
        [sys.executable, "-c", WATCHED], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=60)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    left = wait_gone([child])
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left
