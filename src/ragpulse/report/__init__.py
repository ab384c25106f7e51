"""``ragpulse report``: one self-contained HTML page that shows why each answer scored as it did.

It reads ``ragpulse eval`` output (joined with its input for the texts) or the
OTLP-JSON trace lines ``configure()`` writes, and shows per-metric
distributions and pass rates by slice, counts by status, a sortable and
filterable request list, and for one request each claim beside its evidence.
Given two runs it also shows how each metric's distribution shifted and which
requests' verdicts changed. The page needs no network: style, script and data
are inlined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ragpulse.report._data import compare_data, run_data
from ragpulse.report._eval_output import read_inputs
from ragpulse.report._evaluations import request_from_evaluation, run_from_evaluations
from ragpulse.report._feedback_events import add_feedback, read_feedback
from ragpulse.report._load import RunFileError, load_run
from ragpulse.report._model import ReportClaim, ReportContext, ReportRequest, Run
from ragpulse.report._render import render_page

__all__ = [
    "ReportClaim",
    "ReportContext",
    "ReportRequest",
    "Run",
    "RunFileError",
    "build_report",
    "load_runs",
    "request_from_evaluation",
    "run_from_evaluations",
    "write_report",
]


def load_runs(
    paths: Sequence[Path], inputs: Sequence[Path] = (), feedback: Sequence[Path] = ()
) -> list[Run]:
    """Read one or two runs; ``inputs`` are the evaluated records (one for all runs, or one each);
    ``feedback`` OTLP-JSON files whose ``ragpulse.feedback`` events join the requests they name.

    Raises ``OSError`` for an unreadable file and ``RunFileError`` for one of another kind.
    """
    if len(inputs) > 1 and len(inputs) != len(paths):
        raise RunFileError("give one --input for all runs, or one per run")
    records = [read_inputs(path) for path in inputs]
    runs = []
    for k, path in enumerate(paths):
        joined = records[k] if len(records) > 1 else (records[0] if records else None)
        try:
            runs.append(load_run(path, joined))
        except RunFileError as exc:
            raise RunFileError(f"{path}: {exc}") from None
    if feedback:
        add_feedback(runs, [read_feedback(path) for path in feedback])
    return runs


def build_report(runs: Sequence[Run], thresholds: Mapping[str, float] | None = None) -> str:
    """The HTML page of one run, or the comparison of two (before, after)."""
    if not 1 <= len(runs) <= 2:
        raise ValueError("a report shows one run, or compares two")
    limits = dict(thresholds or {})
    rows, details = [], []
    for run in runs:
        data, detail = run_data(run, limits)
        rows.append(data)
        details.append(detail)
    compare = compare_data(runs[0], runs[1]) if len(runs) == 2 else None
    title = "ragpulse report: " + " → ".join(run.name for run in runs)
    return render_page(title, {"runs": rows, "compare": compare}, details)


def write_report(
    paths: Sequence[Path],
    output: Path,
    *,
    inputs: Sequence[Path] = (),
    thresholds: Mapping[str, float] | None = None,
    feedback: Sequence[Path] = (),
) -> list[Run]:
    """Read the runs at ``paths``, write their page to ``output``, return the runs read."""
    runs = load_runs(paths, inputs, feedback)
    # Encoded whole before the file is opened: a page that cannot be written leaves none.
    output.write_bytes(build_report(runs, thresholds).encode("utf-8"))
    return runs
