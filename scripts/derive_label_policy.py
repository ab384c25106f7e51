"""Each judge's pass/fail label policy, derived from labelled answers, cross-validated.

Judges every answer of a labelled set (RAGTruth's development split: ``hallucinated`` per
answer, ``source_id`` per source document) and, for each hallucination metric, prints:

- before: the shares of correct and of hallucinated answers labelled ``fail`` at the
  metric module's own threshold;
- cross-validated: 5 folds by source (every answer about one source in one fold), the
  threshold chosen on four folds as the one keeping at most ``--target`` (5 %) of correct
  answers ``fail`` with the most detection (and detection at least twice the false-fail
  share), the shares measured on the fifth, pooled; the promise is at most 10 % there;
- shipped: the threshold chosen on the whole set (tuned), with its shares, or none when
  no threshold keeps the promise: the judge then scores the metric without a label.

``--write`` rewrites ``src/ragpulse/judges/_label_figures.py`` with them (the other
judges' figures are kept). Rerun it after any change to a judge and commit the result.

    python scripts/derive_label_policy.py --data ragtruth_dev.jsonl [--judge lexical] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pprint
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragpulse.evaluation.types import FAITHFULNESS, GROUNDEDNESS, Evaluation, RagRecord
from ragpulse.judges._label_figures import MEASURED
from ragpulse.judges._labels import MAX_FALSE_FAIL, MIN_SEPARATION, TARGET_FALSE_FAIL
from ragpulse.judging._factory import JudgeUnavailable, build_judge
from ragpulse.metrics import _registry
from ragpulse.offline.calibrate import read_labelled
from ragpulse.offline.promise import (
    cross_validated,
    declaration,
    fail_rates,
    folds_by_group,
)

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "src" / "ragpulse" / "judges" / "_label_figures.py"
METRICS = (FAITHFULNESS, GROUNDEDNESS)
GROUPS = ("QA", "Summary", "Data2txt")


def judge_all(kind: str, records: Sequence[RagRecord], model: str | None) -> list[Evaluation]:
    """Every record judged by the judge ``kind`` names (eight at a time)."""
    judge = build_judge(kind, model=model, resilient=kind == "openai")

    async def run() -> list[Evaluation]:
        limit = asyncio.Semaphore(8)

        async def one(record: RagRecord) -> Evaluation:
            async with limit:
                return await judge.evaluate(record, METRICS)

        return list(await asyncio.gather(*(one(r) for r in records)))

    return asyncio.run(run())


def _pct(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.1%}"


def derive(
    scores: Sequence[float | None],
    hallucinated: Sequence[bool],
    folds: Sequence[int],
    metric: str,
    target: float,
) -> dict[str, Any]:
    """The figures of one metric (before, cross-validated, shipped), printed; those written."""
    own = _registry.get(metric)
    own_threshold = own.threshold if own is not None else None
    before = fail_rates(scores, hallucinated, own_threshold) if own_threshold is not None else None
    crossed, chosen = cross_validated(scores, hallucinated, folds, target)
    figures = declaration(scores, hallucinated, folds, own_threshold, target)
    shipped = figures["threshold"]
    at = shipped if shipped is not None else own_threshold
    tuned = fail_rates(scores, hallucinated, at) if at is not None else None
    print(
        f"{metric:<13} {own_threshold!s:>5} {_pct(before.false_fail if before else None)} "
        f"{_pct(before.detection if before else None)} | {_pct(crossed.false_fail)} "
        f"{_pct(crossed.detection)} {','.join(str(t) for t in chosen):>24} | "
        f"{shipped!s:>5} {_pct(tuned.false_fail if shipped is not None and tuned else None)} "
        f"{_pct(tuned.detection if shipped is not None and tuned else None)}"
    )
    return figures


def by_group(
    scores: Sequence[float | None],
    hallucinated: Sequence[bool],
    groups: Sequence[str],
    metric: str,
    threshold: float,
) -> None:
    """The shipped threshold's shares within each task type."""
    parts = []
    for group in sorted(set(groups)):
        picks = [i for i, g in enumerate(groups) if g == group]
        rates = fail_rates([scores[i] for i in picks], [hallucinated[i] for i in picks], threshold)
        parts.append(f"{group} {rates.false_fail:.1%}/{rates.detection:.1%}")
    print(f"  {metric} at {threshold} by task (false-fail/detection): " + ", ".join(parts))


def write(kind: str, figures: Mapping[str, dict[str, Any]]) -> None:
    """Rewrite the shipped figures with this judge's; the other judges' stay."""
    measured = {k: v for k, v in MEASURED.items() if k != kind}
    measured[kind] = dict(figures)
    text = FIGURES.read_text(encoding="utf-8")
    head = text[: text.index("MEASURED: dict")]
    body = pprint.pformat(dict(sorted(measured.items())), indent=4, width=96, sort_dicts=False)
    FIGURES.write_text(
        head + f"MEASURED: dict[str, dict[str, dict[str, Any]]] = {body}\n", encoding="utf-8"
    )
    print(f"wrote {FIGURES.relative_to(ROOT)}; run ruff format on it before committing")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="labelled answers (JSONL)")
    parser.add_argument("--judge", default="lexical", help="the --judge kind to measure")
    parser.add_argument("--model", default=None, help="the judge's model, where it needs one")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--group-by", default="source_id", help="field keeping a fold whole")
    parser.add_argument(
        "--target",
        type=float,
        default=TARGET_FALSE_FAIL,
        help="the most correct answers a chosen threshold may fail on the data it is chosen on",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the shipped figures")
    args = parser.parse_args()
    try:
        labelled = read_labelled(args.data)
    except (OSError, ValueError) as exc:
        sys.exit(f"cannot read {args.data}: {exc}")
    raw = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line]
    groups = [str(r.get(args.group_by, r.get("id"))) for r in raw]
    tasks = [str(r.get("task_type", "all")) for r in raw]
    hallucinated = [item.hallucinated for item in labelled]
    try:
        evaluations = judge_all(args.judge, [item.record for item in labelled], args.model)
    except JudgeUnavailable as exc:
        sys.exit(f"judge {args.judge}: {exc}")
    folds = folds_by_group(groups, args.folds)
    print(
        f"{args.data.name}: {len(labelled)} answers ({sum(hallucinated)} hallucinated), judge "
        f"{args.judge}; promise: at most {MAX_FALSE_FAIL:.0%} of correct answers fail, "
        f"hallucinated ones at least {MIN_SEPARATION:g}x as often; thresholds chosen for at "
        f"most {args.target:.0%}"
    )
    print(
        f"{'':13} {'before: own threshold':>26} | {args.folds}-fold cross-validated by "
        f"{args.group_by} (thresholds per fold) | shipped (tuned on all)"
    )
    print(
        f"{'metric':<13} {'thr':>5} {'ffail':>6} {'detect':>6} | {'ffail':>6} {'detect':>6} "
        f"{'':>24} | {'thr':>5} {'ffail':>6} {'detect':>6}"
    )
    figures: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        scores = [e.score(metric) for e in evaluations]
        figures[metric] = derive(scores, hallucinated, folds, metric, args.target)
        if figures[metric]["threshold"] is not None:
            by_group(scores, hallucinated, tasks, metric, figures[metric]["threshold"])
    result = " ".join(
        f"{m}_{k}={'none' if v is None else v}" for m, f in figures.items() for k, v in f.items()
    )
    print(f"RESULT judge={args.judge} {result}")
    if args.write:
        write(args.judge, figures)


if __name__ == "__main__":
    main()
