"""The drop bench on a small stream: a day at 10 % hallucinated RAGTruth answers, then a step
to 30 %, through the shipped rules in a real Prometheus. The full month is the bench's own run
(docs/operations.md); this holds the machinery and the figure a user relies on: the page comes
within two hours of the step and no page comes before it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from tests.cases.ragtruth import ragtruth_dev
from tests.servers.prometheus import PROMETHEUS_NAMES, PROMTOOL_NAMES, REPO, require_binary

pytestmark = pytest.mark.integration

_RESULT = re.compile(
    r"^RESULT page_minutes=(\w+) ticket_minutes=(\w+) false_pages_30d=(\d+) "
    r"false_tickets_30d=(\d+) rate=([0-9.]+)$",
    re.MULTILINE,
)


@pytest.mark.timeout(900)
def test_the_drop_bench_pages_within_two_hours_of_a_step_and_not_before() -> None:
    require_binary(*PROMETHEUS_NAMES)
    require_binary(*PROMTOOL_NAMES)
    data = ragtruth_dev()
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "drop_detection.py"), "--data", str(data),
         "--days", "1", "--after", "3"],
        capture_output=True, text=True, timeout=600, check=False, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = _RESULT.findall(done.stdout)
    page, _ticket, false_pages, _false_tickets, rate = result
    assert rate == "1"
    assert false_pages == "0", done.stdout
    assert page != "none" and int(page) <= 120, done.stdout
