"""How well a ragpulse judge detects hallucinated RAG answers on the RAGTruth dev set.

Converts ``../shared/data/ragtruth_dev.jsonl`` (beside the repository) to the
``ragpulse eval`` input format, runs ``ragpulse eval`` on it in a subprocess, and
compares the output with the human labels:

- response level: a response is flagged when any claim is NOT_FOUND or CONTRADICTED,
  and, separately, when its faithfulness is below ``--threshold``; precision, recall
  and F1 of the "hallucinated" class, and AUROC of 1 - faithfulness and
  1 - groundedness; overall and per task type (QA, Summary, Data2txt);
- span level: character-overlap precision, recall and F1 of the flagged claims'
  answer ranges against the human-marked spans;
- beside them, two baselines computed here: flag everything, and the share of
  answer words that occur in no context (naive novel-token score).
- 95% bootstrap intervals of the overall F1 and AUROC (responses resampled with
  replacement), to show how far the figures would move on another sample.

The judge's rules were developed by error analysis on this same set (rules that hold
for any RAG text, never its answers), so these are development-set figures.

Usage: python bench/ragtruth.py [--judge lexical] [--data PATH] [--threshold 0.8]
       [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ragtruth_dev.jsonl"
TASKS = ("QA", "Summary", "Data2txt")
FLAG_VERDICTS = frozenset({"NOT_FOUND", "CONTRADICTED"})
_WORD = re.compile(r"\w+")
# Function words carry no content; a baseline that counted them as novel would be noise.
_BASELINE_STOP_TEXT = (
    "a an the and or but of to in on at for with by from as is are was were be been it its "
    "this that these those he she they we you i his her their our your not no"
)
_BASELINE_STOP = frozenset(_BASELINE_STOP_TEXT.split())


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve by ranks (Mann-Whitney U), ties counted half."""
    pairs = sorted(zip(scores, labels, strict=True), key=lambda p: p[0])
    positives = sum(1 for _, label in pairs if label)
    negatives = len(pairs) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    rank_sum = 0.0
    i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        average_rank = (i + j + 1) / 2  # ranks are 1-based: i+1 .. j
        rank_sum += average_rank * sum(1 for _, label in pairs[i:j] if label)
        i = j
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


@dataclass(frozen=True)
class Detection:
    precision: float
    recall: float
    f1: float
    flagged: int
    total: int


def detection(flags: Sequence[bool], labels: Sequence[bool]) -> Detection:
    tp = sum(1 for f, y in zip(flags, labels, strict=True) if f and y)
    fp = sum(1 for f, y in zip(flags, labels, strict=True) if f and not y)
    fn = sum(1 for f, y in zip(flags, labels, strict=True) if not f and y)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Detection(precision, recall, f1, sum(flags), len(flags))


def bootstrap(
    flags: Sequence[bool],
    risks: Sequence[float],
    labels: Sequence[bool],
    rounds: int,
    seed: int = 0,
) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% percentile intervals of F1 (of ``flags``) and AUROC (of ``risks``).

    Responses are resampled with replacement ``rounds`` times: how much the figures
    would move on another sample of the same size from the same kind of data.
    """
    rng = random.Random(seed)
    n = len(labels)
    f1s: list[float] = []
    aurocs: list[float] = []
    for _ in range(rounds):
        picks = [rng.randrange(n) for _ in range(n)]
        sample_labels = [labels[i] for i in picks]
        f1s.append(detection([flags[i] for i in picks], sample_labels).f1)
        aurocs.append(auroc([risks[i] for i in picks], sample_labels))
    f1s.sort()
    aurocs.sort()
    lo, hi = int(0.025 * rounds), max(0, int(0.975 * rounds) - 1)
    return (f1s[lo], f1s[hi]), (aurocs[lo], aurocs[hi])


def novel_token_score(row: dict[str, Any]) -> float:
    """Share of the answer's content words that occur in no context."""
    vocabulary = {w.lower() for c in row["context"] for w in _WORD.findall(c)}
    words = [w.lower() for w in _WORD.findall(row["answer"] or "")]
    words = [w for w in words if w not in _BASELINE_STOP]
    return sum(1 for w in words if w not in vocabulary) / len(words) if words else 0.0


def _chars(ranges: Sequence[tuple[int, int]]) -> set[int]:
    return {i for start, end in ranges for i in range(start, end)}


def run_eval(rows: Sequence[dict[str, Any]], judge: str, workdir: Path) -> tuple[dict, float]:
    """Run ``ragpulse eval`` on the rows; returns output lines by id and wall seconds."""
    source = workdir / "ragtruth_input.jsonl"
    target = workdir / "ragtruth_output.jsonl"
    with source.open("w", encoding="utf-8") as f:
        for row in rows:
            line = {
                "id": row["id"],
                "question": row["question"],
                "contexts": row["context"],
                "answer": row["answer"],
            }
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    command = [sys.executable, "-m", "ragpulse.cli", "eval", str(source), "--output", str(target)]
    command += ["--judge", judge, "--metrics", "faithfulness,groundedness"]
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        sys.exit(f"ragpulse eval failed ({completed.returncode}):\n{completed.stderr}")
    results = {}
    for text in target.read_text(encoding="utf-8").splitlines():
        result = json.loads(text)
        results[result["id"]] = result
    return results, seconds


