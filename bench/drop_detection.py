"""Do the shipped alert rules page on a step in hallucinated answers, and only then?

Judges every RAGTruth record once with the default (offline) judge and writes each result
through ragpulse's own exporter (``Emitter`` into the OpenTelemetry SDK's metric reader), so
every record contributes exactly the label-counter, score-histogram and diagnosis increments
a live service would export. Then replays a stream of those answers over simulated time:
``--rate`` evaluations a second (Poisson per minute), drawn with replacement from the correct
answers and the hallucinated ones, 10 % hallucinated for ``--days`` steady days, then a step
to 30 %. The cumulative series, one sample a minute, go through real Prometheus tooling
(``alert_replay``: backfilled blocks, recording rules backfilled by promtool, each alert's
expression queried minute by minute from a ``prometheus`` on 127.0.0.1, ``for:`` applied).

Prints, per alert that fired, when and how often, and one line:

    RESULT page_minutes=<step to first page> ticket_minutes=<step to first ticket>
           false_pages_30d=<pages started in the steady days> false_tickets_30d=<...> rate=<r>

``page_minutes``/``ticket_minutes`` are ``none`` when nothing fired within ``--after`` hours
of the step.

**Tuning.** The rules are sized with the judge's measured rates (share of correct and of
hallucinated answers its faithfulness label fails), which the label declaration measured on
all of RAGTruth dev, the same answers replayed here: those two numbers are in-sample. With
``--holdout`` the records are split by ``source_id``; the rules are rendered with rates
measured on one half and the other half is replayed.

``--module-thresholds`` labels every metric against its module's own threshold, as ragpulse
did before judges declared their labels: with the rules as they were, it replays the old
behaviour (``--rules`` names the rules file).

Usage: python bench/drop_detection.py [--data FILE] [--rate 1] [--days 30] [--after 24]
       [--rules FILE] [--module-thresholds] [--holdout] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "collector-config" / "prometheus"))

from alert_replay import STEP, Series, episodes, replay  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402

from ragpulse.evaluation.types import Context, Evaluation, RagRecord  # noqa: E402
from ragpulse.judges._labels import label_thresholds  # noqa: E402
from ragpulse.judging._factory import build_judge  # noqa: E402
from ragpulse.metrics import ALL_METRICS  # noqa: E402
from ragpulse.metrics._registry import default_thresholds  # noqa: E402
from ragpulse.signals.emit import EmitOptions, Emitter, PipelineMetrics  # noqa: E402

RULES = ROOT / "collector-config" / "prometheus" / "rules.yaml"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "ragtruth_dev.jsonl"
JUDGE = "lexical"
SERVICE = "rag-app"
STEADY, STEPPED = 0.10, 0.30
# What the rules read of each instrument: the label counter by metric and label, the score
# histogram's count and sum by metric and answerability, the evaluations by diagnosis.
_KEEP = {
    "ragpulse.evaluation.labels": ("gen_ai.evaluation.name", "gen_ai.evaluation.score.label"),
    "ragpulse.evaluation.score": (
        "gen_ai.evaluation.name",
        "ragpulse.eval.abstained",
        "ragpulse.eval.answerable",
    ),
    "ragpulse.evaluator.evaluations": ("ragpulse.eval.status", "ragpulse.eval.diagnosis"),
}
_SERIES = {
    "ragpulse.evaluation.labels": ("ragpulse_evaluation_labels_total",),
    "ragpulse.evaluation.score": (
        "ragpulse_evaluation_score_count",
        "ragpulse_evaluation_score_sum",
    ),
    "ragpulse.evaluator.evaluations": ("ragpulse_evaluator_evaluations_total",),
}


def _record(row: Mapping[str, Any]) -> RagRecord:
    return RagRecord(
        question=row["question"],
        contexts=tuple(Context(c, id=str(i)) for i, c in enumerate(row["context"])),
        answer=row["answer"],
        name="handle_request",
    )


def _label_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _snapshot(reader: InMemoryMetricReader) -> dict[Series, float]:
    """The exporter's cumulative points as Prometheus series (the rules' attributes only)."""
    found: dict[Series, float] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name not in _KEEP:
                    continue
                for point in metric.data.data_points:
                    attrs = point.attributes or {}
                    labels = tuple(
                        sorted(
                            [("service_name", SERVICE)]
                            + [
                                (key.replace(".", "_"), _label_value(attrs[key]))
                                for key in _KEEP[metric.name]
                                if key in attrs
                            ]
                        )
                    )
                    names = _SERIES[metric.name]
                    if len(names) == 1:
                        key = (names[0], labels)
                        found[key] = found.get(key, 0.0) + float(point.value)  # type: ignore[union-attr]
                    else:
                        for name, value in zip(names, (point.count, point.sum), strict=True):  # type: ignore[union-attr]
                            found[(name, labels)] = found.get((name, labels), 0.0) + float(value)
    return found


def judge_records(
    rows: Sequence[Mapping[str, Any]], thresholds: Mapping[str, float]
) -> tuple[list[Series], np.ndarray]:
    """Each record's increment of every series, judged once and written by the exporter."""
    judge = build_judge(JUDGE)
    reader = InMemoryMetricReader()
    instruments = PipelineMetrics(MeterProvider(metric_readers=[reader]))
    emitter = Emitter(EmitOptions(thresholds=dict(thresholds)), instruments)

    async def evaluate(row: Mapping[str, Any]) -> Evaluation:
        return await judge.evaluate(_record(row), ALL_METRICS)

    deltas: list[dict[Series, float]] = []
    before: dict[Series, float] = {}
    for row in rows:
        record = _record(row)
        emitter.emit(record, asyncio.run(evaluate(row)), None)
        after = _snapshot(reader)
        deltas.append({k: v - before.get(k, 0.0) for k, v in after.items()})
        before = after
    series = sorted(before)
    matrix = np.array([[d.get(s, 0.0) for s in series] for d in deltas])
    return series, matrix


