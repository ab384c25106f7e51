"""``Contexts``: a record's passages, kept as read and read as ``Context``."""

from __future__ import annotations

import pickle

from ragpulse.evaluation.types import Context, Contexts


def mixed() -> Contexts:
    """A plain passage and a passage with an id and a score."""
    return Contexts(["plain passage", Context("with an id", id="doc-2", score=0.5)])


def test_every_item_reads_as_a_context_in_order() -> None:
    contexts = mixed()
    assert list(contexts) == [Context("plain passage"), Context("with an id", "doc-2", 0.5)]
    assert contexts[0] == Context("plain passage")
    assert contexts[-1].id == "doc-2"


def test_contexts_equal_the_tuple_of_the_same_contexts() -> None:
    contexts = mixed()
    same = (Context("plain passage"), Context("with an id", "doc-2", 0.5))
    assert contexts == same
    assert same == contexts
    assert hash(contexts) == hash(same)
    assert contexts != same[:1]


def test_a_slice_is_contexts_of_those_items() -> None:
    tail = mixed()[1:]
    assert tail == (Context("with an id", "doc-2", 0.5),)
    assert isinstance(tail, Contexts)


def test_texts_are_the_passages_texts() -> None:
    assert mixed().texts() == ["plain passage", "with an id"]


def test_contexts_survive_pickling_for_a_judge_process() -> None:
    contexts = mixed()
    assert pickle.loads(pickle.dumps(contexts)) == contexts
