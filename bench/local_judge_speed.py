"""Records per second per core of the local model judges, and what a base-size model costs.

The models are the tiny ONNX test models (``tests/models/tiny_onnx.py``: a few graph
nodes over a vocabulary of the records' own words, 512 tokens long), so the figure
measures ragpulse's mechanics around a model: claim splitting, sentence windows,
tokenization, batching, one onnxruntime session on one thread, evidence. The offline
``LexicalJudge`` runs on the same records in the same process as the baseline; runs
alternate between the judges and the median of the rounds is reported.

What a real model adds is its own compute, which the tiny graph does not have. It is
estimated, not measured (no weights here): the bench counts the sequences and tokens
each judge feeds its model per record, and prices each sequence of n tokens at the
FLOPs of a base-size encoder (12 layers, hidden 768, feed-forward 3072:
12 * (2n * (4 * 768^2 + 2 * 768 * 3072) + 4 * n^2 * 768)), divided by the
matrix-multiply throughput this core reaches in onnxruntime on one thread (measured
here on a 512x768 by 768x3072 MatMul). Real runs are slower by the non-GEMM work
(softmax, layer norm, GELU): read it as a lower bound on seconds per record.

Usage: python bench/local_judge_speed.py [--records 60] [--rounds 3] [--data PATH]
"""

from __future__ import annotations

import os

# One core: the tokenizer's own thread pool would otherwise spread encode_batch.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ragpulse.demo.tiny_model import quantize, write_nli_model, write_token_model  # noqa: E402
from ragpulse.evaluation.types import (  # noqa: E402
    FAITHFULNESS,
    GROUNDEDNESS,
    Context,
    RagRecord,
    Verdict,
)
from ragpulse.judges.lexical._checkable import checkable_claims  # noqa: E402
from ragpulse.judges.lexical.judge import LexicalJudge  # noqa: E402
from ragpulse.judges.local._onnx import Batch  # noqa: E402
from ragpulse.judges.local._shared import LocalModelJudge  # noqa: E402
from ragpulse.judges.local.nli import COPY_REASON, NLIJudge  # noqa: E402
from ragpulse.judges.local.token_classifier import TokenJudge  # noqa: E402

DEFAULT_DATA = REPO / ".." / "shared" / "data" / "ragtruth_dev.jsonl"
METRICS = (FAITHFULNESS, GROUNDEDNESS)
MAX_LENGTH = 512
LAYERS, HIDDEN, FEED_FORWARD = 12, 768, 3072


def load_records(path: Path, limit: int) -> list[RagRecord]:
    records = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            contexts = tuple(Context(text) for text in row["context"])
            records.append(RagRecord(row.get("question"), contexts, row["answer"]))
            if len(records) >= limit:
                break
    return records


def encoder_flops(tokens: int) -> float:
    """Forward FLOPs of a base-size encoder over one sequence of ``tokens`` tokens."""
    linear = 2 * tokens * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FEED_FORWARD)
    attention = 4 * tokens * tokens * HIDDEN
    return float(LAYERS * (linear + attention))


def core_gemm_flops(seconds: float = 2.0) -> float:
    """Matrix-multiply FLOP/s of this core in onnxruntime on one thread."""
    weight = np.random.default_rng(0).standard_normal((HIDDEN, FEED_FORWARD)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [MAX_LENGTH, HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [MAX_LENGTH, FEED_FORWARD])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options)
    x = np.random.default_rng(1).standard_normal((MAX_LENGTH, HIDDEN)).astype(np.float32)
    session.run(None, {"x": x})
    runs, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        session.run(None, {"x": x})
        runs += 1
    return 2.0 * MAX_LENGTH * HIDDEN * FEED_FORWARD * runs / (time.perf_counter() - started)


class Fed:
    """The sequence lengths a local judge's model was fed."""

    def __init__(self, judge: LocalModelJudge) -> None:
        self.lengths: list[int] = []
        self.last: list[int] = []
        """The lengths of the last timed run over all records."""
        model = judge.model
        run = model.run

        def counting(batch: Batch) -> np.ndarray:
            self.lengths.extend(len(ids) for ids in batch.ids)
            return run(batch)

        model.run = counting  # type: ignore[method-assign]


