"""Evidence first, then the model: the sentences each claim is read against.

``NLIJudge`` reads a claim against a premise of the passage sentences BM25 ranks best
for it, not against every window. The tiny model (``ragpulse.demo.tiny_model``) entails
a hypothesis whose every word is in the premise, so what it says follows from which
sentences were read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.models.tiny_onnx import vocabulary, write_nli_model, write_tokenizer

from ragpulse.evaluation.types import Claim, Context, RagRecord, Verdict
from ragpulse.judges.local._evidence import SentenceIndex
from ragpulse.judges.local._onnx import Batch
from ragpulse.judges.local.nli import COPY_REASON, NLIJudge

FILLER = " ".join(f"Room {n} shows old maps of the valley." for n in range(2, 30))
MUSEUM = (
    "The museum opens at nine on weekdays. "
    + FILLER
    + " Tickets cost ten euros for adults. Children under twelve enter free. "
    + FILLER.replace("valley", "coast")
    + " The garden closes at dusk."
)
# Each claim's words are all in one sentence, reordered: the model reads them (a copy of a
# sentence word for word needs no model, see below).
CLAIMS = ["For adults tickets cost ten euros.", "At dusk the garden closes."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nli_model(
        tmp_path_factory.mktemp("nli"), [MUSEUM, *CLAIMS, "The cafe was denied."], max_length=256
    )


def fed_lengths(judge: NLIJudge) -> list[int]:
    lengths: list[int] = []
    model = judge.model
    run = model.run

    def counting(batch: Batch) -> np.ndarray:
        lengths.extend(len(ids) for ids in batch.ids)
        return run(batch)

    model.run = counting  # type: ignore[method-assign]
    return lengths


def test_each_claim_is_read_once_against_its_best_sentences_not_every_window(
    model_dir: Path,
) -> None:
    record = RagRecord(None, (Context(MUSEUM),), " ".join(CLAIMS))
    selective, exhaustive = NLIJudge(model_dir), NLIJudge(model_dir, evidence_anchors=None)
    few, every = fed_lengths(selective), fed_lengths(exhaustive)
    quick = selective.evaluate_sync(record)
    whole = exhaustive.evaluate_sync(record)
    assert [c.verdict for c in quick.claims] == [Verdict.SUPPORTED, Verdict.SUPPORTED]
    assert [c.verdict for c in whole.claims] == [c.verdict for c in quick.claims]
    assert [c.evidence for c in quick.claims] == [c.evidence for c in whole.claims]
    assert len(few) == len(CLAIMS)  # one sequence per claim
    assert len(every) > 2 * len(few)
    assert sum(every) > 5 * sum(few)
    assert max(few) <= selective.evidence_tokens + 20  # a premise of a few sentences and a claim


def test_a_batch_is_padded_to_its_own_longest_sequence_in_length_order(model_dir: Path) -> None:
    judge = NLIJudge(model_dir, batch_size=64)
    shapes: list[tuple[int, ...]] = []
    session = judge.model
    session.tokenizer  # noqa: B018 - load the session now, so it can be watched
    real = session._session

    class Watch:
        def run(self, outputs: object, feed: dict[str, np.ndarray]) -> object:
            shapes.append(feed["input_ids"].shape)
            return real.run(outputs, feed)

    session._session = Watch()
    judge.evaluate_sync(RagRecord(None, (Context(MUSEUM),), " ".join(CLAIMS)))
    [(rows, width)] = shapes
    assert rows == len(CLAIMS)
    assert width < 64  # the longest (premise, claim) pair, far below the model's 256


def test_the_premise_holds_the_ranked_sentence_and_its_neighbours(tmp_path: Path) -> None:
    tokenizer = write_tokenizer(tmp_path, vocabulary([MUSEUM]))
    index = SentenceIndex(tokenizer, [MUSEUM], budget=40)
    first, second = index.readings("Tickets cost ten euros for adults.", anchors=1)
    texts = [MUSEUM[s:e] for _, s, e in first.spans]
    assert "Tickets cost ten euros for adults." in texts
    assert "Children under twelve enter free." in texts  # the sentence after it
    assert sum(index.tokens[index.spans.index(s)] for s in first.spans) <= 40
    assert second is None  # no other sentence shares a word with the claim


def test_a_second_reading_takes_the_next_ranked_sentences_only(tmp_path: Path) -> None:
    tokenizer = write_tokenizer(tmp_path, vocabulary([MUSEUM]))
    index = SentenceIndex(tokenizer, [MUSEUM], budget=40)
    first, second = index.readings("The garden closes at dusk and opens at nine.", anchors=1)
    assert "The garden closes at dusk." in [MUSEUM[s:e] for _, s, e in first.spans]
    assert second is not None and not set(second.spans) & set(first.spans)
    assert "The museum opens at nine on weekdays." in [MUSEUM[s:e] for _, s, e in second.spans]


def test_a_sentence_it_must_read_is_read_whatever_the_ranking(tmp_path: Path) -> None:
    tokenizer = write_tokenizer(tmp_path, vocabulary([MUSEUM]))
    index = SentenceIndex(tokenizer, [MUSEUM], budget=40)
    start = MUSEUM.index("The museum opens")
    forced = (0, start, start + len("The museum opens at nine on weekdays."))
    first, _ = index.readings("The garden closes at dusk.", anchors=1, must_read=[forced])
    texts = [MUSEUM[s:e] for _, s, e in first.spans]
    assert "The museum opens at nine on weekdays." in texts
    assert "The garden closes at dusk." in texts


def test_a_contradicting_sentence_is_read_again_when_the_cited_passage_is_checked_alone(
    tmp_path: Path,
) -> None:
    permit = "The cafe was denied a permit. " + FILLER + " The cafe has a garden."
    model = write_nli_model(tmp_path / "m", [permit, "The cafe has a permit [1]."], max_length=256)
    judge = NLIJudge(model, evidence_anchors=1, evidence_tokens=16)
    claim = Claim("The cafe has a permit.", 0, 22)
    must = {0: [(0, 0, len("The cafe was denied a permit."))]}
    [forced] = judge.check("", [claim], [Context(permit)], None, must)
    assert forced.verdict is Verdict.CONTRADICTED
    assert forced.evidence is not None and "denied" in forced.evidence.text


def test_without_a_passage_sentence_every_claim_is_not_found(model_dir: Path) -> None:
    [verdict] = NLIJudge(model_dir).check("", [Claim(CLAIMS[0])], [Context("   ")])
    assert verdict.verdict is Verdict.NOT_FOUND


def test_a_claim_copying_a_passage_sentence_is_supported_without_a_sequence(
    model_dir: Path,
) -> None:
    judge = NLIJudge(model_dir)
    fed = fed_lengths(judge)
    copy = "Tickets cost ten euros for adults."
    judged = judge.evaluate_sync(RagRecord(None, (Context(MUSEUM),), f"{copy} {CLAIMS[1]}"))
    copied, read = judged.claims
    assert (copied.verdict, copied.confidence, copied.reason) == (
        Verdict.SUPPORTED,
        1.0,
        COPY_REASON,
    )
    assert copied.evidence is not None and copied.evidence.text == copy
    assert MUSEUM[copied.evidence.start : copied.evidence.end] == copy
    assert read.verdict is Verdict.SUPPORTED and read.reason != COPY_REASON
    assert len(fed) == 1  # only the reordered claim went to the model


@pytest.mark.parametrize(
    "near",
    [
        "Tickets cost ten euros.",  # a word less: a fragment of the sentence
        "Tickets cost ten euros for all adults.",  # a word more
        "Tickets cost for adults ten euros.",  # the words moved
        "Tickets cost ten euros for adults?",  # asked, not stated
    ],
)
def test_a_claim_near_a_copy_is_read_by_the_model(model_dir: Path, near: str) -> None:
    judge = NLIJudge(model_dir)
    fed = fed_lengths(judge)
    [verdict] = judge.check(near, [Claim(near, 0, len(near))], [Context(MUSEUM)])
    assert verdict.reason != COPY_REASON
    assert len(fed) == 1


def test_a_copy_an_earlier_reading_found_contradicted_is_read_by_the_model(
    model_dir: Path,
) -> None:
    judge = NLIJudge(model_dir)
    fed = fed_lengths(judge)
    copy = "Tickets cost ten euros for adults."
    start = MUSEUM.index("The garden closes")
    must = {0: [(0, start, start + len("The garden closes at dusk."))]}
    [verdict] = judge.check(copy, [Claim(copy, 0, len(copy))], [Context(MUSEUM)], None, must)
    assert verdict.reason != COPY_REASON
    assert len(fed) == 1
