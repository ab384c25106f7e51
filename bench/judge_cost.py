"""What one ``OpenAIJudge`` evaluation costs: judge calls and prompt tokens, counted at the server.

Runs ``OpenAIJudge`` over N records against the local Chat Completions test server
(echo-judge mode, so the judge's replies are well-formed and the full path runs:
structured output, parsing, evidence verification, scoring), once without a
reference (faithfulness + groundedness), once with one (all three metrics), and
once with every metric of the vector on (relevancy, completeness from a rubric,
citation, answerability too), where the judge must still make at most two calls, and
once with the context metrics as well, which add one call for all of them.
Calls and prompt tokens are counted from the requests the server received, not
from what the judge reports. Tokens are the server's deterministic estimate
(words plus punctuation marks), close to but not a model tokenizer's count.

Beside them: the 8 calls Ragas makes for the same three metrics on one sample
(Faithfulness 2: statements, then verdicts; FactualCorrectness(mode="f1") 4:
decompose the response and the reference, verify each direction;
ResponseGroundedness 2: two judge templates).

Records come from ``../shared/data/ragtruth_dev.jsonl`` beside the repository
when it exists (QA records, which carry a question), from a built-in set otherwise.
RAGTruth has no reference answers, so the first two sentences of the first
context stand in for one, and its first three sentences for a rubric: the cost
depends on their length, not on their truth.

The cascade run (``CascadeJudge``: the offline ``LexicalJudge`` screens every
record, the same ``OpenAIJudge`` decides where the screen is unsure) reports the
share of records escalated, why (how many records have a claim NOT_FOUND or
CONTRADICTED, a claim without a confidence, a claim whose confidence lies in the band),
and the LLM calls per request, against the OpenAIJudge alone on the same records.

Usage: python bench/judge_cost.py [--records 100] [--data PATH] [--band 0.35,0.85]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The test server lives in the repository's tests package, not in the installed library.
sys.path.insert(0, str(REPO))

from tests.servers.chat_server import ChatServer, count_tokens  # noqa: E402

from ragpulse.evaluation.types import (  # noqa: E402
    FAITHFULNESS,
    GROUNDEDNESS,
    Context,
    EvalStatus,
    Evaluation,
    RagRecord,
    Verdict,
)
from ragpulse.judges._kinds import DEFAULT_BAND, parse_band  # noqa: E402
from ragpulse.judges.lexical.judge import LexicalJudge  # noqa: E402
from ragpulse.judges.llm.openai import OpenAIJudge  # noqa: E402
from ragpulse.judging.cascade import CascadeJudge  # noqa: E402
from ragpulse.metrics import ALL_METRICS, METRICS  # noqa: E402

DEFAULT_DATA = REPO / ".." / "shared" / "data" / "ragtruth_dev.jsonl"
ANSWER_METRICS = tuple(m for m in METRICS if not m.startswith("context_"))
"""The answer's six metrics; the context metrics add their own call (``+ context``)."""
RAGAS_CALLS = {"Faithfulness": 2, "FactualCorrectness(f1)": 4, "ResponseGroundedness": 2}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

_BUILT_IN = [
    (
        "When was the Eiffel Tower completed?",
        [
            "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. "
            "It was designed by the engineering firm of Gustave Eiffel.",
            "At 330 metres, it was the tallest man-made structure in the world until 1930.",
        ],
        "The Eiffel Tower was completed in 1889. It was the tallest structure until 1930.",
    ),
    (
        "What does the Python GIL do?",
        [
            "The global interpreter lock lets only one thread execute Python bytecode at a "
            "time. It simplifies memory management in CPython.",
            "Python 3.13 offers an experimental free-threaded build without the GIL.",
        ],
        "The GIL lets one thread run Python bytecode at a time. Python 3.13 can run without it.",
    ),
]


@dataclass(frozen=True)
class Cost:
    """What one evaluation cost, as counted at the server."""

    calls: int
    prompt_tokens: int
    instruction_tokens: int
    """The part of ``prompt_tokens`` that is ragpulse's fixed instructions (system message)."""
    completion_tokens_reported: int
    ok: bool


def load_records(path: Path, limit: int) -> list[RagRecord]:
    """QA records from the RAGTruth dev file, or the built-in ones, cycled up to ``limit``."""
    records: list[RagRecord] = []
    if path.exists():
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                if row.get("task_type") != "QA" or not row.get("question"):
                    continue
                contexts = tuple(Context(text) for text in row["context"])
                records.append(RagRecord(row["question"], contexts, row["answer"]))
                if len(records) >= limit:
                    break
    if not records:
        built_in = [RagRecord(q, tuple(Context(t) for t in c), a) for q, c, a in _BUILT_IN]
        records = [built_in[i % len(built_in)] for i in range(limit)]
    return records


