"""Capture under hostile input: the app behaves as undecorated, and no span is lost.

Each test plays what a user's code can hand ragpulse (one-shot iterators,
self-referencing structures, objects whose ``__repr__`` raises, BaseException
subclasses) through the real decorators and the real SDK.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ragpulse
from ragpulse import errors, semconv
from ragpulse.capture._record import handoff
from ragpulse.capture._text import MAX_NODES, to_text
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import RagRecord
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler

REFUNDS = "Refunds are issued within 14 days of purchase."


pytestmark = pytest.mark.usefixtures("capture_records")


def spans_by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {s.name: s for s in exporter.get_finished_spans()}


def record_of(exporter: InMemorySpanExporter, name: str) -> RagRecord | None:
    span = spans_by_name(exporter)[name]
    return handoff.take(span.context)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


class BadRepr:
    """An object ragpulse cannot read: no text attribute, and a ``__repr__`` that raises."""

    def __repr__(self) -> str:
        raise ValueError("no repr for you")


class Halt(BaseException):
    """A BaseException subclass a library might raise (not an Exception)."""


class HaltingRepr:
    def __repr__(self) -> str:
        raise Halt


class CountingDict(dict[str, Any]):
    """A dict that counts how often ragpulse walks into it; fails the test past a bound."""

    visits = 0

    def items(self) -> Any:
        CountingDict.visits += 1
        if CountingDict.visits > 10 * MAX_NODES:
            raise AssertionError("the walk over a self-referencing dict is not linear")
        return super().items()


@pytest.mark.parametrize(
    "items",
    [
        ["plain", {"content": "from a dict"}, "naïve"],
        [{"content": "from a dict"}, "plain"],
        ["plain", "naïve", 7],
        ("plain", "naïve"),
    ],
)
def test_a_list_mixing_text_and_other_items_reads_every_item_in_order(
    exporter: InMemorySpanExporter, items: Any
) -> None:
    @ragpulse.retrieval
    def find(query: str) -> Any:
        return items

    @ragpulse.rag(name="mixed")
    def handle(question: str) -> str:
        find(question)
        return "answer"

    handle("q")
    expected = [item["content"] if isinstance(item, dict) else str(item) for item in items]
    record = record_of(exporter, "mixed")
    assert record is not None
    assert [c.text for c in record.contexts] == expected
    retrieval = next(s for s in exporter.get_finished_spans() if s.name.startswith("retrieval"))
    documents = json.loads(attrs(retrieval)[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert [d["content"] for d in documents] == expected


# --- one-shot iterators from @retrieval ------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda docs: (d for d in docs), id="generator-expression"),
        pytest.param(lambda docs: map(str, docs), id="map"),
        pytest.param(lambda docs: iter(docs), id="list-iterator"),
    ],
)
def test_retriever_returning_a_one_shot_iterator_hands_the_caller_every_item(
    exporter: InMemorySpanExporter, make: Any
) -> None:
    docs = [REFUNDS, "Exchanges take 30 days."]

    @ragpulse.retrieval
    def search(query: str) -> Iterator[str]:
        return make(docs)  # type: ignore[no-any-return]

    @ragpulse.rag(name="one-shot")
    def handle(question: str) -> list[str]:
        return list(search(question))

    assert handle("How long do refunds take?") == docs
    record = record_of(exporter, "one-shot")
    assert record is not None and [c.text for c in record.contexts] == docs
    (retrieval,) = [s for s in exporter.get_finished_spans() if s.name.startswith("retrieval")]
    documents = json.loads(attrs(retrieval)[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert [d["content"] for d in documents] == docs


def test_iterator_that_raises_part_way_raises_in_the_caller_and_keeps_what_was_read(
    exporter: InMemorySpanExporter,
) -> None:
    failure = ConnectionError("vector store went away")

    def flaky() -> Iterator[str]:
        yield REFUNDS
        raise failure

    @ragpulse.retrieval
    def search(query: str) -> Iterator[str]:
        return flaky()

    got: list[str] = []
    with pytest.raises(ConnectionError) as raised:
        for doc in search("refunds"):
            got.append(doc)
    assert raised.value is failure
    assert got == [REFUNDS]
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert [d["content"] for d in json.loads(attrs(span)[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])] == [
        REFUNDS
    ]


def test_endless_retriever_generator_stays_lazy(exporter: InMemorySpanExporter) -> None:
    @ragpulse.retrieval
    def search(query: str) -> Iterator[str]:
        return (f"passage {i}" for i in itertools.count())

    assert list(itertools.islice(search("q"), 3)) == ["passage 0", "passage 1", "passage 2"]


def test_generator_retriever_records_each_yielded_item_as_a_context(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.retrieval
    def search(query: str) -> Iterator[dict[str, str]]:
        yield {"id": "a", "content": REFUNDS}
        yield {"id": "b", "content": "Exchanges take 30 days."}

    @ragpulse.rag(name="gen-retriever")
    def handle(question: str) -> str:
        return " ".join(d["content"] for d in search(question))

    handle("q")
    record = record_of(exporter, "gen-retriever")
    assert record is not None
    assert [(c.id, c.text) for c in record.contexts] == [
        ("a", REFUNDS),
        ("b", "Exchanges take 30 days."),
    ]


async def test_async_retriever_returning_an_async_generator_is_read_as_consumed(
    exporter: InMemorySpanExporter,
) -> None:
    async def stream() -> AsyncIterator[str]:
        for doc in (REFUNDS, "Exchanges take 30 days."):
            await asyncio.sleep(0)
            yield doc

    @ragpulse.retrieval
    async def search(query: str) -> AsyncIterator[str]:
        return stream()

    @ragpulse.rag(name="async-one-shot")
    async def handle(question: str) -> list[str]:
        return [doc async for doc in await search(question)]

    assert await handle("q") == [REFUNDS, "Exchanges take 30 days."]
    record = record_of(exporter, "async-one-shot")
    assert record is not None and len(record.contexts) == 2


def test_contexts_from_picking_an_iterator_leaves_it_untouched_and_skips_evaluation(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.retrieval(contexts_from="docs")
    def search(query: str) -> dict[str, Any]:
        return {"docs": iter([REFUNDS])}

    @ragpulse.rag(name="picked")
    def handle(question: str) -> list[str]:
        return list(search(question)["docs"])

    assert handle("q") == [REFUNDS]
    unit = spans_by_name(exporter)["picked"]
    assert attrs(unit)[semconv.EVAL_STATUS] == EvalStatus.SKIPPED


# --- bounded, linear normalisation ------------------------------------------------------


def test_dict_referring_to_itself_twice_is_read_once_with_cycles_marked(
    exporter: InMemorySpanExporter,
) -> None:
    CountingDict.visits = 0
    looped = CountingDict()
    looped["a"] = looped
    looped["b"] = looped

    @ragpulse.rag(name="looped")
    def handle(question: str) -> Any:
        ragpulse.record_contexts([looped])
        return looped

    assert handle("q") is looped
    record = record_of(exporter, "looped")
    assert record is not None
    assert json.loads(record.answer or "") == {"a": "[cycle]", "b": "[cycle]"}
    assert CountingDict.visits <= 2


def test_shared_substructures_are_cut_at_the_node_budget() -> None:
    shared: Any = ["leaf"]
    for _ in range(60):  # 2**60 paths through 61 objects
        shared = {"left": shared, "right": shared}
    text = to_text(shared)
    assert text is not None and len(text) < 2_000_000 and "…[cut]" in text


def test_deep_and_cyclic_lists_never_raise_from_record_helpers(
    exporter: InMemorySpanExporter,
) -> None:
    deep: list[Any] = []
    cursor = deep
    for _ in range(100_000):
        cursor.append([])
        cursor = cursor[0]
    cyclic: list[Any] = ["part"]
    cyclic.append(cyclic)

    @ragpulse.rag(name="lists")
    def handle(question: str) -> str:
        ragpulse.record_question(deep)
        ragpulse.record_reference(cyclic)
        ragpulse.record_answer(cyclic)
        ragpulse.record_contexts([deep, cyclic])
        return "done"

    assert handle("q") == "done"
    record = record_of(exporter, "lists")
    assert record is not None and record.answer == "part\n[cycle]"


# --- objects that cannot be read ------------------------------------------------------------


@pytest.mark.parametrize("odd", [BadRepr(), HaltingRepr()], ids=["ValueError", "BaseException"])
def test_record_helpers_never_raise_for_objects_whose_repr_raises(
    exporter: InMemorySpanExporter, odd: Any
) -> None:
    @ragpulse.rag(name="odd")
    def handle(question: str) -> str:
        ragpulse.record_question(odd)
        ragpulse.record_contexts([REFUNDS, odd])
        ragpulse.record_reference(odd)
        ragpulse.record_answer(odd)
        return REFUNDS

    assert handle("q") == REFUNDS
    unit = attrs(spans_by_name(exporter)["odd"])
    assert unit[semconv.RAG_CAPTURE_STATUS] == semconv.CAPTURE_STATUS_PARTIAL
    assert "unreadable" in unit[semconv.RAG_CAPTURE_WARNING]
    assert unit[semconv.EVAL_STATUS] == EvalStatus.SKIPPED
    assert unit[semconv.EVAL_ERROR_TYPE] == errors.UNREADABLE_INPUT


def test_unreadable_retrieved_item_keeps_the_readable_ones_and_marks_itself(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.retrieval
    def search(query: str) -> list[Any]:
        return [REFUNDS, BadRepr()]

    @ragpulse.rag(name="mixed")
    def handle(question: str) -> str:
        search(question)
        return REFUNDS

    handle("How long do refunds take?")
    spans = spans_by_name(exporter)
    retrieval = attrs(next(s for n, s in spans.items() if n.startswith("retrieval")))
    documents = json.loads(retrieval[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert documents[0] == {"content": REFUNDS}
    assert documents[1] == {semconv.GEN_AI_DOCUMENT_UNREADABLE: "BadRepr: ValueError"}
    assert retrieval[semconv.RAG_CONTEXTS_UNREADABLE] == 1
    unit = attrs(spans["mixed"])
    assert unit[semconv.RAG_CONTEXTS_COUNT] == 1
    assert unit[semconv.RAG_CONTEXTS_UNREADABLE] == 1


def test_unreadable_context_is_never_reported_as_a_hallucination(route_spans: Any) -> None:
    memory = InMemorySpanExporter()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(memory), judge=LexicalJudge(), sampler=EvalSampler(rate=1.0)
    )
    route_spans(processor)
    try:

        @ragpulse.retrieval
        def search(query: str) -> list[Any]:
            return ["Our store sells shoes.", BadRepr()]

        @ragpulse.rag(name="unreadable-support")
        def handle(question: str) -> str:
            search(question)
            return REFUNDS  # grounded in the passage ragpulse could not read

        handle("How long do refunds take?")
        assert processor.force_flush(20_000)
        deadline = time.monotonic() + 20
        units: list[ReadableSpan] = []
        while time.monotonic() < deadline and not units:
            units = [s for s in memory.get_finished_spans() if s.name == "unreadable-support"]
            time.sleep(0.01)
        (unit,) = units
        unit_attrs = attrs(unit)
        assert unit_attrs[semconv.EVAL_STATUS] == EvalStatus.SKIPPED
        assert unit_attrs[semconv.EVAL_ERROR_TYPE] == errors.UNREADABLE_INPUT
        assert semconv.eval_score("groundedness") not in unit_attrs
        assert semconv.eval_score("faithfulness") not in unit_attrs
    finally:
        processor.shutdown()


def test_base_exception_from_a_result_repr_never_loses_the_span(
    exporter: InMemorySpanExporter,
) -> None:
    odd = HaltingRepr()

    @ragpulse.generation
    def write(question: str) -> Any:
        return odd

    @ragpulse.rag(name="halting")
    def handle(question: str) -> Any:
        return write(question)

    assert handle("q") is odd
    names = {s.name for s in exporter.get_finished_spans()}
    assert names == {
        "halting",
        "chat test_base_exception_from_a_result_repr_never_loses_the_span.<locals>.write",
    }
    assert attrs(spans_by_name(exporter)["halting"])[semconv.EVAL_STATUS] == EvalStatus.SKIPPED


def test_base_exception_from_a_question_repr_never_loses_the_span(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag(name="odd-question")
    def handle(question: Any) -> str:
        return "fine"

    assert handle(HaltingRepr()) == "fine"
    (span,) = exporter.get_finished_spans()
    assert span.name == "odd-question" and span.end_time is not None


def test_keyboard_interrupt_from_user_code_propagates_and_the_span_still_ends(
    exporter: InMemorySpanExporter,
) -> None:
    class Interrupting:
        def __repr__(self) -> str:
            raise KeyboardInterrupt

    @ragpulse.rag(name="interrupted")
    def handle(question: str) -> Any:
        return Interrupting()

    with pytest.raises(KeyboardInterrupt):
        handle("q")
    (span,) = exporter.get_finished_spans()
    assert span.name == "interrupted"
    assert attrs(span)[semconv.RAG_CAPTURE_STATUS] == semconv.CAPTURE_STATUS_ERROR


def test_exception_whose_str_raises_reaches_the_caller_unchanged(
    exporter: InMemorySpanExporter,
) -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise Halt

    failure = Unprintable()

    @ragpulse.rag(name="unprintable")
    def handle(question: str) -> str:
        raise failure

    with pytest.raises(Unprintable) as raised:
        handle("q")
    assert raised.value is failure
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR


def test_huge_exception_message_is_capped_on_the_span(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag(name="loud")
    def handle(question: str) -> str:
        raise ValueError("x" * 1_000_000)

    with pytest.raises(ValueError):
        handle("q")
    (span,) = exporter.get_finished_spans()
    (event,) = span.events
    assert len(str((event.attributes or {})[semconv.EXCEPTION_MESSAGE]).encode()) <= 8192


def test_failing_question_picker_keeps_the_unit_span_whole(exporter: InMemorySpanExporter) -> None:
    def picker(question: str) -> str:
        raise Halt

    @ragpulse.rag(name="picky", question_arg=picker)
    def handle(question: str) -> str:
        return REFUNDS

    assert handle("q") == REFUNDS
    (span,) = exporter.get_finished_spans()
    unit = attrs(span)
    assert unit[semconv.RAG_UNIT] is True and unit[semconv.RAG_NAME] == "picky"
    assert unit[semconv.RAG_CAPTURE_STATUS] == semconv.CAPTURE_STATUS_ERROR


def test_failing_answer_picker_leaves_the_result_unchanged(exporter: InMemorySpanExporter) -> None:
    result = {"answer": REFUNDS}

    def pick(value: Any) -> str:
        raise Halt

    @ragpulse.rag(name="answer-picker", answer_from=pick)
    def handle(question: str) -> dict[str, str]:
        return result

    assert handle("q") is result
    (span,) = exporter.get_finished_spans()
    assert attrs(span)[semconv.RAG_CAPTURE_STATUS] == semconv.CAPTURE_STATUS_ERROR


def test_reference_callable_runs_once_even_when_capture_fails_after_it(
    exporter: InMemorySpanExporter,
) -> None:
    calls: list[str | None] = []

    def reference(question: str | None) -> str:
        calls.append(question)
        return REFUNDS

    def pick(value: Any) -> str:
        raise Halt

    @ragpulse.rag(name="referenced", answer_from=pick, reference=reference)
    def handle(question: str) -> str:
        return REFUNDS

    handle("How long?")
    assert calls == ["How long?"]
