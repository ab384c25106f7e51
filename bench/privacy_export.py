"""What the export content policy adds to writing an evaluation's span attributes.

Every evaluation passes ``export_evaluation`` once on the worker thread before it
becomes signals. This times ``span_attributes`` of the raw evaluation (the baseline,
what emission cost before the policy) against ``export_evaluation`` followed by
``span_attributes`` (best of ``--rounds``), and gives the added time as a share of the
LexicalJudge evaluation it follows, under the three policies: content on (credentials scrubbed),
content off (lengths and offsets only), and a regex ``redact`` hook. Evaluations of
10 and 200 claims, judged by the LexicalJudge on synthetic records.

Usage: python bench/privacy_export.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Callable

from ragpulse.capture._content import ContentPolicy
from ragpulse.evaluation.types import Context, Evaluation, RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.metrics import ALL_METRICS
from ragpulse.signals.emit import EmitOptions, span_attributes
from ragpulse.signals.privacy import export_evaluation

OPTIONS = EmitOptions(inline_annotations=True)
POLICIES: dict[str, ContentPolicy] = {
    "content": ContentPolicy(),
    "no_content": ContentPolicy(capture_content=False),
    "redact": ContentPolicy(redact=lambda text: re.sub(r"\d{3}-\d{2}-\d{4}", "[SSN]", text)),
}


def evaluation(claims: int) -> tuple[Evaluation, float]:
    """A LexicalJudge evaluation of ``claims`` sentences (half unsupported), and its µs."""
    facts = [
        f"Customer {i} has account number 078-05-{1000 + i} since {1990 + i % 30}."
        for i in range(claims)
    ]
    answer = " ".join(
        fact if i % 2 == 0 else f"Customer {i} lives in city number {i * 7}."
        for i, fact in enumerate(facts)
    )
    record = RagRecord(
        "Which accounts do the customers hold?",
        (Context(" ".join(facts)),),
        answer,
        reference=" ".join(facts[: claims // 2]),
    )
    judge = LexicalJudge()
    started = time.perf_counter()
    result = asyncio.run(judge.evaluate(record, ALL_METRICS))
    return result, (time.perf_counter() - started) * 1e6


def per_call_us(work: Callable[[], object], rounds: int, repeat: int) -> float:
    """Median microseconds per call over ``rounds`` rounds of ``repeat`` calls."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(repeat):
            work()
        samples.append((time.perf_counter() - started) / repeat * 1e6)
    return min(samples)  # the least disturbed round: the machine is shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, float] = {}
    print(
        f"{'claims':>6} {'policy':<11} {'baseline µs':>12} {'with policy µs':>15} {'ratio':>6}"
        f" {'policy / judge':>15}"
    )
    for claims, repeat in ((10, 400), (200, 20)):
        raw, judged_us = evaluation(claims)
        baseline = per_call_us(
            lambda raw=raw: span_attributes(raw, OPTIONS),  # type: ignore[misc]
            args.rounds,
            repeat,
        )
        for name, policy in POLICIES.items():

            def exported(policy: ContentPolicy = policy, raw: Evaluation = raw) -> object:
                return span_attributes(export_evaluation(raw, policy), OPTIONS)

            cost = per_call_us(exported, args.rounds, repeat)
            ratio = cost / baseline
            share = (cost - baseline) / judged_us
            results[f"ratio_{name}_{claims}"] = ratio
            results[f"judge_share_{name}_{claims}"] = share
            print(
                f"{claims:>6} {name:<11} {baseline:>12.1f} {cost:>15.1f} {ratio:>6.2f}"
                f" {share:>15.3f}"
            )
    print("RESULT " + " ".join(f"{key}={value:.2f}" for key, value in results.items()))


if __name__ == "__main__":
    main()
