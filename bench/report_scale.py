"""How ``ragpulse report`` pages scale: file size and time to usable in headless Chromium.

Evaluates the RAGTruth dev records beside the repository with the LexicalJudge (synthetic
records of the same shape when the file is absent), then builds pages of 100 (the baseline)
and 10,000 requests by cycling through them, each with its own id, the way a large run
repeats a corpus. For each page it prints the build time, the file size and bytes per
request, and, in Chromium driven by Selenium: the time until the page is drawn (data
parsed, charts and the first 100 rows rendered), the time to open one request (its run's
detail is parsed on that first click), and the time to sort and to filter the whole list.
Ratios compare 10,000 requests with the baseline measured in the same run.

Usage: python bench/report_scale.py [--requests 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from ragpulse.evaluation.types import Context, Evaluation, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.metrics import ALL_METRICS
from ragpulse.report import build_report, run_from_evaluations

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ragtruth_dev.jsonl"
BASELINE = 100


def load_records() -> tuple[list[RagRecord], str]:
    """RAGTruth dev records, or synthetic ones of a similar size."""
    if DATA.exists():
        rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
        records = [
            RagRecord(r["question"], tuple(Context(c) for c in r["context"]), r["answer"])
            for r in rows
        ]
        return records, f"RAGTruth dev ({len(records)} records)"
    rng = random.Random(7)
    words = [f"w{k}" for k in range(3000)]
    records = [
        RagRecord(
            " ".join(rng.choices(words, k=12)) + "?",
            tuple(Context(" ".join(rng.choices(words, k=400))) for _ in range(3)),
            ". ".join(" ".join(rng.choices(words, k=15)) for _ in range(6)) + ".",
        )
        for _ in range(500)
    ]
    return records, "synthetic (500 records)"


async def evaluate(records: list[RagRecord]) -> list[Evaluation]:
    judge = LexicalJudge()
    return [await judge.evaluate(r, ALL_METRICS) for r in records]


def page_for(records: list[RagRecord], evaluations: list[Evaluation], n: int) -> str:
    items = [(f"r{i}", records[i % len(records)], evaluations[i % len(records)]) for i in range(n)]
    return build_report([run_from_evaluations(f"{n} requests", items)])


def browser() -> webdriver.Chrome:
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


TIME_CLICK = """
const t = performance.now();
document.querySelector(arguments[0]).click();
return performance.now() - t;
"""
TIME_SELECT = """
const t = performance.now();
const select = document.querySelector(arguments[0]);
select.value = arguments[1];
select.dispatchEvent(new Event('change'));
return performance.now() - t;
"""


def measure(driver: webdriver.Chrome, path: Path) -> dict[str, float]:
    started = time.perf_counter()
    driver.get(path.as_uri())
    WebDriverWait(driver, 120).until(
        lambda d: d.execute_script("return document.body.dataset.ready === '1'")
    )
    wall = time.perf_counter() - started
    ready = float(driver.execute_script("return Number(document.body.dataset.readyMs)"))
    detail = driver.execute_script(TIME_CLICK, "#requests tbody tr")
    sort = driver.execute_script(TIME_CLICK, "#requests th[data-sort='m:faithfulness']")
    filtered = driver.execute_script(TIME_SELECT, "#filter-verdict", "NOT_FOUND")
    return {
        "ready_ms": ready,
        "wall_s": wall,
        "open_ms": float(detail),
        "sort_ms": float(sort),
        "filter_ms": float(filtered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    records, source = load_records()
    evaluations = asyncio.run(evaluate(records))
    print(f"records: {source}")
    results: dict[int, dict[str, Any]] = {}
    driver = browser()
    try:
        with tempfile.TemporaryDirectory() as folder:
            for n in (BASELINE, args.requests):
                started = time.perf_counter()
                page = page_for(records, evaluations, n)
                build = time.perf_counter() - started
                path = Path(folder) / f"report-{n}.html"
                path.write_text(page, encoding="utf-8")
                size = path.stat().st_size
                results[n] = {"build_s": build, "bytes": size, **measure(driver, path)}
    finally:
        driver.quit()
    print(
        f"{'requests':>9} {'build s':>8} {'size MB':>8} {'B/request':>10} {'drawn ms':>9} "
        f"{'open ms':>8} {'sort ms':>8} {'filter ms':>9}"
    )
    for n, r in results.items():
        print(
            f"{n:>9} {r['build_s']:>8.2f} {r['bytes'] / 1e6:>8.2f} {r['bytes'] / n:>10.0f} "
            f"{r['ready_ms']:>9.0f} {r['open_ms']:>8.0f} {r['sort_ms']:>8.0f} "
            f"{r['filter_ms']:>9.0f}"
        )
    big, base = results[args.requests], results[BASELINE]
    print(
        f"RESULT requests={args.requests} bytes={big['bytes']} "
        f"bytes_per_request={big['bytes'] / args.requests:.0f} "
        f"drawn_ms={big['ready_ms']:.0f} open_ms={big['open_ms']:.0f} "
        f"sort_ms={big['sort_ms']:.0f} filter_ms={big['filter_ms']:.0f} "
        f"drawn_ratio={big['ready_ms'] / base['ready_ms']:.2f} "
        f"size_ratio={big['bytes'] / base['bytes']:.1f}"
    )


if __name__ == "__main__":
    main()
