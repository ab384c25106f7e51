"""The token judge reads evidence first: the answer beside its claims' best sentences.

The tiny token model (``tests/models/tiny_onnx.py``) marks an answer word ``hallucinated``
when the first sequence does not hold it, so which words are flagged shows exactly which
passage sentences the model read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.models.tiny_onnx import write_token_model

from ragpulse.evaluation.types import Claim, Context, RagRecord, Verdict
from ragpulse.judges.local._onnx import Batch
from ragpulse.judges.local.token_classifier import TokenJudge

FILLER = " ".join(f"Room {n} shows old maps of the valley." for n in range(2, 30))
OPENS = "The museum opens at nine on weekdays."
MUSEUM = (
    OPENS
    + " "
    + FILLER
    + " Tickets cost ten euros for adults. Children under twelve enter free. "
    + FILLER.replace("valley", "coast")
    + " The garden closes at dusk."
)
ANSWER = "Tickets cost ten euros for adults. The garden closes at dusk."
WEEKDAYS = "The garden closes at dusk on weekdays."


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_token_model(
        tmp_path_factory.mktemp("tokens"), [MUSEUM, ANSWER, WEEKDAYS], max_length=128
    )


def fed_lengths(judge: TokenJudge) -> list[int]:
    lengths: list[int] = []
    model = judge.model
    run = model.run

    def counting(batch: Batch) -> np.ndarray:
        lengths.extend(len(ids) for ids in batch.ids)
        return run(batch)

    model.run = counting  # type: ignore[method-assign]
    return lengths


def claims_of(answer: str) -> list[Claim]:
    first = answer.index(". ") + 1 if ". " in answer else len(answer)
    found = [Claim(answer[:first], 0, first)]
    if first < len(answer):
        found.append(Claim(answer[first + 1 :], first + 1, len(answer)))
    return found


def test_the_answer_is_read_once_beside_its_claims_best_sentences_not_every_window(
    model_dir: Path,
) -> None:
    record = RagRecord(None, (Context(MUSEUM),), ANSWER)
    selective, exhaustive = TokenJudge(model_dir), TokenJudge(model_dir, evidence_anchors=None)
    few, every = fed_lengths(selective), fed_lengths(exhaustive)
    quick, whole = selective.evaluate_sync(record), exhaustive.evaluate_sync(record)
    assert [c.verdict for c in quick.claims] == [Verdict.SUPPORTED, Verdict.SUPPORTED]
    assert [c.verdict for c in whole.claims] == [c.verdict for c in quick.claims]
    assert len(few) == 1
    assert len(every) > 3 * len(few)
    assert sum(every) > 3 * sum(few)
    [(start, end, read)] = selective.readings(ANSWER, [Context(MUSEUM)], None, claims_of(ANSWER))
    assert (start, end) == (0, len(ANSWER))
    assert "Tickets cost ten euros for adults." in read
    assert "The garden closes at dusk." in read


def test_a_word_only_an_unselected_sentence_states_is_flagged(model_dir: Path) -> None:
    # With one sentence per claim and little room, "on weekdays" (in the passage's first
    # sentence, far from the garden's) is not read; every window reads it.
    narrow = TokenJudge(model_dir, evidence_anchors=1, evidence_tokens=16)
    claims = claims_of(WEEKDAYS)
    [selected] = narrow.check(WEEKDAYS, claims, [Context(MUSEUM)])
    assert selected.verdict is Verdict.NOT_FOUND
    assert [WEEKDAYS[s:e] for s, e in selected.unsupported] == ["on weekdays"]
    [every] = TokenJudge(model_dir, evidence_anchors=None).check(
        WEEKDAYS, claims, [Context(MUSEUM)]
    )
    assert every.verdict is Verdict.SUPPORTED


def test_a_sentence_an_earlier_judge_found_contradicting_is_read_beside_the_answer(
    model_dir: Path,
) -> None:
    narrow = TokenJudge(model_dir, evidence_anchors=1, evidence_tokens=16)
    forced = {0: [(0, 0, len(OPENS))]}
    [(_, _, read)] = narrow.readings(WEEKDAYS, [Context(MUSEUM)], None, claims_of(WEEKDAYS), forced)
    assert OPENS in read
    [verdict] = narrow.check(WEEKDAYS, claims_of(WEEKDAYS), [Context(MUSEUM)], None, forced)
    assert verdict.verdict is Verdict.SUPPORTED


def test_evidence_that_outgrows_the_window_is_read_in_several_sequences(tmp_path: Path) -> None:
    short = write_token_model(tmp_path, [MUSEUM, ANSWER], max_length=64)
    judge = TokenJudge(short, evidence_anchors=2, evidence_tokens=128)
    reads = judge.readings(ANSWER, [Context(MUSEUM)], None, claims_of(ANSWER))
    limit = judge.model.directory.max_length
    tokenizer = judge.model.tokenizer
    assert len(reads) > 1
    assert all(len(tokenizer.encode(read, ANSWER).ids) <= limit for _, _, read in reads)
    # Together they hold each claim's best sentences.
    assert any("Tickets cost ten euros for adults." in read for _, _, read in reads)
    assert any("The garden closes at dusk." in read for _, _, read in reads)
    record = RagRecord(None, (Context(MUSEUM),), ANSWER)
    assert [c.verdict for c in judge.evaluate_sync(record).claims] == [Verdict.SUPPORTED] * 2
