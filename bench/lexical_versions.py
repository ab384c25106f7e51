"""The offline judge's cost against answer length, this checkout against an earlier commit.

Both versions run on the same inputs, in turns (earlier, this, earlier, this, ...), each in a
child process of its own whose CPU seconds are read by ``time.process_time`` inside it: the
judge runs in one thread, and wall time on a shared machine measures the neighbours as much as
the judge. Turns interleave so that a neighbour's burst costs both versions alike; the median
of the rounds is compared.

An answer of each size is RAGTruth's answers and passages run together (synthetic text when
the data set is absent), judged with every default metric against one record's passages.

    python bench/lexical_versions.py --baseline da010f7 [--rounds 5] [--sizes 1000,5000,20000]

Prints a table of CPU seconds per size and version, and one line
``RESULT ratio_<size>=<this / earlier> ...``: 1.0 is the same cost, above 1 slower.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data" / "ragtruth_dev.jsonl"

# Run inside each child: the public names both versions have (``ragpulse.judges.LexicalJudge``
# and its async ``evaluate``), nothing newer.
_CHILD = r"""
import asyncio, json, random, sys, time
from pathlib import Path
from ragpulse.evaluation.types import Context, RagRecord
from ragpulse.judges import LexicalJudge

data, sizes = Path(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")]
if data.exists():
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()][:200]
    text = " ".join(part for r in rows for part in (r["answer"], *r["context"]))
    contexts = tuple(Context(c) for c in rows[1]["context"])
else:
    rng = random.Random(7)
    words = [f"w{i}" for i in range(3000)]
    dots = ("." if rng.random() < 0.06 else "" for _ in range(200_000))
    text = " ".join(rng.choice(words) + dot for dot in dots)
    contexts = tuple(Context(text[i * 2000 : (i + 1) * 2000]) for i in range(3))
judge = LexicalJudge()
metrics = ("faithfulness", "groundedness", "correctness", "relevancy", "completeness")
asyncio.run(judge.evaluate(RagRecord("q", contexts, text[:500]), metrics))  # warm caches
out = {}
for size in sizes:
    answer = (text * (size // len(text) + 1))[:size]
    record = RagRecord("What does it say?", contexts, answer)
    started = time.process_time()
    asyncio.run(judge.evaluate(record, metrics))
    out[size] = time.process_time() - started
print(json.dumps(out))
"""


def _measure(source: Path, sizes: list[int]) -> dict[int, float]:
    env = {**os.environ, "PYTHONPATH": str(source / "src")}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(DATA), ",".join(map(str, sizes))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return {int(k): float(v) for k, v in json.loads(done.stdout.splitlines()[-1]).items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the earlier commit to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1000,5000,20000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        earlier = Path(scratch) / "earlier"
        subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "worktree",
                "add",
                "--detach",
                "-q",
                str(earlier),
                args.baseline,
            ],
            check=True,
        )
        try:
            runs: dict[str, list[dict[int, float]]] = {"earlier": [], "this": []}
            for _ in range(args.rounds):
                runs["earlier"].append(_measure(earlier, sizes))
                runs["this"].append(_measure(ROOT, sizes))
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(earlier)], check=True
            )
    print(f"CPU seconds per answer (median of {args.rounds} interleaved rounds)")
    print(f"{'characters':>10} {args.baseline[:10]:>12} {'this':>12} {'this/earlier':>13}")
    ratios = {}
    for size in sizes:
        before = statistics.median(r[size] for r in runs["earlier"])
        after = statistics.median(r[size] for r in runs["this"])
        ratios[size] = after / before
        print(f"{size:>10} {before:>12.4f} {after:>12.4f} {ratios[size]:>13.2f}")
    print("RESULT " + " ".join(f"ratio_{size}={ratio:.3f}" for size, ratio in ratios.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
