"""LexicalJudge throughput on one core, on RAGTruth-sized inputs.

Evaluates every RAGTruth dev record (``../shared/data/ragtruth_dev.jsonl`` beside the
repository; synthetic records of the same size when it is absent) with all metrics,
in one thread, and compares with a baseline measured in the same run on the same
inputs: a plain ``str.lower().split()`` token-overlap pass. The ratio says how
many baseline passes one lexical evaluation costs, so it travels between machines.

Then hostile inputs (one huge claim of 20,000 numbers against a JSON record, thousands of
claims with numbers, names or opening hours against twenty long passages) are timed per
1,000 characters of input, as a ratio to the same figure for the RAGTruth records: the
judge's work has to grow with the input, never with its square.

Last, single answers of growing size (0.1 MB to ``--max-mb``, 2 MB by default; pass 50
to try the largest): an answer is the RAGTruth answers and passages run together, judged
against one record's contexts, timed once per size in CPU seconds of this process. The
cost per character at the largest size over that at the smallest says whether the judge is
linear (near 1) or not.

Every figure is CPU seconds of this process (the judge runs in one thread): wall time on
a shared machine measures the neighbours as much as the judge.

Usage: python bench/lexical_throughput.py [--rounds 3] [--max-mb 2]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ragpulse.evaluation.types import Context, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.metrics import ALL_METRICS

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ragtruth_dev.jsonl"
TARGET_PER_S = 200.0


def load_records(data: Path = DATA) -> tuple[list[RagRecord], str]:
    """RAGTruth dev records, or synthetic ones of similar size when the file is absent."""
    if data.exists():
        rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]
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
    started = time.process_time()
    for record in records:
        work(record)
    return len(records) / (time.process_time() - started)


def hostile_records() -> dict[str, RagRecord]:
    """Inputs built to find work that grows faster than the input."""
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    listing = json.dumps({"name": "Cafe Rio", "hours": {d: "9:0-17:0" for d in days}})
    passages = tuple(
        Context(
            " ".join(
                f"In {1900 + i} the Alpha {k} company built {i * k} towers." for i in range(60)
            )
        )
        for k in range(20)
    )
    return {
        "one claim of 20,000 numbers": RagRecord(
            "q", (Context(listing),), " ".join(str(i) for i in range(20_000))
        ),
        "2,000 claims with numbers": RagRecord(
            "q",
            passages,
            " ".join(
                f"The Alpha company built {i} towers in {1900 + i % 60}." for i in range(2000)
            ),
        ),
        "2,000 claims with names": RagRecord(
            "q", passages, " ".join(f"Gamma{i} met Delta{i} in Epsilon." for i in range(2000))
        ),
        "2,000 claims about hours": RagRecord(
            "q", (Context(listing),), "It is open Monday to Sunday from 9 am to 5 pm. " * 2000
        ),
    }


def answer_of(size: int, records: Sequence[RagRecord]) -> str:
    """An answer of ``size`` characters from the records' answers and passages."""
    text = " ".join(
        part for r in records[:200] for part in (r.answer or "", *(c.text for c in r.contexts))
    )
    return (text * (size // max(1, len(text)) + 1))[:size]


def size_sweep(
    judge: LexicalJudge, records: Sequence[RagRecord], max_mb: float
) -> list[tuple[int, float, float]]:
    """(size, judge seconds, baseline seconds) for single answers of growing size."""
    sizes = [s for s in (100_000, 500_000, 2_000_000, 10_000_000, 50_000_000) if s <= max_mb * 1e6]
    contexts = records[1].contexts
    rows = []
    for size in sizes:
        record = RagRecord("q", contexts, answer_of(size, records))
        # CPU seconds of this process: the judge runs in one thread, and wall time on a
        # shared machine measures the neighbours as much as the judge.
        started = time.process_time()
        judge.evaluate_sync(record, ALL_METRICS)
        judged = time.process_time() - started
        started = time.process_time()
        baseline(record)
        rows.append((size, judged, max(time.process_time() - started, 1e-6)))
    return rows


def seconds_per_kchar(judge: LexicalJudge, records: Sequence[RagRecord]) -> float:
    """Seconds of judging per 1,000 characters of answer and contexts."""
    chars = sum(len(r.answer or "") + sum(len(c.text) for c in r.contexts) for r in records)
    started = time.process_time()
    for record in records:
        judge.evaluate_sync(record, ALL_METRICS)
    return (time.process_time() - started) / max(1, chars) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-mb", type=float, default=2.0, help="largest single answer, MB")
    parser.add_argument("--data", type=Path, default=DATA, help="the RAGTruth dev JSONL")
    args = parser.parse_args()
    records, source = load_records(args.data)
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
    typical = seconds_per_kchar(judge, records)
    print(f"\n{'hostile input':<30} {'ms/1k chars':>11} {'x typical':>10}")
    worst = 0.0
    for name, record in hostile_records().items():
        cost = seconds_per_kchar(judge, [record])
        worst = max(worst, cost / typical)
        print(f"{name:<30} {cost * 1000:>11.3f} {cost / typical:>10.1f}")
    print(f"{'RAGTruth records (typical)':<30} {typical * 1000:>11.3f} {1.0:>10.1f}")
    sweep = size_sweep(judge, records, args.max_mb)
    print(
        f"\n{'one answer of':<16} {'cpu s':>9} {'us/char':>9} {'x smallest':>11} {'x baseline':>11}"
    )
    smallest = sweep[0][1] / sweep[0][0]
    for size, judged, base in sweep:
        per_char = judged / size
        print(
            f"{size / 1e6:>12.1f} MB {judged:>9.2f} {per_char * 1e6:>9.2f} "
            f"{per_char / smallest:>11.2f} {judged / max(base, 1e-9):>11.0f}"
        )
    largest_size, largest_s, _ = sweep[-1]
    print(
        f"RESULT evals_per_s={judge_rate:.1f} baseline_per_s={baseline_rate:.1f} "
        f"ratio_to_baseline={judge_rate / baseline_rate:.4f} "
        f"meets_target={int(judge_rate >= TARGET_PER_S)} records={len(records)} "
        f"worst_hostile_per_kchar_ratio={worst:.1f} largest_answer_mb={largest_size / 1e6:g} "
        f"largest_answer_cpu_s={largest_s:.2f} "
        f"per_char_ratio_largest_to_smallest={largest_s / largest_size / smallest:.2f}"
    )


if __name__ == "__main__":
    main()