def stream(
    matrix: np.ndarray,
    hallucinated: np.ndarray,
    rate: float,
    minutes: int,
    step_minute: int,
    seed: int,
) -> np.ndarray:
    """Cumulative values of each series at each minute: ``rate`` evaluations a second,
    ``STEADY`` hallucinated before ``step_minute`` and ``STEPPED`` from it."""
    rng = np.random.default_rng(seed)
    bad_pool = np.flatnonzero(hallucinated)
    good_pool = np.flatnonzero(~hallucinated)
    counts = rng.poisson(rate * STEP, size=minutes)
    share = np.where(np.arange(minutes) < step_minute, STEADY, STEPPED)
    bad = rng.binomial(counts, share)
    minute_of_bad = np.repeat(np.arange(minutes), bad)
    minute_of_good = np.repeat(np.arange(minutes), counts - bad)
    picked = np.concatenate(
        [
            bad_pool[rng.integers(0, len(bad_pool), size=len(minute_of_bad))],
            good_pool[rng.integers(0, len(good_pool), size=len(minute_of_good))],
        ]
    )
    minute = np.concatenate([minute_of_bad, minute_of_good])
    per_minute = np.stack(
        [
            np.bincount(minute, weights=matrix[picked, s], minlength=minutes)
            for s in range(matrix.shape[1])
        ],
        axis=1,
    )
    return np.cumsum(per_minute, axis=0)


