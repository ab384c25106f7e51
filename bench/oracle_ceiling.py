"""The LLM judge's ceiling: ``OpenAIJudge`` fed by a model that knows RAGTruth's human labels.

A local Chat Completions server (the project's test server, speaking the real protocol
to the real ``openai`` client) answers the judge's claims prompt from the human span
labels of the RAGTruth development set (``tests/servers/oracle_judge.py``):

- the perfect model: every answer sentence holding a labelled span is NOT_FOUND, with
  exactly the labelled words as its unsupported phrases; every other sentence is
  SUPPORTED with a verbatim quote of its context;
- the noisy model: the same, with ``--flip`` of the verdicts flipped and ``--paraphrase``
  of the quotes re-worded (seeded).

Everything the judge does after the reply (claim anchoring, quote verification, the
guard and its offline cross-check, mapping phrases to answer ranges, the metric
arithmetic) runs as in production. What the perfect model loses on the way is ragpulse's
own loss, so its figures are an upper bound of the pipeline, not a model's accuracy.
The measures (AUROC of 1 - faithfulness, character-level span F1 against the human
spans) are ``bench/ragtruth.py``'s.

Usage: python bench/oracle_ceiling.py [--data PATH] [--records N] [--flip 0.2]
       [--paraphrase 0.2] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The test server lives in the repository's tests package, not in the installed library.
sys.path.insert(0, str(REPO))

from bench.ragtruth import DEFAULT_DATA, METRICS, TASKS, Outcome, outcome, record_of, span_f1  # noqa: E402
from tests.servers.chat_server import ChatServer  # noqa: E402
from tests.servers.oracle_judge import LabelledRecord, OracleJudge  # noqa: E402

from ragpulse.evaluation.types import EvalStatus, Evaluation  # noqa: E402
from ragpulse.judges.llm.openai import OpenAIJudge  # noqa: E402
from ragpulse.offline.calibrate import auroc  # noqa: E402

CONCURRENCY = 8


def labelled(row: Mapping[str, Any]) -> LabelledRecord:
    """The row as the oracle reads it: answer, contexts, human-marked ranges."""
    spans = tuple((int(s["start"]), int(s["end"])) for s in row["spans"])
    return LabelledRecord(row["answer"], tuple(row["context"]), spans)


async def judge_all(
    rows: Sequence[Mapping[str, Any]], oracle: OracleJudge, strict_quotes: bool | None = None
) -> tuple[list[Evaluation], int]:
    """Every row judged by ``OpenAIJudge`` against the oracle; the server's request count."""
    with ChatServer(responder=oracle) as server:
        judge = OpenAIJudge(
            "oracle", base_url=server.url, api_key="bench", strict_quotes=strict_quotes
        )
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(row: Mapping[str, Any]) -> Evaluation:
            async with limit:
                return await judge.evaluate(record_of(row), METRICS)

        try:
            evaluations = list(await asyncio.gather(*(one(r) for r in rows)))
        finally:
            await judge.aclose()
        return evaluations, server.request_count


def figures(
    outcomes: Sequence[Outcome], labels: Sequence[bool]
) -> tuple[float, float, float, float]:
    """(AUROC of 1 - faithfulness, span precision, span recall, span F1)."""
    precision, recall, f1 = span_f1(outcomes)
    return auroc([o.risk for o in outcomes], labels), precision, recall, f1


def _guard_tally(evaluations: Sequence[Evaluation]) -> str:
    """What the guard did to the model's verdicts: where a perfect model's score is lost."""
    reasons = [c.reason or "" for e in evaluations for c in e.claims]
    kinds = {
        "quote states too little": "does not state",
        "of which stand as INFERRED": "so it is inferred",
        "quote unrelated": "does not speak of",
        "no quote": "without a quote",
        "name not in context": "does not name",
        "offline contradiction": "the offline judge finds a different value",
        "offline backing": "with its own verified span",
        "left to the offline judge": "not covered by the judge's claims",
    }
    counts = {kind: sum(1 for r in reasons if text in r) for kind, text in kinds.items()}
    return f"{len(reasons)} claims; " + ", ".join(f"{k} {v}" for k, v in counts.items() if v)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--records", type=int, default=0, help="first N records (0: all)")
    parser.add_argument("--flip", type=float, default=0.2, help="noisy model: verdicts flipped")
    parser.add_argument(
        "--paraphrase", type=float, default=0.2, help="noisy model: quotes re-worded"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"dataset not found: {args.data} (pass --data)")
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines()]
    if args.records:
        rows = rows[: args.records]
    labels = [bool(r["hallucinated"]) for r in rows]
    records = [labelled(r) for r in rows]
    perfect = OracleJudge(records)
    noisy = OracleJudge(records, flip=args.flip, paraphrase=args.paraphrase, seed=args.seed)
    # Default quote checks (strict only where the request addresses the judge; no record
    # here does), then the strict checks asked for every request.
    models: dict[str, tuple[OracleJudge, bool | None]] = {
        "perfect": (perfect, None),
        "noisy": (noisy, None),
        "perfect-strict": (perfect, True),
        "noisy-strict": (noisy, True),
    }
    print(
        f"OpenAIJudge against an oracle model on {args.data.name}: {len(rows)} responses "
        f"({sum(labels)} hallucinated); noisy = {args.flip:.0%} verdicts flipped, "
        f"{args.paraphrase:.0%} quotes re-worded, seed {args.seed}"
    )
    header = (
        f"{'model':<14} {'subset':<9} {'n':>4} {'AUROC':>6} {'spanP':>6} {'spanR':>6} "
        f"{'spanF1':>6} {'errors':>6} {'calls/eval':>10}"
    )
    print(header)
    print("-" * len(header))
    result: dict[str, float] = {}
    for name, (oracle, strict) in models.items():
        started = time.perf_counter()
        evaluations, calls = asyncio.run(judge_all(rows, oracle, strict))
        seconds = time.perf_counter() - started
        outcomes = [outcome(e, r) for e, r in zip(evaluations, rows, strict=True)]
        failed = sum(1 for e in evaluations if e.status is EvalStatus.ERROR)
        for subset in (None, *TASKS):
            picks = [i for i, r in enumerate(rows) if subset is None or r["task_type"] == subset]
            au, precision, recall, f1 = figures(
                [outcomes[i] for i in picks], [labels[i] for i in picks]
            )
            errors = sum(1 for i in picks if evaluations[i].status is EvalStatus.ERROR)
            print(
                f"{name:<14} {subset or 'all':<9} {len(picks):>4} {au:>6.3f} {precision:>6.3f} "
                f"{recall:>6.3f} {f1:>6.3f} {errors:>6d} "
                f"{calls / len(rows) if subset is None else float('nan'):>10.2f}"
            )
        print(f"  ({name}: {_guard_tally(evaluations)})")
        au, _, _, f1 = figures(outcomes, labels)
        key = name.replace("perfect", "oracle").replace("-", "_")
        result[f"{key}_auroc"] = au
        result[f"{key}_span_f1"] = f1
        print(f"  ({name}: {len(rows) / seconds:.1f} evaluations/s, {failed} errors)")
    print(
        "AUROC = of 1 - faithfulness against the human 'hallucinated' label; span = character "
        "overlap of flagged answer ranges with the human spans. An upper bound of the "
        "pipeline (what survives claim anchoring, quote checks, the guard and span mapping), "
        "not a model's accuracy."
    )
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