def records_per_second(
    evaluate: Callable[[RagRecord], object], records: Sequence[RagRecord]
) -> float:
    started = time.perf_counter()
    for record in records:
        evaluate(record)
    return len(records) / (time.perf_counter() - started)


def overlaps(span: tuple[int, int, int], spans: Sequence[tuple[int, int, int]]) -> bool:
    index, start, end = span
    return any(i == index and s < end and start < e for i, s, e in spans)


class Coverage:
    """How often the evidence-first reading reads what decides a claim.

    - tiny: the exhaustive reading's deciding sentence (the evidence of its SUPPORTED or
      CONTRADICTED verdict) lies in the sentences the first stage selected; and how often
      the two readings give the same verdict.
    - proxy: the sentence the offline judge aligns the claim to (its evidence: a fuzzy,
      number- and name-weighted alignment, not BM25) lies in the selected sentences. A real
      model decides a supported claim on the sentence that states it; the offline judge's
      verified alignment is the model-free estimate of where that is.
    """

    def __init__(self) -> None:
        self.decided = self.decided_first = self.decided_any = 0
        self.claims = self.same_verdict = 0
        self.aligned = self.aligned_first = self.aligned_any = 0
        self.copies = self.copies_agreed = 0
        """Claims decided without the model (copies of a passage sentence), and how many of
        them the exhaustive reading also called SUPPORTED."""

    def add(
        self, exhaustive: NLIJudge, selective: NLIJudge, lexical: LexicalJudge, record: RagRecord
    ) -> None:
        answer = record.answer or ""
        claims = [c.claim for c in checkable_claims(answer)]
        if not claims:
            return
        contexts = list(record.contexts)
        whole = exhaustive.check(answer, claims, contexts, record.question)
        chosen = selective.check(answer, claims, contexts, record.question)
        spans = selective.selected(claims, contexts)
        offline = {v.claim.text: v for v in lexical.evaluate_sync(record, METRICS).claims}
        for claim, full, quick, (first, second) in zip(claims, whole, chosen, spans, strict=True):
            self.claims += 1
            self.same_verdict += full.verdict is quick.verdict
            if quick.reason == COPY_REASON:
                self.copies += 1
                self.copies_agreed += full.verdict is Verdict.SUPPORTED
            if full.evidence is not None and full.verdict in (
                Verdict.SUPPORTED,
                Verdict.CONTRADICTED,
            ):
                where = (full.evidence.context_index, full.evidence.start, full.evidence.end)
                self.decided += 1
                self.decided_first += overlaps(where, first)
                self.decided_any += overlaps(where, (*first, *second))
            aligned = offline.get(claim.text)
            if aligned is not None and aligned.evidence is not None:
                where = (
                    aligned.evidence.context_index,
                    aligned.evidence.start,
                    aligned.evidence.end,
                )
                self.aligned += 1
                self.aligned_first += overlaps(where, first)
                self.aligned_any += overlaps(where, (*first, *second))


class TokenCoverage:
    """How the token judge's evidence-first reading compares with its exhaustive one.

    - tiny: per claim, the two readings flag the same words (and so give the same verdict);
    - proxy: the sentence the offline judge aligns the claim to lies in the passages the
      evidence-first reading put beside the answer part holding the claim.
    """

    def __init__(self) -> None:
        self.claims = self.same_flags = self.same_verdict = 0
        self.aligned = self.aligned_read = 0

    def add(
        self,
        exhaustive: TokenJudge,
        selective: TokenJudge,
        lexical: LexicalJudge,
        record: RagRecord,
    ) -> None:
        answer = record.answer or ""
        claims = [c.claim for c in checkable_claims(answer)]
        if not claims:
            return
        contexts = list(record.contexts)
        whole = exhaustive.check(answer, claims, contexts, record.question)
        chosen = selective.check(answer, claims, contexts, record.question)
        read = selective.readings(answer, contexts, record.question, claims)
        offline = {v.claim.text: v for v in lexical.evaluate_sync(record, METRICS).claims}
        for claim, full, quick in zip(claims, whole, chosen, strict=True):
            self.claims += 1
            self.same_flags += full.unsupported == quick.unsupported
            self.same_verdict += full.verdict is quick.verdict
            aligned = offline.get(claim.text)
            if aligned is None or aligned.evidence is None or claim.answer_start is None:
                continue
            self.aligned += 1
            beside = [
                first
                for start, end, first in read
                if start < (claim.answer_end or start) and claim.answer_start < end
            ]
            self.aligned_read += any(aligned.evidence.text in first for first in beside)


