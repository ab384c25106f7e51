"""How well a ragpulse judge detects hallucinated RAG answers on RAGTruth, cross-validated.

Reads the human-labelled RAGTruth development set (``../shared/data/ragtruth_dev.jsonl``
beside the repository, or ``--data``), judges every response in this process and
compares with the labels:

- response level: F1 of "hallucinated" when any claim is NOT_FOUND or CONTRADICTED,
  F1 when faithfulness is below a threshold, and AUROC of 1 - faithfulness and
  1 - groundedness, ties broken by the judge's confidence (``outcome``); overall and
  per task type (QA, Summary, Data2txt);
- span level: character-overlap precision, recall and F1 of the flagged claims' answer
  ranges against the human-marked spans;
- beside them two baselines: flag everything, and the share of answer words found in
  no context (novel-token score).

**Cross-validated figures.** The judge's rules were written by looking at this set, so
in-sample figures flatter it. The responses are split into 5 folds by ``source_id``
(every response about one source document lands in one fold). For each fold, every
choice is made on the other four: the judge's coverage settings (a small grid) by
AUROC, and the faithfulness threshold by F1. The fifth fold is then judged with those
choices, and the out-of-fold predictions of all five folds are pooled. The in-sample
figures (default settings, threshold chosen on everything) are printed beside them.
95% bootstrap intervals (responses resampled with replacement) say how far each
figure would move on another sample of the same size.

Usage: python bench/ragtruth.py [--judge lexical|openai] [--data PATH] [--folds 5]
       [--bootstrap 1000] [--model M --base-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragpulse.evaluation.types import (
    FAITHFULNESS,
    GROUNDEDNESS,
    Context,
    Evaluation,
    RagRecord,
    Verdict,
)
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.offline.calibrate import auroc, bootstrap, detection

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ragtruth_dev.jsonl"
TASKS = ("QA", "Summary", "Data2txt")
FLAG_VERDICTS = frozenset({Verdict.NOT_FOUND, Verdict.CONTRADICTED})
METRICS = (FAITHFULNESS, GROUNDEDNESS)
# The lexical judge's settings chosen on four folds: coverage needed for SUPPORTED, for
# INFERRED (across all contexts, and against structured ones) and in one window for
# INFERRED (the thresholds that trade false alarms for misses).
LEXICAL_GRID: tuple[dict[str, float], ...] = tuple(
    {
        "supported_coverage": s,
        "inferred_coverage": i,
        "record_inferred_coverage": r,
        "span_coverage": w,
    }
    for s, i, r, w in itertools.product((0.75, 0.8), (0.4, 0.5, 0.6), (0.1, 0.2), (0.0, 0.3))
)
_WORD = re.compile(r"\w+")
_BASELINE_STOP_TEXT = (
    "a an the and or but of to in on at for with by from as is are was were be been it its "
    "this that these those he she they we you i his her their our your not no"
)
_BASELINE_STOP = frozenset(_BASELINE_STOP_TEXT.split())


# --- measures --------------------------------------------------------------------------


def best_threshold(risks: Sequence[float], labels: Sequence[bool]) -> float:
    """The risk threshold (flag when risk > t) with the best F1 on these responses."""
    candidates = sorted({0.0, *risks})
    return max(candidates, key=lambda t: detection([r > t for r in risks], labels).f1)


@dataclass(frozen=True)
class Outcome:
    """One judged response, as the measures need it."""

    risk: float
    """1 - faithfulness (0 when undefined)."""
    risk_grounded: float
    any_flag: bool
    flagged_chars: frozenset[int]
    human_chars: frozenset[int]


def span_counts(outcomes: Sequence[Outcome]) -> tuple[int, int, int]:
    overlap = sum(len(o.flagged_chars & o.human_chars) for o in outcomes)
    return (
        overlap,
        sum(len(o.flagged_chars) for o in outcomes),
        sum(len(o.human_chars) for o in outcomes),
    )


def span_f1(outcomes: Sequence[Outcome]) -> tuple[float, float, float]:
    overlap, flagged, human = span_counts(outcomes)
    precision = overlap / flagged if flagged else 0.0
    recall = overlap / human if human else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def novel_token_score(row: Mapping[str, Any]) -> float:
    """Share of the answer's content words that occur in no context."""
    vocabulary = {w.lower() for c in row["context"] for w in _WORD.findall(c)}
    words = [w.lower() for w in _WORD.findall(row["answer"] or "")]
    words = [w for w in words if w not in _BASELINE_STOP]
    return sum(1 for w in words if w not in vocabulary) / len(words) if words else 0.0


# --- judging ---------------------------------------------------------------------------


def record_of(row: Mapping[str, Any]) -> RagRecord:
    return RagRecord(
        question=row["question"],
        contexts=tuple(Context(c, id=str(i)) for i, c in enumerate(row["context"])),
        answer=row["answer"],
        name=row["id"],
    )


# Weight of the judge's doubt in the ranking score: small enough never to reorder two
# distinct faithfulness values of answers up to 100 claims, so it only breaks ties.
CONFIDENCE_WEIGHT = 1e-4


