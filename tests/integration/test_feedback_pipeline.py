"""Human feedback end to end: an app configured with ``ragpulse.configure()`` gives feedback on
its own requests; the events reach a real OTLP receiver linked to the request's span, and
``ragpulse calibrate`` and ``ragpulse report`` read them back from the files it wrote.

The known set (``tests/cases/feedback_set.py``): five requests the judge passes on
groundedness and five it fails, with the people's verdicts chosen so the agreement table is
worked out by hand there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.cases.feedback_set import EXPECTED, PLAN, app_env, run_app

from servers.rotel_sink import RotelSink

pytestmark = pytest.mark.integration


def ragpulse_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", *args],
        cwd=cwd,
        env=app_env({}),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The traces and logs files the app wrote (no endpoint: OTLP-JSON files)."""
    cwd = tmp_path_factory.mktemp("feedback-app")
    run_app(cwd)
    assert (cwd / "ragpulse-traces.jsonl").exists() and (cwd / "ragpulse-logs.jsonl").exists()
    return cwd


def _table(stdout: str) -> dict[str, tuple[int, float, float, int, int]]:
    rows = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) == 7 and cells[1].isdigit():
            rows[cells[0]] = (
                int(cells[1]),
                float(cells[2]),
                float(cells[3]),
                int(cells[5]),
                int(cells[6]),
            )
    return rows


