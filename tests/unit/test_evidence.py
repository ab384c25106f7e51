"""Evidence verification: a quote counts only where it really occurs."""

from __future__ import annotations

from ragpulse.evaluation import Context, locate, verify

TEXT = "The  Eiffel Tower\nis 330 metres tall. It opened in 1889."


def test_locate_returns_offsets_into_the_original_text() -> None:
    found = locate("eiffel tower is 330 metres", TEXT)
    assert found is not None
    start, end = found
    assert TEXT[start:end] == "Eiffel Tower\nis 330 metres"


def test_locate_folds_whitespace_runs_and_case() -> None:
    assert locate("THE EIFFEL   TOWER", TEXT) == (0, len("The  Eiffel Tower"))


def test_locate_returns_none_for_a_quote_that_is_not_there() -> None:
    assert locate("is 300 metres tall", TEXT) is None


def test_locate_returns_none_for_an_empty_quote() -> None:
    assert locate("   ", TEXT) is None


def test_locate_treats_regex_characters_literally() -> None:
    text = "costs $5 (approx.) per item"
    assert locate("$5 (approx.)", text) == (6, 18)
    assert locate("$5 (approx)", text) is None


def test_locate_handles_non_ascii_text() -> None:
    text = "Der Kölner Dom ist 157 Meter hoch."
    found = locate("kölner dom", text)
    assert found is not None
    assert text[found[0] : found[1]] == "Kölner Dom"


def test_verify_records_the_context_and_offsets_of_the_quote() -> None:
    contexts = (Context("unrelated passage", id="a"), Context(TEXT, id="b"))
    evidence = verify("opened in 1889", contexts, 1)
    assert evidence is not None
    assert (evidence.context_index, evidence.context_id) == (1, "b")
    assert TEXT[evidence.start : evidence.end] == evidence.text == "opened in 1889"


def test_verify_rejects_a_quote_found_only_in_another_context() -> None:
    contexts = (Context("unrelated passage"), Context(TEXT))
    assert verify("opened in 1889", contexts, 0) is None


def test_verify_searches_every_context_when_no_index_is_named() -> None:
    contexts = (Context("unrelated passage"), Context(TEXT))
    evidence = verify("opened in 1889", contexts, None)
    assert evidence is not None
    assert evidence.context_index == 1


def test_verify_rejects_an_index_out_of_range() -> None:
    assert verify("opened in 1889", (Context(TEXT),), 3) is None
    assert verify("opened in 1889", (Context(TEXT),), -1) is None


def test_verify_rejects_a_missing_quote() -> None:
    assert verify(None, (Context(TEXT),), 0) is None
    assert verify("", (Context(TEXT),), 0) is None
