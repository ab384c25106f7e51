"""The report page driven in a real headless Chromium (Debian's ``chromium`` + ``chromium-driver``).

Pages are built from real runs: the demo run in a subprocess writes its spans to an
OTLP-JSON file, and ``ragpulse report`` turns that file into the page, exactly as a
user would. Selenium gets the driver's path, so it never downloads a browser or driver.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

from ragpulse.cli.main import main
from ragpulse.evaluation.types import (
    Claim,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    Evidence,
    MetricResult,
    Verdict,
)
from ragpulse.offline.evaluate import evaluation_to_json
from ragpulse.report import ReportClaim, Run, load_runs

pytestmark = pytest.mark.integration

CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
CHROMEDRIVER = Path(shutil.which("chromedriver") or "/usr/bin/chromedriver")
REQUESTS = 30
SEED = 3


def _browser_missing() -> str | None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    return f"not installed: {', '.join(missing)}" if missing else None


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    reason = _browser_missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests must run in CI; chromium/chromium-driver {reason}")
        pytest.skip(f"chromium/chromium-driver {reason}")
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _demo(workdir: Path, *args: str) -> Path:
    """Runs the demo offline in its own process; returns its OTLP-JSON traces file.

    The demo's output is kept beside the traces (``demo.out``).
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "OPENAI_", "RAGPULSE_"))
    }
    traces = workdir / "demo-traces.jsonl"
    command = [sys.executable, "-m", "ragpulse.demo", "--requests", str(REQUESTS)]
    command += ["--seed", str(SEED), "--no-table", "--output-file", str(traces), *args]
    proc = subprocess.run(
        command,
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (workdir / "demo.out").write_text(proc.stdout, encoding="utf-8")
    return traces


@dataclass(frozen=True)
class Page:
    path: Path
    runs: list[Run]
    sources: tuple[Path, ...]


def _report(output: Path, *runs: Path, inputs: tuple[Path, ...] = ()) -> Page:
    args = [str(r) for r in runs] + ["-o", str(output)]
    for path in inputs:
        args += ["--input", str(path)]
    assert main(["report", *args]) == 0
    return Page(output, load_runs(list(runs), inputs), runs)


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Page:
    workdir = tmp_path_factory.mktemp("demo")
    traces = _demo(workdir)
    return _report(workdir / "report.html", traces)


def _open(driver: WebDriver, page: Path) -> None:
    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("return document.body.dataset.ready === '1'")
    )


def _click(driver: WebDriver, css: str) -> WebElement:
    element = driver.find_element(By.CSS_SELECTOR, css)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()
    return element


def _open_request(driver: WebDriver, index: int) -> None:
    _click(driver, f"#requests tr[data-index='{index}']")
    WebDriverWait(driver, 10).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, f"#detail[data-index='{index}']")
    )


def test_demo_ends_by_writing_its_report_page_and_printing_its_path(demo_page: Page) -> None:
    folder = demo_page.sources[0].parent
    page = folder / "ragpulse-report.html"
    last = (folder / "demo.out").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert last.startswith("Report (")
    assert last.endswith(str(page.resolve()))
    found = re.search(
        r'<script type="application/json" id="rp-data">(.*?)</script>',
        page.read_text("utf-8"),
        re.S,
    )
    assert found is not None
    (run,) = json.loads(found.group(1))["runs"]
    assert run["n"] == REQUESTS


def test_demo_page_loads_without_network_requests_and_lists_every_request(
    browser: WebDriver, demo_page: Page
) -> None:
    _open(browser, demo_page.path)
    run = demo_page.runs[0]
    assert len(run.requests) == REQUESTS
    rows = browser.find_elements(By.CSS_SELECTOR, "#requests tbody tr")
    assert len(rows) == REQUESTS
    # Nothing was fetched: no script, style, image or font from anywhere.
    fetched = browser.execute_script("return performance.getEntriesByType('resource').length")
    assert fetched == 0
    chips = {
        c.get_attribute("data-status"): int(c.find_element(By.TAG_NAME, "b").text)
        for c in browser.find_elements(By.CSS_SELECTOR, "#status-counts [data-status]")
    }
    assert set(chips) >= {"ok", "no_claims", "error", "skipped", "pending"}
    assert chips["ok"] == sum(r.status == "ok" for r in run.requests)


