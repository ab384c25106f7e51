"""``TokenJudge`` on a tiny token classifier built here: marked words, offsets, windows.

The model (``tests/models/tiny_onnx.py``) marks an answer word ``hallucinated`` when
the first sequence (passages and question) does not hold it, so which words are
flagged follows from the text, through the real tokenizer and onnxruntime.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.models.tiny_onnx import write_nli_model, write_token_model

from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import FAITHFULNESS, GROUNDEDNESS, Context, RagRecord, Verdict
from ragpulse.judges.local.token_classifier import TokenJudge

MUSEUM = (
    "The museum opens at nine on weekdays. Tickets cost ten euros for adults. "
    "Children under twelve enter free. The gift shop sells postcards and maps. "
    "Guided tours start every hour from the main hall. The garden closes at dusk."
)
EXTRA = [
    "The garden closes at late midnight.",
    "Guided tours start every hour. The garden closes at dusk.",
    "When does the garden close?",
    "Tickets cost ten euros for adults [1].",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_token_model(tmp_path_factory.mktemp("tokens"), [MUSEUM, *EXTRA], max_length=40)


def judge_answer(directory: Path, answer: str, *contexts: str) -> list:  # type: ignore[type-arg]
    record = RagRecord(None, tuple(Context(c) for c in contexts), answer)
    judged = TokenJudge(directory).evaluate_sync(record, (FAITHFULNESS, GROUNDEDNESS))
    assert judged.status is EvalStatus.OK, judged.explanation
    return list(judged.claims)


def test_a_claim_with_words_no_passage_holds_is_not_found_with_that_phrase(
    model_dir: Path,
) -> None:
    answer = "Tickets cost ten euros for adults. The garden closes at late midnight."
    supported, flagged = judge_answer(model_dir, answer, MUSEUM)
    assert supported.verdict is Verdict.SUPPORTED
    assert flagged.verdict is Verdict.NOT_FOUND
    # Two adjacent marked words are one phrase, at their offsets in the answer.
    assert [answer[s:e] for s, e in flagged.unsupported] == ["late midnight"]
    assert flagged.confidence is not None and flagged.confidence > 0.99


def test_a_supported_claim_quotes_the_passage_sentence_sharing_its_words(model_dir: Path) -> None:
    [claim] = judge_answer(model_dir, "Tickets cost ten euros for adults.", MUSEUM)
    assert claim.evidence is not None
    assert claim.evidence.text == "Tickets cost ten euros for adults."
    assert MUSEUM[claim.evidence.start : claim.evidence.end] == claim.evidence.text


def test_long_passages_are_read_in_windows_and_any_window_may_support_a_word(
    model_dir: Path,
) -> None:
    judge = TokenJudge(model_dir)
    assert len(judge.model.tokenizer.encode(MUSEUM).ids) > 40
    # "Guided" is in the fifth sentence, "dusk" in the last: in different windows.
    claims = judge_answer(
        model_dir, "Guided tours start every hour. The garden closes at dusk.", MUSEUM
    )
    assert [c.verdict for c in claims] == [Verdict.SUPPORTED, Verdict.SUPPORTED]


def test_an_answer_longer_than_half_the_model_is_read_in_parts_with_its_own_offsets(
    model_dir: Path,
) -> None:
    answer = (
        "The museum opens at nine on weekdays. Tickets cost ten euros for adults. "
        "Children under twelve enter free. The garden closes at late midnight."
    )
    claims = judge_answer(model_dir, answer, MUSEUM)
    assert [c.verdict for c in claims][-1] is Verdict.NOT_FOUND
    assert [answer[s:e] for s, e in claims[-1].unsupported] == ["late midnight"]
    assert all(c.verdict is Verdict.SUPPORTED for c in claims[:-1])


def test_citation_markers_are_not_flagged(model_dir: Path) -> None:
    [claim] = judge_answer(model_dir, "Tickets cost ten euros for adults [1].", MUSEUM)
    assert claim.verdict is Verdict.SUPPORTED


def test_a_class_named_hallucinated_is_the_unsupported_one_whatever_its_index(
    tmp_path: Path,
) -> None:
    # The model's class 0 fires for words the passages hold; naming it "hallucinated"
    # makes those the flagged ones.
    directory = write_token_model(tmp_path, [MUSEUM, *EXTRA], labels=("hallucinated", "ok"))
    answer = "The garden closes at late midnight."
    [claim] = judge_answer(directory, answer, MUSEUM)
    assert [answer[s:e] for s, e in claim.unsupported] == ["The garden closes at", "."]


def test_labels_without_a_supported_class_make_the_judge_unavailable(tmp_path: Path) -> None:
    directory = write_token_model(tmp_path, [MUSEUM], labels=("hallucinated", "unsupported"))
    judge = TokenJudge(directory)
    assert judge.problem is not None and str(directory / "config.json") in judge.problem


def test_a_sequence_classifier_is_refused_as_a_token_model(tmp_path: Path) -> None:
    judge = TokenJudge(write_nli_model(tmp_path, [MUSEUM]))
    assert judge.problem is not None and "token-classification" in judge.problem