def _risk(result: dict[str, Any], metric: str) -> float:
    score = result["scores"][metric]
    return 0.0 if score is None else 1.0 - score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", default="lexical")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--threshold", type=float, default=0.8, help="flag faithfulness below")
    parser.add_argument(
        "--bootstrap", type=int, default=1000, help="resamples for the 95%% intervals (0: none)"
    )
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"dataset not found: {args.data}")
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines()]
    with tempfile.TemporaryDirectory() as tmp:
        results, seconds = run_eval(rows, args.judge, Path(tmp))

    header = (
        f"{'subset':<9} {'n':>4} {'flagged':>7} {'P(any)':>7} {'R(any)':>7} {'F1(any)':>8} "
        f"{'F1(thr)':>8} {'AUROC-f':>8} {'AUROC-g':>8} | {'F1(all)':>8} {'AUROC-novel':>11}"
    )
    print(f"RAGTruth dev, judge={args.judge}, {len(rows)} responses, {seconds:.1f}s wall")
    print(header)
    print("-" * len(header))
    figures: dict[str, float] = {}
    for subset in (None, *TASKS):
        sub = [r for r in rows if subset is None or r["task_type"] == subset]
        labels = [bool(r["hallucinated"]) for r in sub]
        outs = [results[r["id"]] for r in sub]
        any_flag = detection(
            [any(c["verdict"] in FLAG_VERDICTS for c in o["claims"]) for o in outs], labels
        )
        thr_flag = detection(
            [_risk(o, "faithfulness") > 1.0 - args.threshold for o in outs], labels
        )
        au_f = auroc([_risk(o, "faithfulness") for o in outs], labels)
        au_g = auroc([_risk(o, "groundedness") for o in outs], labels)
        everything = detection([True] * len(sub), labels)
        au_novel = auroc([novel_token_score(r) for r in sub], labels)
        name = subset or "all"
        print(
            f"{name:<9} {len(sub):>4} {any_flag.flagged:>7} {any_flag.precision:>7.3f} "
            f"{any_flag.recall:>7.3f} {any_flag.f1:>8.3f} {thr_flag.f1:>8.3f} "
            f"{au_f:>8.3f} {au_g:>8.3f} | "
            f"{everything.f1:>8.3f} {au_novel:>11.3f}"
        )
        if subset is None:
            figures.update(
                precision=any_flag.precision,
                recall=any_flag.recall,
                f1=any_flag.f1,
                flagged=float(any_flag.flagged),
                f1_threshold=thr_flag.f1,
                auroc_faithfulness=au_f,
                auroc_groundedness=au_g,
                f1_flag_all=everything.f1,
                auroc_novel_tokens=au_novel,
            )
        else:
            figures[f"f1_{subset.lower()}"] = any_flag.f1
            figures[f"auroc_{subset.lower()}"] = au_f

    overlap = flagged_chars = human_chars = 0
    for row in rows:
        flagged = _chars(
            [
                (c["answer_start"], c["answer_end"])
                for c in results[row["id"]]["claims"]
                if c["verdict"] in FLAG_VERDICTS and c["answer_start"] is not None
            ]
        )
        human = _chars([(s["start"], s["end"]) for s in row["spans"]])
        overlap += len(flagged & human)
        flagged_chars += len(flagged)
        human_chars += len(human)
    span_p = overlap / flagged_chars if flagged_chars else 0.0
    span_r = overlap / human_chars if human_chars else 0.0
    span_f1 = 2 * span_p * span_r / (span_p + span_r) if span_p + span_r else 0.0
    print(f"\nspan level (characters): P={span_p:.3f} R={span_r:.3f} F1={span_f1:.3f}")
    print(
        "columns: any = flagged when a claim is NOT_FOUND/CONTRADICTED (flagged = how many); "
        f"thr = faithfulness < {args.threshold:g}; AUROC-f/-g = 1 - faithfulness/groundedness; "
        "right of | are baselines"
    )
    figures.update(span_f1=span_f1, evals_per_s=len(rows) / seconds)
    if args.bootstrap > 0:
        labels = [bool(r["hallucinated"]) for r in rows]
        outs = [results[r["id"]] for r in rows]
        flags = [any(c["verdict"] in FLAG_VERDICTS for c in o["claims"]) for o in outs]
        (f1_lo, f1_hi), (au_lo, au_hi) = bootstrap(
            flags, [_risk(o, "faithfulness") for o in outs], labels, args.bootstrap
        )
        print(
            f"95% bootstrap intervals ({args.bootstrap} resamples of the {len(rows)} responses): "
            f"F1(any) {f1_lo:.3f}-{f1_hi:.3f}, AUROC-f {au_lo:.3f}-{au_hi:.3f}"
        )
        figures.update(f1_ci_low=f1_lo, f1_ci_high=f1_hi, auroc_ci_low=au_lo, auroc_ci_high=au_hi)
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
