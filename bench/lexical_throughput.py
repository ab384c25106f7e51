"""LexicalJudge throughput on one core, on RAGTruth-sized inputs.

Evaluates every RAGTruth dev record (``../shared/data/ragtruth_dev.jsonl`` beside the
repository; synthetic records of the same size when it is absent) with all metrics,
in one thread, and compares with a baseline measured in the same run on the same
inputs: a plain ``str.lower().split()`` token-overlap pass. The ratio says how
many baseline passes one lexical evaluation costs, so it travels between machines.

Usage: python bench/lexical_throughput.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ragpulse.evaluation.types import ALL_METRICS, Context, RagRecord
from ragpulse.judges.lexical import LexicalJudge

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ragtruth_dev.jsonl"
TARGET_PER_S = 200.0


def load_records() -> tuple[list[RagRecord], str]:
    """RAGTruth dev records, or synthetic ones of similar size when the file is absent."""
    if DATA.exists():
        rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
        records = [
            RagRecord(r["question"], tuple(Context(c) for c in r["context"]), r["answer"])
            for r in rows
        ]
        return records, "ragtruth_dev"
    rng = random.Random(7)
    words = [f"w{i}" for i in range(3000)]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) + ("." if rng.random() < 0.06 else "") for _ in range(n))

    records = [
        RagRecord("q?", tuple(Context(text(200)) for _ in range(3)), text(120)) for _ in range(576)
    ]
    return records, "synthetic"


def baseline(record: RagRecord) -> float:
    """Share of answer tokens found in the contexts, by plain whitespace splitting."""
    vocabulary = {w for c in record.contexts for w in c.text.lower().split()}
    tokens = (record.answer or "").lower().split()
    return sum(1 for t in tokens if t in vocabulary) / len(tokens) if tokens else 0.0


def per_second(work: Callable[[RagRecord], object], records: Sequence[RagRecord]) -> float:
    started = time.perf_counter()
    for record in records:
        work(record)
    return len(records) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    records, source = load_records()
    judge = LexicalJudge()
    per_second(lambda r: judge.evaluate_sync(r, ALL_METRICS), records[:50])  # warm-up

    judge_rates, baseline_rates = [], []
    for _ in range(args.rounds):
        judge_rates.append(per_second(lambda r: judge.evaluate_sync(r, ALL_METRICS), records))
        baseline_rates.append(per_second(baseline, records))
    judge_rate = statistics.median(judge_rates)
    baseline_rate = statistics.median(baseline_rates)
    chars = statistics.mean(
        sum(len(c.text) for c in r.contexts) + len(r.answer or "") for r in records
    )

    print(f"inputs: {len(records)} {source} records, {chars:.0f} characters each on average")
    print(f"{'pass':<28} {'evals/s (median of ' + str(args.rounds) + ')':>26}")
    print(f"{'LexicalJudge (all metrics)':<28} {judge_rate:>26.1f}")
    print(f"{'baseline lower().split()':<28} {baseline_rate:>26.1f}")
    print(f"target: >= {TARGET_PER_S:.0f} evals/s per core")
    print(
        f"RESULT evals_per_s={judge_rate:.1f} baseline_per_s={baseline_rate:.1f} "
        f"ratio_to_baseline={judge_rate / baseline_rate:.4f} "
        f"meets_target={int(judge_rate >= TARGET_PER_S)} records={len(records)}"
    )


if __name__ == "__main__":
    main()