def doubt(evaluation: Evaluation) -> float:
    """1 - the mean confidence of the claims the judge counts faithful (0 if it gives none)."""
    sure = [
        c.confidence
        for c in evaluation.claims
        if c.confidence is not None and c.verdict in (Verdict.SUPPORTED, Verdict.INFERRED)
    ]
    return 1.0 - sum(sure) / len(sure) if sure else 0.0


def outcome(evaluation: Evaluation, row: Mapping[str, Any]) -> Outcome:
    """The judged response; its ranking risk is 1 - score + CONFIDENCE_WEIGHT * doubt, so
    the many answers at exactly 1.0 are ordered by how sure the judge is of them."""

    def risk(metric: str) -> float:
        score = evaluation.score(metric)
        return 0.0 if score is None else 1.0 - score + CONFIDENCE_WEIGHT * doubt(evaluation)

    flagged = [c for c in evaluation.claims if c.verdict in FLAG_VERDICTS]
    # The words the judge says no context states, where it can tell them apart from the
    # rest of the claim; else the whole claim.
    ranges = [
        r
        for c in flagged
        for r in (
            c.unsupported
            or (
                ((c.claim.answer_start, c.claim.answer_end),)
                if c.claim.answer_start is not None and c.claim.answer_end is not None
                else ()
            )
        )
    ]
    chars = {i for start, end in ranges for i in range(start, end)}
    human = {i for s in row["spans"] for i in range(s["start"], s["end"])}
    return Outcome(
        risk(FAITHFULNESS), risk(GROUNDEDNESS), bool(flagged), frozenset(chars), frozenset(human)
    )


def judge_lexical(
    rows: Sequence[Mapping[str, Any]], settings: Mapping[str, float]
) -> list[Outcome]:
    judge = LexicalJudge(**settings)  # type: ignore[arg-type]
    return [outcome(judge.evaluate_sync(record_of(r), METRICS), r) for r in rows]


def judge_openai(
    rows: Sequence[Mapping[str, Any]], model: str, base_url: str | None
) -> list[Outcome]:
    from ragpulse.judges.llm.openai import OpenAIJudge

    judge = OpenAIJudge(model=model, base_url=base_url)

    async def run() -> list[Evaluation]:
        limit = asyncio.Semaphore(8)

        async def one(row: Mapping[str, Any]) -> Evaluation:
            async with limit:
                return await judge.evaluate(record_of(row), METRICS)

        return list(await asyncio.gather(*(one(r) for r in rows)))

    evaluations = asyncio.run(run())
    return [outcome(e, r) for e, r in zip(evaluations, rows, strict=True)]


def folds_by_source(rows: Sequence[Mapping[str, Any]], k: int, seed: int = 0) -> list[int]:
    """Fold of each response; all responses about one source document share a fold."""
    sources = sorted({str(r["source_id"]) for r in rows})
    random.Random(seed).shuffle(sources)
    fold_of = {source: i % k for i, source in enumerate(sources)}
    return [fold_of[str(r["source_id"])] for r in rows]


@dataclass
class Predictions:
    """Per-response predictions of one evaluation protocol (in-sample or out-of-fold)."""

    outcomes: list[Outcome]
    threshold_flags: list[bool]
    chosen: list[str]


def cross_validate(
    runs: Mapping[str, list[Outcome]], labels: Sequence[bool], folds: Sequence[int], k: int
) -> Predictions:
    """Out-of-fold predictions: settings and threshold chosen on the other folds."""
    n = len(labels)
    outcomes: list[Outcome | None] = [None] * n
    flags = [False] * n
    chosen = []
    for fold in range(k):
        train = [i for i in range(n) if folds[i] != fold]
        test = [i for i in range(n) if folds[i] == fold]
        train_labels = [labels[i] for i in train]
        name = max(runs, key=lambda s: auroc([runs[s][i].risk for i in train], train_labels))
        chosen.append(name)
        threshold = best_threshold([runs[name][i].risk for i in train], train_labels)
        for i in test:
            outcomes[i] = runs[name][i]
            flags[i] = runs[name][i].risk > threshold
    return Predictions([o for o in outcomes if o is not None], flags, chosen)


def in_sample(outcomes: list[Outcome], labels: Sequence[bool]) -> Predictions:
    threshold = best_threshold([o.risk for o in outcomes], labels)
    return Predictions(outcomes, [o.risk > threshold for o in outcomes], ["default"])


# --- report ----------------------------------------------------------------------------


