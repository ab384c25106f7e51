"""Makes the README's screenshots: the report page, and Phoenix showing an evaluated span.

Both are real runs driven in headless Chromium through Selenium (Debian's ``chromium`` and
``chromium-driver``; nothing is downloaded):

- ``docs/report-request.png`` and ``docs/report-overview.png``: the demo, run offline in its
  own process, writes ``ragpulse-report.html``; the page is opened, the worst request with
  a flagged claim is selected, and the claim is clicked so its evidence shows in its passage.
- ``docs/phoenix-span.png``: Arize Phoenix (``.phoenix-venv``, started as the tests start it)
  receives a few demo requests over OTLP from ``configure(inline_annotations=True)`` with
  ``PhoenixAnnotations``; the evaluated ``@rag`` span is opened in Phoenix's trace view.

Usage: python scripts/readme_screenshots.py [--only report|phoenix]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))

from tests.servers.phoenix import PhoenixServer  # noqa: E402


def browser(width: int, height: int) -> WebDriver:
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={width},{height}")
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def offline_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "RAGPULSE_"))
    }
    env.update(extra)
    return env


def wait(driver: WebDriver, condition: Callable[[WebDriver], object], timeout: float = 30) -> None:
    WebDriverWait(driver, timeout).until(condition)


# The worst request with a claim that is CONTRADICTED (else NOT_FOUND), and the claim to show:
# the flagged claim when its passage is recorded, else a claim that has one.
PICK = """
const rows = [...document.querySelectorAll('#requests tbody tr')];
for (const verdict of ['CONTRADICTED', 'NOT_FOUND']) {
  const k = RUNS[0].verdicts.indexOf(verdict), w = RUNS[0].verdicts.length;
  const row = rows.find((r) => RUNS[0].vc[Number(r.dataset.index) * w + k] > 0);
  if (row) return Number(row.dataset.index);
}
return Number(rows[0].dataset.index);
"""


def report_screenshots() -> None:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        subprocess.run(
            [sys.executable, "-m", "ragpulse.demo", "--no-table", "--output-file", "t.jsonl"],
            cwd=work,
            env=offline_env(),
            check=True,
            capture_output=True,
        )
        page = work / "ragpulse-report.html"
        driver = browser(1400, 900)
        try:
            driver.get(page.as_uri())
            wait(driver, lambda d: d.execute_script("return document.body.dataset.ready"))
            # Each metric cut by how many passages its supported claims draw on.
            Select(driver.find_element(By.ID, "cut")).select_by_value("sources")
            driver.save_screenshot(str(DOCS / "report-overview.png"))
            index = driver.execute_script(PICK)
            driver.find_element(By.CSS_SELECTOR, f"#requests tr[data-index='{index}']").click()
            buttons = driver.find_elements(By.CSS_SELECTOR, "#claims button")
            flagged = [
                b
                for b in buttons
                if b.get_attribute("data-verdict") in ("CONTRADICTED", "NOT_FOUND")
            ]
            flagged[0].click()
            if not driver.find_elements(By.CSS_SELECTOR, "#contexts mark.evidence"):
                # No passage recorded for the flagged claim: show one that has its evidence.
                for button in driver.find_elements(By.CSS_SELECTOR, "#claims button"):
                    button.click()
                    if driver.find_elements(By.CSS_SELECTOR, "#contexts mark.evidence"):
                        break
            detail = driver.find_element(By.ID, "detail")
            driver.set_window_size(1400, detail.size["height"] + 200)
            detail.screenshot(str(DOCS / "report-request.png"))
        finally:
            driver.quit()


APP = textwrap.dedent(
    """
    import ragpulse
    from ragpulse.demo.app import SupportBot
    from ragpulse.demo.generator import ExtractiveGenerator
    from ragpulse.demo.retriever import Bm25Retriever
    from ragpulse.judges import LexicalJudge
    from ragpulse.outputs.phoenix import PhoenixAnnotations
    import sys

    annotations = PhoenixAnnotations(sys.argv[1])
    handle = ragpulse.configure(
        service_name="larkspur-support-bot",
        judge=LexicalJudge(),
        sample_rate=1.0,
        inline_annotations=True,
        on_evaluation=annotations,
    )
    bot = SupportBot(Bm25Retriever(), ExtractiveGenerator(), faulty=frozenset({0}), seed=5)
    bot.ask(0, "How often are encryption keys rotated?")
    handle.force_flush()
    handle.shutdown()
    """
)


def phoenix_screenshot() -> None:
    with PhoenixServer() as phoenix:
        env = offline_env(
            OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.otlp_http_endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        )
        subprocess.run(
            # Phoenix takes traces only: the metrics and logs exports it refuses are not shown.
            [sys.executable, "-c", APP, phoenix.base_url],
            env=env,
            check=True,
            timeout=120,
            capture_output=True,
        )
        deadline = time.monotonic() + 60
        spans: list = []
        while time.monotonic() < deadline:
            spans = [s for s in phoenix.spans() if s["name"] == "support-bot"]
            if spans:
                break
            time.sleep(0.5)
        (span,) = spans
        trace_id = span["context"]["trace_id"]
        driver = browser(1800, 900)
        try:
            driver.get(f"{phoenix.base_url}/projects")
            wait(driver, lambda d: d.find_elements(By.PARTIAL_LINK_TEXT, "default"), 60)
            driver.find_element(By.PARTIAL_LINK_TEXT, "default").click()
            wait(driver, lambda d: "/projects/" in d.current_url)
            project = driver.current_url.split("/projects/")[1].split("/")[0]
            driver.get(f"{phoenix.base_url}/projects/{project}/traces/{trace_id}")
            wait(driver, lambda d: d.find_elements(By.XPATH, "//*[text()='support-bot']"), 60)
            # Open the annotations as a table: each metric's score, label and explanation.
            table = "//*[normalize-space(text())='Table']"
            heading = "//*[normalize-space(text())='Annotations']"
            wait(driver, lambda d: d.find_elements(By.XPATH, heading), 60)
            time.sleep(1)
            for _ in range(5):
                if driver.find_elements(By.XPATH, table):
                    break
                driver.find_element(By.XPATH, heading).click()
                time.sleep(1)
            driver.find_element(By.XPATH, table).click()
            time.sleep(2)
            driver.save_screenshot(str(DOCS / "phoenix-span.png"))
        finally:
            driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("report", "phoenix"))
    args = parser.parse_args()
    DOCS.mkdir(exist_ok=True)
    if args.only in (None, "report"):
        report_screenshots()
        print(DOCS / "report-overview.png", DOCS / "report-request.png")
    if args.only in (None, "phoenix"):
        phoenix_screenshot()
        print(DOCS / "phoenix-span.png")


if __name__ == "__main__":
    main()
