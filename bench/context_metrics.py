"""The context metrics and the diagnosis, measured with retrieval faults made from real records.

No data set here labels its passages, so the faults are made the way they happen: each
record keeps its answer and question, and its passages are replaced by those of another
record about something else (a wrong-passage retrieval). What the offline judge should
see, on records it was not written against:

- context relevance of the record's own passages above that of the swapped ones (AUROC,
  own = positive);
- context recall, with the faithful answer standing in for a reference: high on the own
  passages, low on the swapped ones (AUROC);
- context precision: the own passage ranked first among two swapped ones scores higher
  than ranked last (share of records, ties count half);
- diagnosis: a faithful answer over its own passages is ``ok``, a hallucinated one
  ``generation_drift``, and any answer over swapped passages ``retrieval_miss``
  (share diagnosed as expected, per case).

Data: ``bench/data/other_domains.jsonl`` (hand-written, 16 domains) and
``bench/data/begin_wow_dev.jsonl`` (BEGIN dialogue), and RAGTruth dev QA beside the
repository when it exists. The swap partner is the next record of another ``source_id``
(deterministic). Records without a question are skipped.

Usage: python bench/context_metrics.py [--limit 200] [--ragtruth PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ragpulse.evaluation.diagnosis import GENERATION_DRIFT, OK, RETRIEVAL_MISS  # noqa: E402
from ragpulse.evaluation.types import Context, Evaluation, RagRecord  # noqa: E402
from ragpulse.judges.lexical.judge import LexicalJudge  # noqa: E402
from ragpulse.offline.calibrate import auroc  # noqa: E402

DATA = {
    "other_domains": REPO / "bench" / "data" / "other_domains.jsonl",
    "begin_wow_dev": REPO / "bench" / "data" / "begin_wow_dev.jsonl",
    "ragtruth_dev_qa": REPO / ".." / "shared" / "data" / "ragtruth_dev.jsonl",
}
CONTEXT = ("context_relevance", "context_precision", "context_recall")
ANSWER = ("faithfulness", "groundedness", "correctness")


@dataclass(frozen=True)
class Row:
    """One record as the bench reads it."""

    source: str
    question: str
    contexts: tuple[str, ...]
    answer: str
    hallucinated: bool


def rows(path: Path, limit: int) -> list[Row]:
    """Records with a question and passages, up to ``limit``."""
    found: list[Row] = []
    if not path.exists():
        return found
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            question, contexts = row.get("question"), row.get("context") or []
            if not question or not contexts or not row.get("answer"):
                continue
            found.append(
                Row(str(row.get("source_id")), question, tuple(contexts), row["answer"],
                    bool(row.get("hallucinated")))
            )  # fmt: skip
            if len(found) >= limit:
                break
    return found


def partners(data: list[Row], n: int = 1) -> Iterator[tuple[Row, list[Row]]]:
    """Each row with the next ``n`` rows of other sources (wrapping around)."""
    for i, row in enumerate(data):
        others = [data[(i + k) % len(data)] for k in range(1, len(data))]
        picked = [o for o in others if o.source != row.source][:n]
        if len(picked) == n:
            yield row, picked


def judge(
    question: str, contexts: tuple[str, ...], answer: str, reference: str | None
) -> Evaluation:
    record = RagRecord(question, tuple(Context(c) for c in contexts), answer, reference=reference)
    return LexicalJudge().evaluate_sync(record, (*ANSWER, *CONTEXT))


def _share(hits: list[bool]) -> float:
    return sum(hits) / len(hits) if hits else float("nan")


def measure(data: list[Row]) -> dict[str, float]:
    """The figures of one data set."""
    relevance: list[tuple[float, bool]] = []
    recall: list[tuple[float, bool]] = []
    precision_wins: list[float] = []
    diagnosed: dict[str, list[bool]] = {"own_faithful": [], "own_hallucinated": [], "swapped": []}
    for row, (other, third) in partners(data, 2):
        own = judge(row.question, row.contexts, row.answer, None)
        swapped = judge(row.question, other.contexts, row.answer, None)
        for evaluation, positive in ((own, True), (swapped, False)):
            score = evaluation.score("context_relevance")
            if score is not None:
                relevance.append((score, positive))
        case = "own_hallucinated" if row.hallucinated else "own_faithful"
        expected = GENERATION_DRIFT if row.hallucinated else OK
        diagnosed[case].append(own.diagnosis == expected)
        diagnosed["swapped"].append(swapped.diagnosis == RETRIEVAL_MISS)
        if row.hallucinated:
            continue
        # The faithful answer stands in for a reference of what retrieval should find.
        for contexts, positive in ((row.contexts, True), (other.contexts, False)):
            score = judge(row.question, contexts, row.answer, row.answer).score("context_recall")
            if score is not None:
                recall.append((score, positive))
        distractors = (*other.contexts[:1], *third.contexts[:1])
        first = judge(row.question, (row.contexts[0], *distractors), row.answer, row.answer)
        last = judge(row.question, (*distractors, row.contexts[0]), row.answer, row.answer)
        a, b = first.score("context_precision"), last.score("context_precision")
        if a is not None and b is not None:
            precision_wins.append(1.0 if a > b else 0.5 if a == b else 0.0)
    return {
        "pairs": len(diagnosed["swapped"]),
        # auroc ranks risks: a low score is the risk, own passages the negatives.
        "relevance_auroc": auroc([1 - s for s, _ in relevance], [not p for _, p in relevance]),
        "recall_auroc": auroc([1 - s for s, _ in recall], [not p for _, p in recall]),
        "precision_first_beats_last": statistics.fmean(precision_wins)
        if precision_wins
        else float("nan"),
        "diagnosis_own_faithful_ok": _share(diagnosed["own_faithful"]),
        "diagnosis_own_hallucinated_drift": _share(diagnosed["own_hallucinated"]),
        "diagnosis_swapped_retrieval_miss": _share(diagnosed["swapped"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--limit", type=int, default=200, help="records per data set")
    parser.add_argument(
        "--ragtruth", type=Path, default=DATA["ragtruth_dev_qa"], help="RAGTruth dev JSONL"
    )
    args = parser.parse_args()
    DATA["ragtruth_dev_qa"] = args.ragtruth
    results = {}
    for name, path in DATA.items():
        data = rows(path, args.limit)
        if name == "ragtruth_dev_qa":
            data = [r for r in data if r.source]  # RAGTruth QA rows carry their source id
        if len(data) >= 3:
            results[name] = measure(data)
    columns = list(next(iter(results.values())))
    print("Context metrics and diagnosis, offline judge, passages swapped with another record's")
    print()
    print(f"{'figure':<36}" + "".join(f"{name:>18}" for name in results))
    for column in columns:
        print(f"{column:<36}" + "".join(f"{f[column]:>18.3f}" for f in results.values()))
    print()
    print(
        "RESULT "
        + " ".join(
            f"{name}_{column}={figures[column]:.3f}"
            for name, figures in results.items()
            for column in columns
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
