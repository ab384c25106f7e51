"""Passage windows for the local judges: whole sentences, in budget, overlapping by one."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.models.tiny_onnx import vocabulary, write_tokenizer
from tokenizers import Tokenizer

from ragpulse.judges.local._windows import best_sentence, sentences, windows

PASSAGE = (
    "The museum opens at nine. Tickets cost ten euros. Children enter free. "
    "The shop sells maps. Tours start every hour. The garden closes at dusk."
)
LONG_SENTENCE = "one two three four five six seven eight nine ten eleven twelve."


def tokenizer(tmp_path: Path) -> Tokenizer:
    return write_tokenizer(tmp_path, vocabulary([PASSAGE, LONG_SENTENCE]))


def count(tok: Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


def test_windows_hold_whole_sentences_within_the_budget(tmp_path: Path) -> None:
    tok = tokenizer(tmp_path)
    found = windows(tok, 0, PASSAGE, budget=12)
    assert len(found) > 1
    spans = sentences(PASSAGE)
    for window in found:
        assert count(tok, PASSAGE[window.start : window.end]) <= 12
        assert set(window.sentences) <= set(spans)


def test_each_window_starts_on_the_last_sentence_of_the_one_before(tmp_path: Path) -> None:
    found = windows(tokenizer(tmp_path), 0, PASSAGE, budget=12)
    for before, after in itertools.pairwise(found):
        assert after.sentences[0] == before.sentences[-1]
    assert found[0].start == 0 and found[-1].end == len(PASSAGE)


def test_a_passage_that_fits_is_one_window(tmp_path: Path) -> None:
    [window] = windows(tokenizer(tmp_path), 3, PASSAGE, budget=200)
    assert (window.index, window.start, window.end) == (3, 0, len(PASSAGE))


def test_a_sentence_longer_than_the_budget_is_cut_at_token_boundaries(tmp_path: Path) -> None:
    tok = tokenizer(tmp_path)
    found = windows(tok, 0, LONG_SENTENCE, budget=5)
    pieces = [LONG_SENTENCE[w.start : w.end] for w in found]
    assert all(count(tok, piece) <= 5 for piece in pieces)
    assert pieces[0] == "one two three four five"
    assert " ".join(pieces).replace(" .", ".") == LONG_SENTENCE


def test_the_best_sentence_shares_most_of_the_claims_words() -> None:
    spans = [(0, span) for span in sentences(PASSAGE)]
    _index, start, end = best_sentence("Tours start hourly", [PASSAGE], spans) or (0, 0, 0)
    assert PASSAGE[start:end] == "Tours start every hour."