def test_feedback_events_reach_the_otlp_receiver_linked_to_the_request_span(
    rotel_sink: RotelSink, tmp_path: Path
) -> None:
    span_ids = run_app(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": rotel_sink.http_endpoint})
    logs = rotel_sink.wait_for_logs(
        lambda got: sum(r.event_name == "ragpulse.feedback" for r in got) >= 15
    )
    events = [r for r in logs if r.event_name == "ragpulse.feedback"]
    units = rotel_sink.wait_for_spans(lambda got: sum(s.name == "support-bot" for s in got) == 10)
    trace_of = {s.span_id: s.trace_id for s in units if s.name == "support-bot"}
    for item, span_id in zip(PLAN, span_ids, strict=True):
        on_request = [r for r in events if r.trace_id == trace_of[span_id]]
        scored = next(r for r in on_request if "ragpulse.feedback.metric" in r.attributes)
        assert scored.attributes["ragpulse.feedback.score"] == item["groundedness"]
        assert scored.attributes["ragpulse.feedback.metric"] == "groundedness"
        # The span id rides on the log record unless the feedback named the trace alone.
        assert (scored.span_id or None) == (None if item["target"] == "trace" else span_id)


def test_calibrate_reports_the_agreement_of_judge_and_people_per_metric(written: Path) -> None:
    done = ragpulse_cli(
        "calibrate", "ragpulse-traces.jsonl", "--feedback", "ragpulse-logs.jsonl",
        "--bootstrap", "200", cwd=written,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = _table(done.stdout)
    assert set(table) == set(EXPECTED)
    for metric, (n, agree, kappa, judge_pass, people_pass) in EXPECTED.items():
        assert table[metric][0] == n
        assert table[metric][1] == pytest.approx(agree, abs=5e-4)
        assert table[metric][2] == pytest.approx(kappa, abs=5e-4)
        assert table[metric][3:] == (judge_pass, people_pass)
    assert "not compared: 1 event whose label is no verdict" in done.stdout


def test_calibrate_prints_a_bootstrap_interval_around_kappa(written: Path) -> None:
    done = ragpulse_cli(
        "calibrate", "ragpulse-traces.jsonl", "--feedback", "ragpulse-logs.jsonl",
        "--bootstrap", "200", cwd=written,
    )  # fmt: skip
    row = next(line for line in done.stdout.splitlines() if line.startswith("groundedness"))
    low, high = (float(x) for x in row.split()[4].split("-", 1))
    assert -1.0 <= low <= 0.6 <= high <= 1.0


def test_a_damaged_line_of_feedback_costs_that_line_and_is_named(
    written: Path, tmp_path: Path
) -> None:
    lines = (written / "ragpulse-logs.jsonl").read_text(encoding="utf-8").splitlines()
    damaged = tmp_path / "logs.jsonl"
    damaged.write_text("\n".join(["{not json", *lines, '["an", "array"]']) + "\n", encoding="utf-8")
    (tmp_path / "traces.jsonl").write_bytes((written / "ragpulse-traces.jsonl").read_bytes())
    done = ragpulse_cli(
        "calibrate", "traces.jsonl", "--feedback", "logs.jsonl", "--bootstrap", "0", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "logs.jsonl: skipped line 1: not JSON" in done.stderr
    assert f"logs.jsonl: skipped line {len(lines) + 2}: not a JSON object" in done.stderr
    assert _table(done.stdout)["groundedness"][0] == 10  # every other line still counted


def test_calibrate_refuses_feedback_with_labelled_records(tmp_path: Path) -> None:
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text(json.dumps({"contexts": ["c"], "answer": "a", "hallucinated": True}) + "\n")
    done = ragpulse_cli("calibrate", "labelled.jsonl", "--feedback", "labelled.jsonl", cwd=tmp_path)
    assert done.returncode == 2
    assert "--feedback goes with the OTLP-JSON traces" in done.stderr


def test_calibrate_on_traces_without_feedback_says_where_the_events_are(written: Path) -> None:
    done = ragpulse_cli("calibrate", "ragpulse-traces.jsonl", cwd=written)
    assert done.returncode == 2
    assert "--feedback LOGS.jsonl" in done.stderr


def _embedded(page: str, element: str) -> Any:
    found = re.search(rf'<script type="application/json" id="{element}">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def report(written: Path) -> tuple[str, str]:
    """What ``ragpulse report --feedback`` said on stderr, and the page it wrote."""
    done = ragpulse_cli(
        "report", "ragpulse-traces.jsonl", "--feedback", "ragpulse-logs.jsonl", "-o", "r.html",
        cwd=written,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr, (written / "r.html").read_text(encoding="utf-8")


def test_report_says_how_many_feedback_events_it_read(report: tuple[str, str]) -> None:
    assert "feedback from ragpulse-logs.jsonl: 15 events" in report[0]


def test_report_shows_each_request_feedback_beside_the_judge_verdict(
    report: tuple[str, str],
) -> None:
    detail = _embedded(report[1], "rp-detail-0")["requests"]
    by_comment = {f[3]: f for request in detail for f in request[10] if f[3]}
    # [metric, score, label, comment, person 1/0/-1, judge 1/0/-1]
    assert by_comment["Wrong hours"] == [None, 0.0, None, "Wrong hours", 0, 0]
    first = next(c for c in by_comment if c.startswith("Right"))
    assert by_comment[first][4:] == [1, 1]


def test_report_summarises_the_agreement_of_judge_and_people(report: tuple[str, str]) -> None:
    run = _embedded(report[1], "rp-data")["runs"][0]
    summary = {row[0]: row[1:] for row in run["fb"]}
    assert summary == {
        metric: [n, agree, kappa, judge, people]
        for metric, (n, agree, kappa, judge, people) in EXPECTED.items()
    }
    # Per request: [people pass, people fail, disagreements with the judge]. People disagree
    # on groundedness twice (0.2 on a grounded answer, 0.6 on a drifted one) and overall once
    # (0.75 on a drifted answer).
    assert sum(row[2] for row in run["fbc"]) == 3


def test_the_comment_leaves_under_the_content_policy(tmp_path: Path) -> None:
    run_app(tmp_path, {"RAGPULSE_CAPTURE_CONTENT": "false"})
    logs = (tmp_path / "ragpulse-logs.jsonl").read_text(encoding="utf-8")
    assert "ragpulse.feedback.comment.length" in logs
    assert "Wrong hours" not in logs and "078-05-1120" not in logs