def with_reference(record: RagRecord) -> RagRecord:
    """The record with a stand-in reference: the first two sentences of its first context."""
    first = record.contexts[0].text if record.contexts else (record.answer or "")
    reference = " ".join(_SENTENCE.split(first.strip())[:2])
    return RagRecord(record.question, record.contexts, record.answer, reference=reference)


def with_rubric(record: RagRecord) -> RagRecord:
    """The record with a reference and a stand-in rubric: the first context's first sentences."""
    first = record.contexts[0].text if record.contexts else (record.answer or "")
    points = tuple(s for s in _SENTENCE.split(first.strip())[:3] if s.strip())
    referenced = with_reference(record)
    return RagRecord(
        referenced.question,
        referenced.contexts,
        referenced.answer,
        reference=referenced.reference,
        rubric=points,
    )


async def measure(
    server: ChatServer, judge: OpenAIJudge, records: Sequence[RagRecord], metrics: Sequence[str]
) -> list[Cost]:
    """Evaluate the records one at a time, attributing the server's new requests to each."""
    costs: list[Cost] = []
    for record in records:
        seen = len(server.chat_requests)
        evaluation = await judge.evaluate(record, metrics)
        new = server.chat_requests[seen:]
        costs.append(
            Cost(
                calls=len(new),
                prompt_tokens=sum(r.prompt_tokens for r in new),
                instruction_tokens=sum(count_tokens(r.system) for r in new),
                completion_tokens_reported=evaluation.usage.completion_tokens,
                ok=evaluation.status in (EvalStatus.OK, EvalStatus.NO_CLAIMS),
            )
        )
    return costs


def escalation_reasons(screened: Evaluation, band: tuple[float, float]) -> list[str]:
    """Every reason the cascade has to escalate the screen's result (empty: none)."""
    if screened.status is EvalStatus.ERROR:
        return ["screen failed"]
    checks = {
        "flagged claim": lambda c: c.verdict in (Verdict.NOT_FOUND, Verdict.CONTRADICTED),
        "no confidence": lambda c: c.confidence is None,
        "in band": lambda c: c.confidence is not None and band[0] <= c.confidence <= band[1],
    }
    return [name for name, holds in checks.items() if any(holds(c) for c in screened.claims)]


async def measure_cascade(
    server: ChatServer, records: Sequence[RagRecord], band: tuple[float, float]
) -> tuple[list[int], list[bool], dict[str, int]]:
    """LLM calls per record and whether it escalated, through a cascade; reasons counted."""
    llm = OpenAIJudge("echo-judge", base_url=server.url, api_key="bench")
    screen = LexicalJudge()
    cascade = CascadeJudge(screen, llm, band=band, isolate_cpu_bound=False)
    calls: list[int] = []
    escalated: list[bool] = []
    reasons: dict[str, int] = {}
    try:
        for record in records:
            seen = len(server.chat_requests)
            evaluation = await cascade.evaluate(record, (FAITHFULNESS, GROUNDEDNESS))
            calls.append(len(server.chat_requests) - seen)
            escalated.append(bool(evaluation.escalated))
            screened = screen.evaluate_sync(record, (FAITHFULNESS, GROUNDEDNESS))
            for reason in escalation_reasons(screened, band):
                reasons[reason] = reasons.get(reason, 0) + 1
    finally:
        await llm.aclose()
    return calls, escalated, reasons


