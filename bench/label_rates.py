"""What the pass/fail labels ``ragpulse eval`` writes mean on answers real LLMs wrote.

Runs ``ragpulse eval`` (every built-in metric, the judge ``--judge`` names) on a labelled
set (RAGTruth's development split by default: ``hallucinated`` per answer) and reads each
output line's ``labels``, exactly as the span would carry them. Per metric it prints how
many answers got a label and, of the correct and of the hallucinated ones, the share
labelled ``fail``; a metric scored without a label says so. The promise a label keeps: at
most 10 % of correct answers ``fail``, hallucinated ones at least twice as often.

Usage: python bench/label_rates.py [--data PATH] [--judge lexical] [-- extra eval options]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ragtruth_dev.jsonl"
METRICS = (
    "faithfulness,groundedness,correctness,relevancy,completeness,citation,"
    "context_relevance,context_precision,context_recall,context_utilisation"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--judge", default="lexical")
    parser.add_argument("extra", nargs="*", help="more `ragpulse eval` options (after --)")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"dataset not found: {args.data} (pass --data)")
    truth = {}
    for line in args.data.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            truth[str(row["id"])] = bool(row["hallucinated"])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        command = [sys.executable, "-m", "ragpulse", "eval", str(args.data), "--judge"]
        command += [args.judge, "--metrics", METRICS, "--output", str(out), *args.extra]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):
            sys.exit(f"ragpulse eval failed ({done.returncode}): {done.stderr[-2000:]}")
        results = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    print(
        f"{args.data.name}: {len(truth)} answers ({sum(truth.values())} hallucinated), "
        f"judge {args.judge}"
    )
    print(
        f"{'metric':<20} {'scored':>6} {'labelled':>8} {'correct fail':>12} "
        f"{'halluc. fail':>12} promise"
    )
    figures: dict[str, str] = {}
    for metric in METRICS.split(","):
        scored = [r for r in results if r["scores"].get(metric) is not None]
        labelled = [r for r in scored if r["labels"].get(metric) is not None]
        if not scored:
            continue
        if not labelled:
            print(f"{metric:<20} {len(scored):>6} {'-':>8} {'unlabelled':>12} {'':>12}")
            figures[f"{metric}_labelled"] = "0"
            continue
        correct = [r for r in labelled if not truth[r["id"]]]
        wrong = [r for r in labelled if truth[r["id"]]]
        false_fail = sum(r["labels"][metric] == "fail" for r in correct) / max(len(correct), 1)
        detection = sum(r["labels"][metric] == "fail" for r in wrong) / max(len(wrong), 1)
        kept = false_fail <= 0.10 and detection > 0 and detection >= 2 * false_fail
        print(
            f"{metric:<20} {len(scored):>6} {len(labelled):>8} {false_fail:>12.1%} "
            f"{detection:>12.1%} {'kept' if kept else 'NOT kept'}"
        )
        figures[f"{metric}_false_fail"] = f"{false_fail:.3f}"
        figures[f"{metric}_detection"] = f"{detection:.3f}"
    print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