def _claim_with_evidence(run: Run, verdict: str) -> tuple[int, int, ReportClaim, str]:
    """A claim of ``verdict`` whose passage was recorded, preferring one past the first passage
    (so "the right passage" is not the default one): request index, claim index, claim, passage.
    """
    found = [
        (i, k, c)
        for i, r in enumerate(run.requests)
        for k, c in enumerate(r.claims)
        if c.verdict == verdict and c.context_index is not None and c.start is not None
    ]
    assert found, f"the demo run has no {verdict} claim with its passage"
    i, k, claim = max(found, key=lambda item: item[2].context_index or 0)
    contexts = run.requests[i].contexts
    assert contexts is not None and claim.context_index is not None
    passage = contexts[claim.context_index].text
    assert passage is not None
    return i, k, claim, passage


def _select_claim(driver: WebDriver, index: int, claim: int) -> WebElement:
    """Opens request ``index``, clicks its claim in the answer; returns the evidence mark."""
    _open_request(driver, index)
    _click(driver, f"#answer .claim[data-claim='{claim}']")
    marks = driver.find_elements(By.CSS_SELECTOR, "#contexts mark.evidence")
    assert len(marks) == 1
    return marks[0]


def _passage_of(mark: WebElement) -> str | None:
    box = mark.find_element(By.XPATH, "ancestor::div[contains(@class, 'ctx')]")
    return box.get_attribute("data-index")


def test_selecting_a_contradicted_claim_highlights_the_conflicting_span_in_its_passage(
    browser: WebDriver, demo_page: Page
) -> None:
    index, k, claim, passage = _claim_with_evidence(demo_page.runs[0], "CONTRADICTED")
    _open(browser, demo_page.path)
    mark = _select_claim(browser, index, k)

    assert _passage_of(mark) == str(claim.context_index)
    assert mark.text == passage[claim.start : claim.end].strip()
    assert "v-CONTRADICTED" in (mark.get_attribute("class") or "")
    panel = browser.find_element(By.ID, "claim-panel").text
    assert f"Conflicting passage: passage [{(claim.context_index or 0) + 1}]" in panel
    # The claim is marked in the answer with its verdict in words, not colour alone.
    span = browser.find_element(By.CSS_SELECTOR, f"#answer .claim[data-claim='{k}']")
    assert span.find_element(By.CLASS_NAME, "vlabel").text == "✗ contradicted"
    legend = browser.find_element(By.ID, "legend").text
    for label in ("supported", "inferred", "not found", "contradicted"):
        assert label in legend


def test_selecting_a_supported_claim_highlights_its_evidence_span_in_its_passage(
    browser: WebDriver, demo_page: Page
) -> None:
    index, k, claim, passage = _claim_with_evidence(demo_page.runs[0], "SUPPORTED")
    _open(browser, demo_page.path)
    mark = _select_claim(browser, index, k)
    assert _passage_of(mark) == str(claim.context_index)
    assert mark.text == passage[claim.start : claim.end].strip()
    assert "v-SUPPORTED" in (mark.get_attribute("class") or "")


def test_a_quoted_evidence_span_is_shown_in_its_whole_sentence(
    browser: WebDriver, tmp_path: Path
) -> None:
    # The judge's span stops inside a sentence ("... for two"); the quote never does.
    passage = "Parts: two years. The warranty covers parts for two years and labour for one."
    start = passage.index("covers")
    end = passage.index(" years and")
    answer = "The warranty covers parts for two years."
    records = tmp_path / "answers.jsonl"
    record = {"id": "w1", "question": "What is covered?", "contexts": [passage], "answer": answer}
    records.write_text(json.dumps(record) + "\n", encoding="utf-8")
    evaluation = _scored(
        {"faithfulness": 1.0},
        claims=(
            ClaimVerdict(
                Claim(answer, 0, len(answer)),
                Verdict.SUPPORTED,
                Evidence(0, start, end, passage[start:end]),
            ),
        ),
    )
    run = _eval_run(tmp_path / "run.jsonl", {"w1": evaluation})
    _open(browser, _report(tmp_path / "report.html", run, inputs=(records,)).path)
    _select_claim(browser, 0, 0)
    quote = browser.find_element(By.CSS_SELECTOR, "#claim-panel .quote")
    assert quote.text == "“The warranty covers parts for two years and labour for one.”"
    assert quote.find_element(By.TAG_NAME, "mark").text == "covers parts for two"