def _p(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(
    records: list[RagRecord], band: tuple[float, float]
) -> tuple[dict[str, list[Cost]], tuple[list[int], list[bool], dict[str, int]]]:
    with ChatServer(mode="echo-judge") as server:
        judge = OpenAIJudge("echo-judge", base_url=server.url, api_key="bench")
        try:
            costs = {
                "no reference": await measure(server, judge, records, (FAITHFULNESS, GROUNDEDNESS)),
                "with reference": await measure(
                    server, judge, [with_reference(r) for r in records], ALL_METRICS
                ),
                "whole vector": await measure(
                    server, judge, [with_rubric(r) for r in records], ANSWER_METRICS
                ),
                "+ context": await measure(
                    server, judge, [with_rubric(r) for r in records], METRICS
                ),
            }
        finally:
            await judge.aclose()
        return costs, await measure_cascade(server, records, band)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--band", type=parse_band, default=DEFAULT_BAND, help="LOW,HIGH")
    args = parser.parse_args()

    records = load_records(args.data, args.records)
    source = "ragtruth_dev QA" if args.data.exists() else "built-in"
    results, (cascade_calls, escalated, reasons) = asyncio.run(run(records, args.band))
    ragas_calls = sum(RAGAS_CALLS.values())

    print(
        f"OpenAIJudge cost per evaluation, {len(records)} records ({source}), counted at the server"
    )
    print()
    header = (
        f"{'run':<16} {'metrics':<8} {'calls/eval':>10} {'max calls':>9} "
        f"{'prompt tok/eval':>15} {'p90 prompt tok':>14} {'of which instr.':>15} {'ok':>7}"
    )
    print(header)
    print("-" * len(header))
    summary: dict[str, tuple[float, int, float]] = {}
    for run_name, costs in results.items():
        calls = [c.calls for c in costs]
        tokens = [float(c.prompt_tokens) for c in costs]
        ok = sum(1 for c in costs if c.ok)
        metrics = {"no reference": "F+G", "with reference": "F+G+C", "+ context": "all 10"}.get(
            run_name, "all 6"
        )
        mean_calls = statistics.fmean(calls)
        mean_tokens = statistics.fmean(tokens)
        summary[run_name] = (mean_calls, max(calls), mean_tokens)
        print(
            f"{run_name:<16} {metrics:<8} {mean_calls:>10.2f} {max(calls):>9d} "
            f"{mean_tokens:>15.0f} {_p(tokens, 0.9):>14.0f} "
            f"{statistics.fmean(c.instruction_tokens for c in costs):>15.0f} "
            f"{ok:>3d}/{len(costs)}"
        )
    print()
    print("Ragas, same three metrics, one sample:")
    for metric, metric_calls in RAGAS_CALLS.items():
        print(f"  {metric:<24} {metric_calls} calls")
    print(f"  {'total':<24} {ragas_calls} calls")
    with_ref_calls = summary["with reference"][0]
    print()
    print(
        f"OpenAIJudge makes {with_ref_calls:.2f} calls for all three metrics "
        f"({with_ref_calls / ragas_calls:.0%} of Ragas' {ragas_calls})."
    )
    no_ref, with_ref = summary["no reference"], summary["with reference"]
    vector = summary["whole vector"]
    print(
        f"With every metric on (relevancy, completeness, citation, answerability too): "
        f"{vector[0]:.2f} calls, at most {vector[1]}, {vector[2]:.0f} prompt tokens per "
        f"evaluation ({vector[2] / with_ref[2]:.2f}x the three metrics' prompt)."
    )
    context = summary["+ context"]
    print(
        f"With the context metrics too (relevance, precision, recall, utilisation: one call "
        f"for all of them): {context[0]:.2f} calls, at most {context[1]}, {context[2]:.0f} "
        f"prompt tokens per evaluation ({context[2] / vector[2]:.2f}x the six metrics')."
    )
    share = sum(escalated) / len(escalated)
    cascade_per_request = statistics.fmean(cascade_calls)
    print()
    print(
        f"Cascade (lexical screen, OpenAIJudge where unsure, band {args.band[0]:g}-"
        f"{args.band[1]:g}), faithfulness + groundedness:"
    )
    print(
        f"  escalated {sum(escalated)} of {len(escalated)} records ({share:.0%}); "
        f"{cascade_per_request:.2f} LLM calls per request against {no_ref[0]:.2f} for the "
        f"OpenAIJudge alone ({cascade_per_request / no_ref[0]:.0%})"
    )
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        print(f"  {reason:<16} {count:>5} records")
    print(
        "RESULT "
        f"records={len(records)} "
        f"cascade_escalated_share={share:.3f} "
        f"cascade_calls_per_request={cascade_per_request:.2f} "
        f"cascade_call_ratio_vs_llm={cascade_per_request / no_ref[0]:.3f} "
        f"calls_per_eval_no_reference={no_ref[0]:.2f} "
        f"calls_per_eval_with_reference={with_ref[0]:.2f} "
        f"max_calls_per_eval={max(no_ref[1], with_ref[1], vector[1])} "
        f"calls_per_eval_all_metrics={vector[0]:.2f} "
        f"max_calls_per_eval_all_metrics={vector[1]} "
        f"prompt_tokens_per_eval_all_metrics={vector[2]:.0f} "
        f"prompt_ratio_all_vs_three={vector[2] / with_ref[2]:.3f} "
        f"calls_per_eval_with_context={context[0]:.2f} "
        f"max_calls_per_eval_with_context={context[1]} "
        f"prompt_ratio_context_vs_six={context[2] / vector[2]:.3f} "
        f"ragas_calls_per_eval={ragas_calls} "
        f"call_ratio_vs_ragas={with_ref[0] / ragas_calls:.3f} "
        f"prompt_tokens_per_eval_no_reference={no_ref[2]:.0f} "
        f"prompt_tokens_per_eval_with_reference={with_ref[2]:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