def report(
    title: str,
    predictions: Predictions,
    rows: Sequence[Mapping[str, Any]],
    rounds: int,
) -> dict[str, float]:
    labels = [bool(r["hallucinated"]) for r in rows]
    header = (
        f"{'subset':<9} {'n':>4} {'flagged':>7} {'P(any)':>7} {'R(any)':>7} {'F1(any)':>8} "
        f"{'F1(thr)':>8} {'AUROC-f':>8} {'AUROC-g':>8} {'spanF1':>7} | {'F1(all)':>8} "
        f"{'AUROC-novel':>11}"
    )
    print(f"\n{title}")
    print(header)
    print("-" * len(header))
    figures: dict[str, float] = {}
    for subset in (None, *TASKS):
        picks = [i for i, r in enumerate(rows) if subset is None or r["task_type"] == subset]
        sub_labels = [labels[i] for i in picks]
        outs = [predictions.outcomes[i] for i in picks]
        any_flag = detection([o.any_flag for o in outs], sub_labels)
        thr = detection([predictions.threshold_flags[i] for i in picks], sub_labels)
        au_f = auroc([o.risk for o in outs], sub_labels)
        au_g = auroc([o.risk_grounded for o in outs], sub_labels)
        _, _, s_f1 = span_f1(outs)
        everything = detection([True] * len(picks), sub_labels)
        au_novel = auroc([novel_token_score(rows[i]) for i in picks], sub_labels)
        print(
            f"{subset or 'all':<9} {len(picks):>4} {any_flag.flagged:>7} "
            f"{any_flag.precision:>7.3f} {any_flag.recall:>7.3f} {any_flag.f1:>8.3f} "
            f"{thr.f1:>8.3f} {au_f:>8.3f} {au_g:>8.3f} {s_f1:>7.3f} | "
            f"{everything.f1:>8.3f} {au_novel:>11.3f}"
        )
        key = "" if subset is None else f"_{subset.lower()}"
        figures[f"auroc{key}"] = au_f
        figures[f"f1{key}"] = any_flag.f1
        if subset is None:
            figures.update(f1_threshold=thr.f1, auroc_groundedness=au_g, span_f1=s_f1)
    s_p, s_r, s_f1 = span_f1(predictions.outcomes)
    print(f"span level (characters): P={s_p:.3f} R={s_r:.3f} F1={s_f1:.3f}")
    if rounds > 0:
        n = len(rows)
        outs = predictions.outcomes
        au = bootstrap(
            lambda p: auroc([outs[i].risk for i in p], [labels[i] for i in p]), n, rounds
        )
        f1 = bootstrap(
            lambda p: detection([outs[i].any_flag for i in p], [labels[i] for i in p]).f1,
            n,
            rounds,
        )
        sp = bootstrap(lambda p: span_f1([outs[i] for i in p])[2], n, rounds)
        print(
            f"95% bootstrap intervals ({rounds} resamples): AUROC-f {au[0]:.3f}-{au[1]:.3f}, "
            f"F1(any) {f1[0]:.3f}-{f1[1]:.3f}, span F1 {sp[0]:.3f}-{sp[1]:.3f}"
        )
        figures.update(
            auroc_ci_low=au[0], auroc_ci_high=au[1], f1_ci_low=f1[0], f1_ci_high=f1[1],
            span_f1_ci_low=sp[0], span_f1_ci_high=sp[1],
        )  # fmt: skip
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", choices=("lexical", "openai"), default="lexical")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--bootstrap", type=int, default=1000, help="resamples for the 95%% intervals (0: none)"
    )
    parser.add_argument("--model", default="gpt-4o-mini", help="with --judge openai")
    parser.add_argument("--base-url", default=None, help="with --judge openai")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"dataset not found: {args.data} (pass --data)")
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines()]
    labels = [bool(r["hallucinated"]) for r in rows]
    started = time.perf_counter()
    if args.judge == "lexical":
        runs = {json.dumps(s, sort_keys=True): judge_lexical(rows, s) for s in LEXICAL_GRID}
        default = judge_lexical(rows, {})
    else:
        default = judge_openai(rows, args.model, args.base_url)
        runs = {"default": default}
    seconds = time.perf_counter() - started
    evaluations = len(rows) * (len(runs) + (args.judge == "lexical"))
    print(
        f"RAGTruth dev, judge={args.judge}, {len(rows)} responses "
        f"({sum(labels)} hallucinated), {evaluations} evaluations in {seconds:.1f}s"
    )
    folds = folds_by_source(rows, args.folds)
    crossed = cross_validate(runs, labels, folds, args.folds)
    cv = report(
        f"{args.folds}-fold cross-validated by source_id (settings and threshold chosen on "
        "the other folds; figures on records the choices never saw)",
        crossed,
        rows,
        args.bootstrap,
    )
    print("settings chosen per fold: " + "; ".join(crossed.chosen))
    inside = report(
        "in-sample (default settings, threshold chosen on all records; the rules were "
        "developed on this set)",
        in_sample(default, labels),
        rows,
        0,
    )
    print(
        "columns: any = flagged when a claim is NOT_FOUND/CONTRADICTED; thr = faithfulness "
        "below the chosen threshold; AUROC-f/-g = 1 - faithfulness/groundedness; spanF1 = "
        "character F1 of flagged claims against human spans; right of | are baselines"
    )
    figures = {f"cv_{k}": v for k, v in cv.items()}
    figures.update({f"insample_{k}": v for k, v in inside.items() if not k.endswith("_ci")})
    figures["evals_per_s"] = evaluations / seconds
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
