"""What each rule of the offline judge adds: switch it off, judge again, compare.

The ``LexicalJudge`` decides each claim by an ordered table of named rules
(``ragpulse.judges.lexical._rules.RULES``). For every rule that is not a base verdict,
this judges three labelled sets with the full table and with the table less that rule,
and prints the rule's contribution (full minus without) to:

- AUROC of 1 - faithfulness, ties broken by the judge's confidence (``ragtruth.outcome``);
- span-level character F1 of the flagged claims' ranges against the human spans;
- F1(any): a response flagged when any claim is NOT_FOUND or CONTRADICTED;
- conflict F1: character F1 of the CONTRADICTED claims' ranges against the human spans
  labelled as conflicts (RAGTruth and other_domains tell a conflict from baseless
  information; BEGIN does not, so it has none). Faithfulness counts a contradiction and
  an unsupported claim alike, so only this measure sees what a contradiction rule adds
  over NOT_FOUND (correctness in ``agreement`` mode and the verdict users read do).

The sets: RAGTruth dev (``../shared/data/ragtruth_dev.jsonl``; the rules were written
while reading it, so its figures are in-sample), ``bench/data/other_domains.jsonl``
(hand-written; some rules were written against it too) and
``bench/data/begin_wow_dev.jsonl`` (dialogue responses labelled by BEGIN, never read while
writing rules; whole responses, so its span F1 is coarse). Default settings, no tuning:
every figure here is in-sample for the settings. A rule that adds nothing outside
RAGTruth (contribution <= 0 on both other sets) is marked ``drop``.

Usage: python bench/ablation.py [--ragtruth PATH] [--only RULE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtruth import DEFAULT_DATA, METRICS, outcome, record_of, span_f1

from ragpulse.evaluation.types import Evaluation, Verdict
from ragpulse.judges.lexical._rules import BASE, RULES, Rule
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.offline.calibrate import auroc, detection

DATA = Path(__file__).resolve().parent / "data"
SETS = {
    "ragtruth": DEFAULT_DATA,
    "other": DATA / "other_domains.jsonl",
    "begin": DATA / "begin_wow_dev.jsonl",
}
MEASURES = ("auroc", "span_f1", "f1_any", "conflict_f1")
CONFLICT_LABELS = frozenset({"Evident Conflict", "Subtle Conflict"})


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def conflict_chars(evaluation: Evaluation, row: Mapping[str, Any]) -> tuple[set[int], set[int]]:
    """Answer characters the judge calls contradicted, and those people marked conflicting."""
    flagged = {
        i
        for c in evaluation.claims
        if c.verdict is Verdict.CONTRADICTED
        for start, end in (c.unsupported or ((c.claim.answer_start, c.claim.answer_end),))
        if start is not None and end is not None
        for i in range(start, end)
    }
    human = {
        i
        for s in row["spans"]
        if s.get("label_type") in CONFLICT_LABELS
        for i in range(s["start"], s["end"])
    }
    return flagged, human


def char_f1(pairs: Sequence[tuple[set[int], set[int]]]) -> float:
    overlap = sum(len(f & h) for f, h in pairs)
    flagged, human = sum(len(f) for f, _ in pairs), sum(len(h) for _, h in pairs)
    if not overlap:
        return 0.0
    precision, recall = overlap / flagged, overlap / human
    return 2 * precision * recall / (precision + recall)


def measure(rows: Sequence[Mapping[str, Any]], rules: Sequence[Rule]) -> dict[str, float]:
    judge = LexicalJudge(rules=rules)
    evaluations = [judge.evaluate_sync(record_of(r), METRICS) for r in rows]
    pairs = list(zip(evaluations, rows, strict=True))
    outcomes = [outcome(e, r) for e, r in pairs]
    labels = [bool(r["hallucinated"]) for r in rows]
    return {
        "auroc": auroc([o.risk for o in outcomes], labels),
        "span_f1": span_f1(outcomes)[2],
        "f1_any": detection([o.any_flag for o in outcomes], labels).f1,
        "conflict_f1": char_f1([conflict_chars(e, r) for e, r in pairs]),
    }


def helps_outside(deltas: Mapping[str, Mapping[str, float]]) -> bool:
    """Whether switching the rule off costs anything on a set it was not written against."""
    return any(deltas[s][m] > 0 for s in ("other", "begin") for m in MEASURES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ragtruth", type=Path, default=SETS["ragtruth"])
    parser.add_argument("--only", nargs="*", default=None, help="ablate only these rules")
    args = parser.parse_args()
    paths = {**SETS, "ragtruth": args.ragtruth}
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        sys.exit(f"dataset not found: {', '.join(missing)}")
    sets = {name: load(path) for name, path in paths.items()}
    started = time.perf_counter()
    full = {name: measure(rows, RULES) for name, rows in sets.items()}
    print(f"full table ({len(RULES)} rules), default settings, in-sample:")
    for name, rows in sets.items():
        figures = "  ".join(f"{m}={full[name][m]:.3f}" for m in MEASURES)
        print(f"  {name:<9} n={len(rows):<4} {figures}")
    ablatable = [r for r in RULES if r.name not in BASE]
    if args.only is not None:
        ablatable = [r for r in ablatable if r.name in args.only]
    print("\ncontribution of each rule (full minus without it; > 0: the rule helps)")
    header = f"{'rule':<14}" + "".join(
        f" {name[:5] + ':' + m[:7]:>13}" for name in sets for m in MEASURES
    )
    print(header + "  keep")
    print("-" * (len(header) + 6))
    result: dict[str, float] = {f"{n}_{m}": full[n][m] for n in sets for m in MEASURES}
    dropped = 0
    for rule in ablatable:
        table = tuple(r for r in RULES if r is not rule)
        deltas = {
            name: {m: full[name][m] - v for m, v in measure(rows, table).items()}
            for name, rows in sets.items()
        }
        keep = helps_outside(deltas)
        dropped += not keep
        cells = "".join(f" {deltas[n][m]:>+13.4f}" for n in sets for m in MEASURES)
        print(f"{rule.name:<14}{cells}  {'keep' if keep else 'drop'}")
        for name in sets:
            result[f"d_auroc_{rule.name}_{name}"] = deltas[name]["auroc"]
    seconds = time.perf_counter() - started
    print(
        f"\n{len(ablatable)} rules ablated on {sum(map(len, sets.values()))} responses "
        f"in {seconds:.0f}s"
    )
    result.update(rules=len(RULES), ablated=len(ablatable), drop=dropped)
    print(
        "RESULT "
        + " ".join(
            f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()
        )
    )


if __name__ == "__main__":
    main()