def share(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    records = load_records(args.data, args.records)
    texts = [
        t
        for r in records
        for t in (r.question or "", r.answer or "", *(c.text for c in r.contexts))
    ]
    coverage = Coverage()
    token_coverage = TokenCoverage()
    with tempfile.TemporaryDirectory() as tmp:
        nli_dir = write_nli_model(Path(tmp) / "nli", texts, max_length=MAX_LENGTH)
        int8_dir = quantize(nli_dir, Path(tmp) / "nli-int8")
        # One thread, as the docs' figures per core: the judge's default is the CPU quota.
        nli = NLIJudge(nli_dir, threads=1)
        exhaustive = NLIJudge(nli_dir, threads=1, evidence_anchors=None)
        int8 = NLIJudge(int8_dir, threads=1)
        tokens_dir = write_token_model(Path(tmp) / "tokens", texts, max_length=MAX_LENGTH)
        tokens = TokenJudge(tokens_dir, threads=1)
        tokens_all = TokenJudge(tokens_dir, threads=1, evidence_anchors=None)
        lexical = LexicalJudge()
        judges: dict[str, Callable[[RagRecord], object]] = {
            "lexical": lambda r: lexical.evaluate_sync(r, METRICS),
            "nli_all": lambda r: exhaustive.evaluate_sync(r, METRICS),
            "nli": lambda r: nli.evaluate_sync(r, METRICS),
            "nli_int8": lambda r: int8.evaluate_sync(r, METRICS),
            "tokens_all": lambda r: tokens_all.evaluate_sync(r, METRICS),
            "tokens": lambda r: tokens.evaluate_sync(r, METRICS),
        }
        for evaluate in judges.values():  # warm up: sessions made, caches filled
            evaluate(records[0])
        fed = {
            "nli_all": Fed(exhaustive),
            "nli": Fed(nli),
            "nli_int8": Fed(int8),
            "tokens_all": Fed(tokens_all),
            "tokens": Fed(tokens),
        }
        rates: dict[str, list[float]] = {name: [] for name in judges}
        for round_ in range(args.rounds):
            order = list(judges) if round_ % 2 == 0 else list(reversed(judges))
            for name in order:
                if name in fed:
                    fed[name].lengths.clear()
                rates[name].append(records_per_second(judges[name], records))
                if name in fed:
                    fed[name].last = list(fed[name].lengths)
        for record in records:
            coverage.add(exhaustive, nli, lexical, record)
            token_coverage.add(tokens_all, tokens, lexical, record)
    median = {name: statistics.median(values) for name, values in rates.items()}
    gemm = core_gemm_flops()
    print(
        f"Local judges on {len(records)} records of {args.data.name}, one core, "
        f"{args.rounds} rounds (nli_all: every claim against every window; nli: evidence "
        "first; nli_int8: the same on the int8-quantized model; tokens_all: the answer against "
        "every window; tokens: evidence first)"
    )
    print()
    header = (
        f"{'judge':<10} {'records/s':>10} {'vs lexical':>10} {'sequences/rec':>14} "
        f"{'tokens/rec':>11} {'base model s/rec (est.)':>24}"
    )
    print(header)
    print("-" * len(header))
    estimates: dict[str, float] = {}
    per_record: dict[str, tuple[float, float]] = {}
    for name in judges:
        row = f"{name:<10} {median[name]:>10.1f} {median[name] / median['lexical']:>10.3f}"
        if name in fed:
            lengths = fed[name].last
            sequences = len(lengths) / len(records)
            tokens_per = sum(lengths) / len(records)
            seconds = sum(encoder_flops(n) for n in lengths) / gemm / len(records)
            estimates[name] = seconds
            per_record[name] = (sequences, tokens_per)
            row += f" {sequences:>14.1f} {tokens_per:>11.0f} {seconds:>24.2f}"
        print(row)
    print()
    print(
        f"Core MatMul throughput in onnxruntime, one thread: {gemm / 1e9:.1f} GFLOP/s. A base-size "
        "encoder's seconds per record are its FLOPs over the sequences fed, at that rate."
    )
    c = coverage
    print(
        f"Evidence coverage over {c.claims} claims: the exhaustive reading's deciding sentence "
        f"is in the first reading for {share(c.decided_first, c.decided):.1%} of the "
        f"{c.decided} claims it decided ({share(c.decided_any, c.decided):.1%} with the second); "
        f"the verdicts agree on {share(c.same_verdict, c.claims):.1%}. Proxy: the offline "
        f"judge's aligned sentence is in the first reading for "
        f"{share(c.aligned_first, c.aligned):.1%} of {c.aligned} aligned claims "
        f"({share(c.aligned_any, c.aligned):.1%} with the second). Decided without the model "
        f"(copies of a passage sentence): {c.copies} claims, of which the exhaustive reading "
        f"also called {c.copies_agreed} SUPPORTED."
    )
    t = token_coverage
    same_verdict = share(t.same_verdict, t.claims)
    print(
        f"Token judge over {t.claims} claims: evidence first and every window flag the same words "
        f"for {share(t.same_flags, t.claims):.1%} (same verdict {same_verdict:.1%}); proxy: "
        "the offline judge's aligned sentence is read beside the claim for "
        f"{share(t.aligned_read, t.aligned):.1%} of {t.aligned} aligned claims."
    )
    all_seq, all_tok = per_record["nli_all"]
    seq, tok = per_record["nli"]
    print(
        "RESULT "
        f"records={len(records)} "
        f"lexical_records_per_s={median['lexical']:.1f} "
        f"nli_exhaustive_records_per_s={median['nli_all']:.1f} "
        f"nli_records_per_s={median['nli']:.1f} "
        f"nli_int8_records_per_s={median['nli_int8']:.1f} "
        f"tokens_records_per_s={median['tokens']:.1f} "
        f"nli_vs_lexical={median['nli'] / median['lexical']:.3f} "
        f"tokens_exhaustive_records_per_s={median['tokens_all']:.1f} "
        f"tokens_vs_lexical={median['tokens'] / median['lexical']:.3f} "
        f"nli_exhaustive_sequences_per_record={all_seq:.1f} "
        f"nli_sequences_per_record={seq:.1f} "
        f"nli_exhaustive_tokens_per_record={all_tok:.0f} "
        f"nli_tokens_per_record={tok:.0f} "
        f"nli_sequence_reduction={all_seq / seq:.2f} "
        f"nli_token_reduction={all_tok / tok:.2f} "
        f"nli_claims_without_model={c.copies} "
        f"nli_claims_without_model_agreed={c.copies_agreed} "
        f"tokens_exhaustive_sequences_per_record={per_record['tokens_all'][0]:.1f} "
        f"tokens_sequences_per_record={per_record['tokens'][0]:.1f} "
        f"tokens_exhaustive_tokens_per_record={per_record['tokens_all'][1]:.0f} "
        f"tokens_tokens_per_record={per_record['tokens'][1]:.0f} "
        f"core_gflops={gemm / 1e9:.1f} "
        f"base_nli_exhaustive_s_per_record={estimates['nli_all']:.2f} "
        f"base_nli_s_per_record={estimates['nli']:.2f} "
        f"base_tokens_exhaustive_s_per_record={estimates['tokens_all']:.2f} "
        f"base_tokens_s_per_record={estimates['tokens']:.2f} "
        f"tiny_deciding_in_first={share(c.decided_first, c.decided):.3f} "
        f"tiny_deciding_in_selected={share(c.decided_any, c.decided):.3f} "
        f"tiny_verdict_agreement={share(c.same_verdict, c.claims):.3f} "
        f"proxy_aligned_in_first={share(c.aligned_first, c.aligned):.3f} "
        f"proxy_aligned_in_selected={share(c.aligned_any, c.aligned):.3f} "
        f"tokens_tiny_same_flags={share(t.same_flags, t.claims):.3f} "
        f"tokens_proxy_aligned_read={share(t.aligned_read, t.aligned):.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