def test_eval_output_with_its_input_shows_the_conflicting_passage_of_a_contradicted_claim(
    browser: WebDriver, tmp_path: Path
) -> None:
    contexts = [
        "Larkspur keeps 30 versions of each file for 90 days.",
        "Encryption keys are rotated every 90 days. Keys live in a hardware module.",
    ]
    answer = "Larkspur keeps 30 versions of each file. Encryption keys are rotated every 180 days."
    records = tmp_path / "answers.jsonl"
    records.write_text(
        json.dumps(
            {
                "id": "r1",
                "question": "How often are keys rotated?",
                "contexts": contexts,
                "answer": answer,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    first = "Larkspur keeps 30 versions of each file."
    second = "Encryption keys are rotated every 180 days."
    conflict = "Encryption keys are rotated every 90 days."
    evaluation = Evaluation(
        status=EvalStatus.OK,
        metrics={"groundedness": MetricResult("groundedness", 0.5)},
        claims=(
            ClaimVerdict(
                Claim(first, 0, len(first)),
                Verdict.SUPPORTED,
                Evidence(0, 0, len(first) - 1, first[:-1]),
            ),
            ClaimVerdict(
                Claim(second, len(first) + 1, len(answer)),
                Verdict.CONTRADICTED,
                Evidence(1, 0, len(conflict), conflict),
            ),
        ),
        judge="lexical",
    )
    output = tmp_path / "run.jsonl"
    output.write_text(json.dumps(evaluation_to_json("r1", evaluation)) + "\n", encoding="utf-8")
    page = _report(tmp_path / "report.html", output, inputs=(records,))

    _open(browser, page.path)
    _open_request(browser, 0)
    claim = browser.find_element(By.CSS_SELECTOR, "#answer .claim[data-verdict='CONTRADICTED']")
    assert "contradicted" in claim.find_element(By.CLASS_NAME, "vlabel").text
    claim.click()

    mark = browser.find_element(By.CSS_SELECTOR, "#contexts mark.evidence")
    box = mark.find_element(By.XPATH, "ancestor::div[contains(@class, 'ctx')]")
    assert box.get_attribute("data-index") == "1"
    assert mark.text == conflict
    assert "v-CONTRADICTED" in (mark.get_attribute("class") or "")
    panel = browser.find_element(By.ID, "claim-panel").text
    assert "Conflicting passage: passage [2]" in panel


def test_filtering_to_failing_faithfulness_lists_only_failing_requests(
    browser: WebDriver, demo_page: Page
) -> None:
    run = demo_page.runs[0]
    failing = [i for i, r in enumerate(run.requests) if r.labels.get("faithfulness") == "fail"]
    assert failing, "the demo's injected faults fail faithfulness"
    _open(browser, demo_page.path)
    Select(browser.find_element(By.ID, "filter-metric")).select_by_value("faithfulness")
    Select(browser.find_element(By.ID, "filter-label")).select_by_value("0")

    rows = browser.find_elements(By.CSS_SELECTOR, "#requests tbody tr")
    shown = sorted(int(r.get_attribute("data-index") or -1) for r in rows)
    assert shown == failing
    cells = browser.find_elements(By.CSS_SELECTOR, "#requests td[data-metric='faithfulness']")
    assert all("fail" in (c.get_attribute("class") or "") for c in cells)
    # Sorted by faithfulness (its header clicked), lowest score at the top.
    _click(browser, "#requests th[data-sort='m:faithfulness']")
    cells = browser.find_elements(By.CSS_SELECTOR, "#requests td[data-metric='faithfulness']")
    scores = [float(c.text) for c in cells]
    assert scores == sorted(scores)


def test_comparison_page_shows_each_metrics_shift_and_the_requests_whose_verdicts_changed(
    browser: WebDriver, demo_page: Page, tmp_path: Path
) -> None:
    before = demo_page.runs[0]
    clean = _demo(tmp_path, "--drift", "0")
    page = _report(tmp_path / "diff.html", clean, clean)  # the same run twice: nothing changed
    _open(browser, page.path)
    assert browser.find_elements(By.CSS_SELECTOR, "#changed tbody tr") == []

    page = _report(tmp_path / "diff.html", demo_page.sources[0], clean)
    _open(browser, page.path)
    assert browser.find_element(By.ID, "tab-compare").get_attribute("aria-selected") == "true"
    cards = browser.find_elements(By.CSS_SELECTOR, "#shift-cards .card")
    assert [c.get_attribute("data-metric") for c in cards] == list(before.metrics)
    grounded = browser.find_element(
        By.CSS_SELECTOR, "#shift-cards .card[data-metric='faithfulness']"
    )
    # Without injected faults faithfulness passes more often.
    assert (
        int(grounded.find_element(By.CSS_SELECTOR, "[data-delta]").get_attribute("data-delta") or 0)
        > 0
    )
    changed = browser.find_elements(By.CSS_SELECTOR, "#changed tbody tr")
    flagged = [
        r
        for r in before.requests
        if any(c.verdict in ("NOT_FOUND", "CONTRADICTED") for c in r.claims)
    ]
    assert len(changed) >= len(flagged) > 0
    changed[0].click()
    details = browser.find_elements(By.CSS_SELECTOR, "#compare-detail section.detail")
    assert [d.get_attribute("data-run") for d in details] == ["0", "1"]
    _click(browser, "#tab-run1")
    assert browser.find_elements(By.CSS_SELECTOR, "#requests tbody tr")


def test_a_claim_citing_a_passage_shows_the_cited_passage_and_whether_the_citation_holds(
    browser: WebDriver, tmp_path: Path
) -> None:
    # Per claim, `ragpulse eval` output names the passages it cites (0-based) and if that holds.
    contexts = ["Refunds take 14 days.", "Support is open on weekdays."]
    answer = "Refunds take 14 days [2]."
    records = tmp_path / "answers.jsonl"
    records.write_text(
        json.dumps({"id": "c1", "question": "Refunds?", "contexts": contexts, "answer": answer})
        + "\n",
        encoding="utf-8",
    )
    claim = {
        "text": answer,
        "answer_start": 0,
        "answer_end": len(answer),
        "verdict": "SUPPORTED",
        "evidence": {"context_index": 0, "start": 0, "end": 20, "text": contexts[0][:20]},
        "cited": [1],
        "citation_holds": False,
    }
    line = {"id": "c1", "status": "ok", "scores": {"citation": 0.0}, "claims": [claim]}
    output = tmp_path / "run.jsonl"
    output.write_text(json.dumps(line) + "\n", encoding="utf-8")
    page = _report(tmp_path / "report.html", output, inputs=(records,))

    _open(browser, page.path)
    mark = _select_claim(browser, 0, 0)
    assert _passage_of(mark) == "0"  # the passage that supports it
    citation = browser.find_element(By.ID, "citation").text
    assert "Cites [2]" in citation and "does not hold" in citation
    cited = browser.find_elements(By.CSS_SELECTOR, "#contexts .ctx.cited")
    assert [c.get_attribute("data-index") for c in cited] == ["1"]


def test_a_request_exported_without_content_opens_and_says_what_is_missing(
    browser: WebDriver, tmp_path: Path
) -> None:
    # configure(capture_content=False): lengths and hashes instead of texts; claims keep offsets.
    def attribute(key: str, value: object) -> dict[str, object]:
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: value}}

    claims = [{"text": "[redacted]", "verdict": "CONTRADICTED", "context_index": 0}]
    claims[0].update({"context_id": "d", "start": 3, "end": 9})
    unit = {
        "traceId": "ab" * 16,
        "spanId": "01" * 8,
        "name": "rag",
        "attributes": [
            attribute("ragpulse.input.question.length", 12),
            attribute("ragpulse.eval.status", "ok"),
            attribute("ragpulse.eval.claims", json.dumps(claims)),
        ],
    }
    documents = [{"id": "d", "content_length": 40, "content_sha256": "00" * 32}]
    retrieval = {
        "traceId": "ab" * 16,
        "spanId": "02" * 8,
        "parentSpanId": "01" * 8,
        "name": "retrieval",
        "attributes": [
            attribute("gen_ai.operation.name", "retrieval"),
            attribute("gen_ai.retrieval.documents", json.dumps(documents)),
        ],
    }
    traces = tmp_path / "traces.jsonl"
    payload = {"resourceSpans": [{"scopeSpans": [{"spans": [unit, retrieval]}]}]}
    traces.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    page = _report(tmp_path / "report.html", traces)

    _open(browser, page.path)
    _open_request(browser, 0)
    _click(browser, "#claims button[data-claim='0']")
    assert "not inside the embedded passage" in browser.find_element(By.ID, "claim-panel").text
    assert "(content not exported)" in browser.find_element(By.ID, "contexts").text
    assert "(not recorded)" in browser.find_element(By.ID, "question").text


# --- edges: abstention, worst-first order, runs with nothing to compare, an empty run ---------


def _scored(scores: dict[str, float | None], **fields: object) -> Evaluation:
    metrics = {m: MetricResult(m, v, f"{m} explained") for m, v in scores.items()}
    return Evaluation(status=EvalStatus.OK, metrics=metrics, judge="lexical", **fields)  # type: ignore[arg-type]


def _eval_run(path: Path, rows: dict[str, Evaluation]) -> Path:
    lines = [json.dumps(evaluation_to_json(i, e)) + "\n" for i, e in rows.items()]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _row_order(driver: WebDriver) -> list[int]:
    rows = driver.find_elements(By.CSS_SELECTOR, "#requests tbody tr")
    return [int(r.get_attribute("data-index") or -1) for r in rows]


def test_the_list_opens_worst_first_by_each_requests_worst_metric(
    browser: WebDriver, tmp_path: Path
) -> None:
    run = _eval_run(
        tmp_path / "run.jsonl",
        {
            "off-question": _scored({"groundedness": 1.0, "relevancy": 0.1}),
            "half-grounded": _scored({"groundedness": 0.5, "relevancy": 1.0}),
            "fine": _scored({"groundedness": 0.9, "relevancy": 0.9}),
        },
    )
    page = _report(tmp_path / "report.html", run)
    _open(browser, page.path)
    # Groundedness alone would put the off-question answer last, among the passing rows.
    assert _row_order(browser) == [0, 1, 2]
    worst = browser.find_element(By.CSS_SELECTOR, "#requests tr[data-index='0'] td[data-worst]")
    assert worst.text == "relevancy 0.10"
    assert "fail" in (worst.get_attribute("class") or "")


def test_an_abstaining_answer_reads_as_an_abstention_with_its_reason(
    browser: WebDriver, tmp_path: Path
) -> None:
    records = tmp_path / "answers.jsonl"
    record = {
        "id": "idk",
        "question": "How often are keys rotated?",
        "contexts": ["Encryption keys are rotated every 90 days."],
        "answer": "I don't know.",
    }
    records.write_text(json.dumps(record) + "\n", encoding="utf-8")
    output = tmp_path / "run.jsonl"
    assert main(["eval", str(records), "--output", str(output)]) == 0
    page = _report(tmp_path / "report.html", output, inputs=(records,))
    _open(browser, page.path)
    status = browser.find_element(By.CSS_SELECTOR, "#requests tr[data-index='0'] td:nth-child(3)")
    assert status.text == "ok · abstained"
    _open_request(browser, 0)
    abstention = browser.find_element(By.ID, "abstention").text
    assert abstention.startswith("abstained, though answerable")
    assert "the passages could answer" in abstention
    explanations = browser.find_element(By.ID, "explanations").text
    assert "groundedness: the answer abstains though the contexts could answer" in explanations


def test_comparison_says_which_run_has_no_scores_instead_of_a_change(
    browser: WebDriver, tmp_path: Path
) -> None:
    before = _eval_run(tmp_path / "before.jsonl", {"r1": _scored({"groundedness": 0.9})})
    after = _eval_run(
        tmp_path / "after.jsonl", {"r1": _scored({"groundedness": 0.9, "relevancy": 0.2})}
    )
    page = _report(tmp_path / "diff.html", before, after)
    _open(browser, page.path)
    card = browser.find_element(By.CSS_SELECTOR, "#shift-cards .card[data-metric='relevancy']")
    rate = card.find_element(By.CLASS_NAME, "rate").text
    assert rate == "pass rate not scored in before.jsonl → 0% in after.jsonl (no change to compare)"
    assert "points" not in card.text
    notes = browser.find_element(By.CSS_SELECTOR, "#view p.notes").text
    assert notes.startswith("1 request in both runs")


def test_a_run_of_one_request_is_counted_in_the_singular(
    browser: WebDriver, tmp_path: Path
) -> None:
    run = _eval_run(tmp_path / "run.jsonl", {"r1": _scored({"groundedness": 0.9})})
    page = _report(tmp_path / "report.html", run)
    _open(browser, page.path)
    assert browser.find_element(By.ID, "row-count").text == "1 of 1 request"


def test_an_empty_run_gets_a_page_that_says_nothing_is_evaluated_yet(
    browser: WebDriver, tmp_path: Path
) -> None:
    empty = tmp_path / "ragpulse-traces.jsonl"
    empty.write_text("", encoding="utf-8")
    page = _report(tmp_path / "report.html", empty)
    _open(browser, page.path)
    assert "Nothing evaluated yet" in browser.find_element(By.ID, "nothing-yet").text
    assert browser.find_elements(By.ID, "requests") == []


def test_the_demos_own_page_offers_every_slice_its_evaluations_carry(
    browser: WebDriver, demo_page: Page
) -> None:
    own = demo_page.sources[0].parent / "ragpulse-report.html"
    _open(browser, own)
    cuts = [
        o.get_attribute("value")
        for o in browser.find_elements(By.CSS_SELECTOR, "#cut option")
        if o.get_attribute("value")
    ]
    assert {"abstained", "cited", "question", "sources"} <= set(cuts)


# --- human feedback beside the judge ---------------------------------------------------------


@pytest.fixture(scope="module")
def feedback_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page of the feedback app's run on the known set of ``tests/cases/feedback_set.py``."""
    from tests.cases.feedback_set import run_app

    workdir = tmp_path_factory.mktemp("feedback")
    run_app(workdir)
    page = workdir / "report.html"
    traces, logs = workdir / "ragpulse-traces.jsonl", workdir / "ragpulse-logs.jsonl"
    assert main(["report", str(traces), "--feedback", str(logs), "-o", str(page)]) == 0
    return page


def test_run_view_shows_how_often_judge_and_people_agree_per_metric(
    browser: WebDriver, feedback_page: Path
) -> None:
    _open(browser, feedback_page)
    rows = {
        row.get_attribute("data-metric"): [
            cell.text for cell in row.find_elements(By.TAG_NAME, "td")
        ]
        for row in browser.find_elements(By.CSS_SELECTOR, "#agreement tbody tr")
    }
    assert rows == {
        "groundedness": ["groundedness", "10", "0.80", "0.60", "5 of 10", "5 of 10"],
        "overall": ["overall", "4", "0.75", "0.50", "2 of 4", "3 of 4"],
    }


def test_request_view_shows_each_person_verdict_beside_the_judge_verdict(
    browser: WebDriver, feedback_page: Path
) -> None:
    _open(browser, feedback_page)
    # The list's "people" column sorts requests where people disagree with the judge first.
    _click(browser, "#requests th[data-sort='feedback']")
    first = browser.find_element(By.CSS_SELECTOR, "#requests tbody tr")
    _open_request(browser, int(first.get_attribute("data-index") or -1))
    rows = browser.find_elements(By.CSS_SELECTOR, "#feedback tbody tr")
    assert rows, "the request with a disagreement shows its feedback"
    disagreeing = [r for r in rows if "disagree" in (r.get_attribute("class") or "")]
    assert disagreeing
    cells = [c.text for c in disagreeing[0].find_elements(By.TAG_NAME, "td")]
    assert cells[3] == "disagree"
    assert {cells[1].split(" · ")[0], cells[2]} <= {"0.20", "0.60", "0.75", "pass", "fail"}


# --- the list at a glance: diagnosis, first failing claim, 1,280 px, only the metrics scored ----

LAPTOP_WIDTH = 1280


@pytest.fixture
def laptop(browser: WebDriver) -> Iterator[WebDriver]:
    """The browser with a viewport exactly 1,280 px wide (a laptop screen)."""
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": LAPTOP_WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        yield browser
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def _scrolls_sideways(driver: WebDriver) -> bool:
    return bool(
        driver.execute_script(
            "const d = document.documentElement;"
            "return d.scrollWidth > d.clientWidth || document.body.scrollWidth > d.clientWidth;"
        )
    )


def _lines(driver: WebDriver, element: WebElement) -> float:
    """How many lines of text ``element`` shows (its height over its line height)."""
    return float(
        driver.execute_script(
            "const s = getComputedStyle(arguments[0]);"
            "return arguments[0].getBoundingClientRect().height / parseFloat(s.lineHeight);",
            element,
        )
    )


def test_the_demo_list_fits_1280_px_without_scrolling_sideways(
    laptop: WebDriver, demo_page: Page
) -> None:
    _open(laptop, demo_page.path)
    assert laptop.execute_script("return document.documentElement.clientWidth") <= LAPTOP_WIDTH
    assert not _scrolls_sideways(laptop)
    table = laptop.find_element(By.ID, "requests")
    right = laptop.execute_script("return arguments[0].getBoundingClientRect().right", table)
    assert right <= LAPTOP_WIDTH
    # Every column, the last verdict counts included, is inside the window.
    headers = laptop.find_elements(By.CSS_SELECTOR, "#requests thead th")
    assert headers[-1].get_attribute("data-sort") == "claims"
    assert all(
        laptop.execute_script("return arguments[0].getBoundingClientRect().right", h) <= right
        for h in headers
    )
    for question in laptop.find_elements(By.CSS_SELECTOR, "#requests td.q .clamp"):
        assert _lines(laptop, question) <= 2.05
    # Each row is named by its record's id, not by its place in the list.
    ids = [c.text for c in laptop.find_elements(By.CSS_SELECTOR, "#requests td.rid")]
    assert ids and ids == [
        c.get_attribute("title") for c in laptop.find_elements(By.CSS_SELECTOR, "#requests td.rid")
    ]
    assert set(ids) <= {r.id for r in demo_page.runs[0].requests}


def _ten_metric_run(tmp_path: Path) -> Path:
    question = "What does the warranty cover " + "and what does it not cover, " * 20 + "exactly?"
    long_word = "https://support.example.com/" + "x" * 300
    failing = "The warranty covers water damage for ten years " + long_word
    answer = "The warranty covers parts for two years. " + failing
    records = tmp_path / "answers.jsonl"
    record = {"id": "w1", "question": question, "contexts": ["Parts: two years."], "answer": answer}
    records.write_text(json.dumps(record) + "\n", encoding="utf-8")
    scores = dict.fromkeys(
        (
            "faithfulness", "groundedness", "correctness", "relevancy", "completeness",
            "citation", "context_relevance", "context_precision", "context_recall",
            "context_utilisation",
        ),
        0.5,
    )  # fmt: skip
    first = "The warranty covers parts for two years."
    evaluation = _scored(
        scores,
        claims=(
            ClaimVerdict(
                Claim(first, 0, len(first)), Verdict.SUPPORTED, Evidence(0, 0, 5, "Parts")
            ),
            ClaimVerdict(Claim(failing, len(first) + 1, len(answer)), Verdict.NOT_FOUND, None),
        ),
        diagnosis="generation_drift",
    )
    run = _eval_run(tmp_path / "run.jsonl", {"w1": evaluation})
    return _report(tmp_path / "report.html", run, inputs=(records,)).path


def test_a_run_of_all_ten_metrics_and_long_texts_fits_1280_px(
    laptop: WebDriver, tmp_path: Path
) -> None:
    _open(laptop, _ten_metric_run(tmp_path))
    assert len(laptop.find_elements(By.CSS_SELECTOR, "#requests th.c-metric")) == 10
    assert not _scrolls_sideways(laptop)
    question = laptop.find_element(By.CSS_SELECTOR, "#requests td.q .clamp")
    assert _lines(laptop, question) <= 2.05
    # The full (list-capped) question is one hover away, the whole of it in the detail.
    assert (question.get_attribute("title") or "").startswith("What does the warranty cover")
    claim = laptop.find_element(By.CSS_SELECTOR, "#requests td.q .first-claim .clamp")
    assert _lines(laptop, claim) <= 2.05
    # Readable, not cut to a few words: two lines of each hold a sentence's worth.
    for text in (question, claim):
        width = laptop.execute_script("return arguments[0].getBoundingClientRect().width", text)
        assert width >= 400, width
    assert len(question.text) >= 80 and len(claim.text) >= 60
    _open_request(laptop, 0)
    assert not _scrolls_sideways(laptop)


def test_a_wide_window_gives_the_list_its_whole_width(browser: WebDriver, tmp_path: Path) -> None:
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1920, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        _open(browser, _ten_metric_run(tmp_path))
        table = browser.find_element(By.ID, "requests")
        right = browser.execute_script("return arguments[0].getBoundingClientRect().right", table)
        assert right >= 1850, right  # no cap short of the window
        question = browser.find_element(By.CSS_SELECTOR, "#requests td.q .clamp")
        width = browser.execute_script(
            "return arguments[0].getBoundingClientRect().width", question
        )
        assert width >= 1000, width
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_each_row_shows_its_diagnosis_and_its_first_failing_claim(
    laptop: WebDriver, demo_page: Page
) -> None:
    run = demo_page.runs[0]
    _open(laptop, demo_page.path)
    seen = set()
    for row in laptop.find_elements(By.CSS_SELECTOR, "#requests tbody tr"):
        request = run.requests[int(row.get_attribute("data-index") or -1)]
        diagnosis = row.find_element(By.CSS_SELECTOR, "td[data-diagnosis]")
        expected = request.slices.get("diagnosis", "")
        assert diagnosis.get_attribute("data-diagnosis") == expected
        if expected:
            assert diagnosis.is_displayed() and diagnosis.text == expected.replace("_", " ")
            seen.add(expected)
        failing = [c for c in request.claims if c.verdict in ("CONTRADICTED", "NOT_FOUND")]
        if not failing:
            assert not row.find_elements(By.CSS_SELECTOR, "td.q .first-claim")
            continue
        cell = row.find_element(By.CSS_SELECTOR, "td.q .first-claim")
        first = min(failing, key=lambda c: c.answer_start if c.answer_start is not None else 1e9)
        assert cell.get_attribute("data-verdict") == first.verdict
        shown = cell.find_element(By.CLASS_NAME, "clamp")
        assert shown.get_attribute("title") == first.text[:160] or first.text.startswith(
            (shown.get_attribute("title") or "")[:150]
        )
        badge = cell.find_element(By.CLASS_NAME, "vlabel").text
        assert badge in ("✗ contradicted", "? not found")
        assert shown.is_displayed() and shown.text
    # The demo injects both kinds of fault, and the list tells them apart.
    assert {"retrieval_miss", "generation_drift"} <= seen


def test_an_eval_run_shows_cards_only_for_the_metrics_it_scored(
    browser: WebDriver, tmp_path: Path
) -> None:
    records = tmp_path / "answers.jsonl"
    lines = [
        {"id": "a", "question": "Where is it?", "contexts": ["In Paris."], "answer": "In Paris."},
        {"id": "b", "question": "How tall?", "contexts": ["It is 330 m."], "answer": "500 m."},
    ]
    records.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    output = tmp_path / "run.jsonl"
    assert main(["eval", str(records), "--output", str(output)]) == 0
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    # Every output line lists every metric, null where it was never asked for.
    assert len(written[0]["scores"]) >= 10
    scored = {m for row in written for m, s in row["scores"].items() if s is not None}
    page = _report(tmp_path / "report.html", output, inputs=(records,))
    _open(browser, page.path)
    cards = browser.find_elements(By.CSS_SELECTOR, "#metric-cards .card")
    assert {c.get_attribute("data-metric") for c in cards} == scored
    assert all("n/a" not in c.text for c in cards)
    headers = browser.find_elements(By.CSS_SELECTOR, "#requests th.c-metric")
    assert {h.get_attribute("data-sort") for h in headers} == {f"m:{m}" for m in scored}


def _agent_line(record_id: str, conversation: str, question: str, result: str, answer: str) -> str:
    call = {"id": f"call-{record_id}", "type": "function", "function": {"name": "search_docs"}}
    messages = [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call-{record_id}", "content": result},
        {"role": "assistant", "content": answer},
    ]
    return json.dumps({"id": record_id, "conversation_id": conversation, "messages": messages})


@pytest.fixture(scope="module")
def agent_page(tmp_path_factory: pytest.TempPathFactory) -> Page:
    folder = tmp_path_factory.mktemp("agent")
    warranty = "The X200 comes with a 2-year limited warranty."
    charger = "The fast charger fills the battery to 80 percent in 30 minutes."
    source = folder / "agent.jsonl"
    lines = [
        _agent_line("a1", "conv-A", "What warranty?", warranty, "A 2-year limited warranty."),
        _agent_line("b1", "conv-B", "Is it waterproof?", "", "Yes, to 50 metres."),
        _agent_line("a2", "conv-A", "And the charger?", charger, "80 percent in 30 minutes."),
    ]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = folder / "out.jsonl"
    assert main(["eval", str(source), "--output", str(output)]) == 0
    return _report(folder / "agent.html", output, inputs=(source,))


def test_a_conversations_turns_are_listed_together_and_open_one_another(
    browser: WebDriver, agent_page: Page
) -> None:
    _open(browser, agent_page.path)
    cells = browser.find_elements(By.CSS_SELECTOR, "#requests tbody td[data-conversation]")
    assert sorted(c.text for c in cells) == ["conv-A · turn 1", "conv-A · turn 2", "–"]
    _click(browser, "#requests th[data-sort='conversation']")
    order = [
        int(str(r.get_attribute("data-index")))
        for r in browser.find_elements(By.CSS_SELECTOR, "#requests tbody tr")
    ]
    assert order == [0, 2, 1]  # conv-A's two turns together, in order; then the others
    _open_request(browser, 0)
    turns = browser.find_elements(By.CSS_SELECTOR, "#conversation li")
    assert [t.get_attribute("data-index") for t in turns] == ["0", "2"]
    assert "And the charger?" in turns[1].text
    turns[1].find_element(By.TAG_NAME, "button").click()
    WebDriverWait(browser, 10).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#detail[data-index='2']")
    )
    tool = browser.find_element(By.CSS_SELECTOR, "#contexts .ctx-head .tool")
    assert tool.get_attribute("data-tool") == "search_docs"
    assert "tool results" in browser.find_element(By.CSS_SELECTOR, "#detail").text


def test_a_failed_tool_is_named_in_its_answers_detail(browser: WebDriver, agent_page: Page) -> None:
    _open(browser, agent_page.path)
    _open_request(browser, 1)
    note = browser.find_element(By.CSS_SELECTOR, "#failed-tools")
    assert "search_docs" in note.text
    assert not browser.find_elements(By.CSS_SELECTOR, "#conversation")  # a conversation of one