def halves_by_source(rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """True for the records whose source falls in the replayed half (a stable hash)."""
    return np.array([zlib.crc32(str(r["source_id"]).encode()) % 2 == 1 for r in rows])


def _holdout_rules(
    workdir: Path, rows: Sequence[Mapping[str, Any]], matrix: np.ndarray, series: list[Series],
    chosen: np.ndarray, rate: float,
) -> Path:  # fmt: skip
    """The shipped rules rendered with the faithfulness rates measured on ``chosen`` only."""
    import judge_rules
    import render_rules
    from alert_bounds import JudgeRates

    fail = [
        i for i, (name, labels) in enumerate(series)
        if name == "ragpulse_evaluation_labels_total"
        and ("gen_ai_evaluation_name", "faithfulness") in labels
        and ("gen_ai_evaluation_score_label", "fail") in labels
    ]  # fmt: skip
    failed = matrix[:, fail].sum(axis=1) > 0
    labelled = np.array([bool(r["hallucinated"]) for r in rows])
    measured = JudgeRates(
        float(failed[chosen & ~labelled].mean()), float(failed[chosen & labelled].mean())
    )
    print(f"holdout: faithfulness rates measured on the chosen half: {measured}")
    original = judge_rules.judge_metric_rules

    def with_measured(judge: str, traffic: judge_rules.Traffic) -> list[judge_rules.MetricRules]:
        return [
            judge_rules.metric_rules(r.metric, r.threshold, measured, True, traffic)
            if r.metric == "faithfulness"
            else r
            for r in original(judge, traffic)
        ]

    judge_rules.judge_metric_rules = with_measured
    try:
        text = render_rules.with_judge(
            RULES.read_text(encoding="utf-8"), JUDGE, judge_rules.Traffic(rate=rate)
        )
    finally:
        judge_rules.judge_metric_rules = original
    path = workdir / "rules.holdout.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rate", type=float, default=1.0, help="evaluations a second")
    parser.add_argument("--days", type=float, default=30.0, help="steady days before the step")
    parser.add_argument("--after", type=float, default=24.0, help="hours replayed after it")
    parser.add_argument("--rules", type=Path, default=RULES)
    parser.add_argument("--module-thresholds", action="store_true")
    parser.add_argument("--holdout", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line]
    thresholds = default_thresholds() if args.module_thresholds else label_thresholds(JUDGE)
    series, matrix = judge_records(rows, thresholds)
    hallucinated = np.array([bool(r["hallucinated"]) for r in rows])
    replayed = np.ones(len(rows), dtype=bool)
    with tempfile.TemporaryDirectory(prefix="ragpulse-drop-") as tmp:
        workdir = Path(tmp)
        rules = args.rules
        if args.holdout:
            replayed = halves_by_source(rows)
            rules = _holdout_rules(workdir, rows, matrix, series, ~replayed, args.rate)
        step_minute = round(args.days * 1440)
        minutes = step_minute + round(args.after * 60)
        values = stream(
            matrix[replayed], hallucinated[replayed], args.rate, minutes, step_minute, args.seed
        )
        start = (int(__import__("time").time()) // 3600 - 24 * 40) * 3600 - minutes * STEP
        fired = replay(rules, {s: values[:, i] for i, s in enumerate(series)}, start, workdir)
    step_second = step_minute * STEP
    first: dict[str, float | None] = {"page": None, "ticket": None}
    false: dict[str, int] = {"page": 0, "ticket": 0}
    print(
        f"{len(rows)} records ({int(hallucinated[replayed].sum())} hallucinated replayed of "
        f"{int(replayed.sum())}), {args.rate:g} evaluations/s, step at day {args.days:g}"
    )
    print(f"{'alert':<34} {'severity':<8} {'false starts':>12} {'minutes to fire after step':>27}")
    for firing in fired:
        starts = episodes(firing.steps)
        steady = [s for s in starts if s < step_second]
        after = [s for s in firing.steps if s >= step_second]
        delay = (after[0] - step_second) / 60 if after else None
        if firing.severity in false:
            false[firing.severity] += len(steady)
            if delay is not None:
                current = first[firing.severity]
                first[firing.severity] = delay if current is None else min(current, delay)
        print(
            f"{firing.alert:<34} {firing.severity:<8} {len(steady):>12} "
            f"{'-' if delay is None else f'{delay:.0f}':>27}"
        )

    def shown(value: float | None) -> str:
        return "none" if value is None else f"{value:.0f}"

    print(
        f"RESULT page_minutes={shown(first['page'])} ticket_minutes={shown(first['ticket'])} "
        f"false_pages_30d={false['page']} false_tickets_30d={false['ticket']} rate={args.rate:g}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
