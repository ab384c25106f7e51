"""What a local model costs per record, estimated from its size before it runs.

A transformer encoder's forward pass over one sequence of n tokens costs, per layer,
``2n(4h² + 2hf) + 4n²h`` FLOPs (h the hidden width, f the feed-forward width: the
projections, then attention's two n×n products). A typical record is what
``bench/local_judge_speed.py`` measured the judges feeding their model on RAGTruth dev
records (sequences and tokens per record); the rate is a CPU core shared with other
work (``CORE_FLOPS``: the bench measured about 110 GFLOP/s of matrix multiplication on
an idle core and 11.5 on a busy one), times the session's threads. Real runs add the
work that is not matrix multiplication (softmax, normalisation, activations), so read
it as an order of magnitude. On an accelerator the real cost is far lower; the
estimate stays the CPU's (an upper bound).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragpulse.judges.local._device import session_threads

if TYPE_CHECKING:
    from ragpulse.judges.local._shared import LocalModelJudge

__all__ = ["BASE_SIZE", "CORE_FLOPS", "TYPICAL_RECORD", "encoder_flops", "estimated_seconds"]

CORE_FLOPS = 20e9
"""Matrix-multiply FLOP/s of one thread on a core the judge shares with other work."""
BASE_SIZE = (12, 768, 3072)
"""Layers, hidden and feed-forward width assumed when config.json does not say (a base
encoder)."""
TYPICAL_RECORD = {"nli": (8.8, 1135.0), "tokens": (2.3, 979.0)}
"""Sequences and tokens each judge feeds its model per RAGTruth dev record, as
``bench/local_judge_speed.py --records 30`` measured them (both reading evidence
first, on models 512 tokens long)."""


def encoder_flops(tokens: float, size: tuple[int, int, int] = BASE_SIZE) -> float:
    """Forward FLOPs of an encoder of ``size`` over one sequence of ``tokens`` tokens."""
    layers, hidden, feed_forward = size
    linear = 2 * tokens * (4 * hidden * hidden + 2 * hidden * feed_forward)
    attention = 4 * tokens * tokens * hidden
    return float(layers * (linear + attention))


def estimated_seconds(judge: object) -> float | None:
    """Seconds a typical record costs the local model ``judge`` runs (also inside a
    cascade or a resilient wrapper); None for a judge that runs no local model."""
    from ragpulse.judges.local._shared import LocalModelJudge

    parts, seen = [judge], 0
    while parts and seen < 8:  # the wrappers' chain is short; never follow a cycle
        part, seen = parts.pop(0), seen + 1
        if isinstance(part, LocalModelJudge):
            return _seconds(part) if part.problem is None else None
        parts.extend(
            inner
            for inner in (getattr(part, n, None) for n in ("escalate", "primary", "judge"))
            if inner is not None
        )
    return None


def _seconds(judge: LocalModelJudge) -> float:
    sequences, tokens = TYPICAL_RECORD.get(judge.default_name, TYPICAL_RECORD["nli"])
    directory = judge.model.directory
    size = directory.size or BASE_SIZE
    per_sequence = tokens / sequences
    threads = session_threads(judge.threads, judge.model.processes)
    return sequences * encoder_flops(per_sequence, size) / (CORE_FLOPS * threads)
