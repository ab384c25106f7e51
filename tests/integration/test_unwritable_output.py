"""An output file that cannot be written: said at ``configure()``, counted, and never a
successful flush.

A real app process is configured to write its spans to a path no process can write (a
directory, a path under ``/proc``), makes three evaluated requests and flushes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragpulse import semconv
from ragpulse.outputs.delivery import DROP_UNWRITABLE

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 3

APP = f"""
import sys
import ragpulse

handle = ragpulse.configure(service_name="unwritable-app")
print("configured", file=sys.stderr, flush=True)


@ragpulse.rag(name="support-bot")
def answer(question):
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."


for n in range({REQUESTS}):
    answer(f"q-{{n}}")
print("flushed", handle.force_flush(30.0), flush=True)
handle.shutdown(30.0)
"""


@dataclass
class Run:
    path: Path
    stdout: str
    stderr: str


def run_app(tmp_path: Path, output: Path) -> Run:
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    env.update(PYTHONPATH=str(ROOT / "src"), RAGPULSE_OUTPUT_FILE=str(output))
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard
    )
    assert done.returncode == 0, done.stderr  # the application is not disturbed
    return Run(output, done.stdout, done.stderr)


@pytest.fixture(params=["directory", "proc"])
def unwritable(request: pytest.FixtureRequest, tmp_path: Path) -> Run:
    if request.param == "directory":
        output = tmp_path / "out"
        output.mkdir()
    else:
        output = Path("/proc/no-such-process/traces.jsonl")
    return run_app(tmp_path, output)


def test_an_unwritable_output_file_is_a_warning_at_configure_naming_path_reason_and_outcome(
    unwritable: Run,
) -> None:
    before_configure_returned = unwritable.stderr.split("configured")[0]
    [warning] = [
        line
        for line in before_configure_returned.splitlines()
        if f"spans to {unwritable.path} (" in line
    ]
    reason = "Is a directory" if unwritable.path.name == "out" else "No such file or directory"
    assert reason in warning
    assert "dropped" in warning and semconv.METRIC_EXPORT_DROPPED in warning


def test_force_flush_is_false_while_spans_are_lost_to_an_unwritable_file(unwritable: Run) -> None:
    assert unwritable.stdout.split() == ["flushed", "False"]


def test_spans_lost_to_an_unwritable_file_are_counted(tmp_path: Path) -> None:
    output = tmp_path / "out"
    output.mkdir()  # the spans' file is a directory; the metrics file beside it is writable
    run_app(tmp_path, output)
    dropped: dict[tuple[str, str], float] = {}
    for line in (tmp_path / "out-metrics.jsonl").read_text(encoding="utf-8").splitlines():
        for rm in json.loads(line)["resourceMetrics"]:
            for sm in rm["scopeMetrics"]:
                for metric in sm["metrics"]:
                    if metric["name"] != semconv.METRIC_EXPORT_DROPPED:
                        continue
                    for point in metric["sum"]["dataPoints"]:
                        labels = {a["key"]: a["value"]["stringValue"] for a in point["attributes"]}
                        key = (
                            labels[semconv.ATTR_EXPORT_SIGNAL],
                            labels[semconv.ATTR_EXPORT_REASON],
                        )
                        dropped[key] = float(point["asInt"])  # cumulative: the last one counts
    assert dropped == {("traces", DROP_UNWRITABLE): REQUESTS}
