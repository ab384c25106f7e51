"""Capture: decorated RAG functions become well-formed spans and a complete record."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import hashlib
import hmac
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ragpulse
from ragpulse import semconv
from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.capture._record import handoff
from ragpulse.evaluation.types import RagRecord

DOCS = ["Paris is the capital of France.", "Berlin is the capital of Germany."]


pytestmark = pytest.mark.usefixtures("capture_records")


def by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {s.name: s for s in exporter.get_finished_spans()}


def record_of(exporter: InMemorySpanExporter, name: str) -> RagRecord:
    span = by_name(exporter)[name]
    record = handoff.take(span.context)
    assert record is not None
    return record


@ragpulse.retrieval
def search(query: str) -> list[str]:
    return list(DOCS)


@ragpulse.generation(model="test-model")
def write(question: str, docs: list[str]) -> str:
    return docs[0]


def test_sync_request_records_question_contexts_and_answer(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag
    def handle(question: str) -> str:
        return write(question, search(question))

    assert handle("What is the capital of France?") == DOCS[0]
    record = record_of(
        exporter, "test_sync_request_records_question_contexts_and_answer.<locals>.handle"
    )
    assert record.question == "What is the capital of France?"
    assert [c.text for c in record.contexts] == DOCS
    assert record.answer == DOCS[0]


def test_inner_spans_are_children_of_the_rag_span(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag(name="support")
    def handle(question: str) -> str:
        return write(question, search(question))

    handle("q")
    spans = by_name(exporter)
    root = spans["support"]
    assert spans["retrieval search"].parent.span_id == root.context.span_id
    assert spans["chat test-model"].parent.span_id == root.context.span_id
    assert root.attributes[semconv.RAG_UNIT] is True


def test_retrieval_span_follows_genai_conventions(exporter: InMemorySpanExporter) -> None:
    @ragpulse.retrieval
    def find(query: str) -> list[dict[str, Any]]:
        return [{"id": "d1", "score": 0.9, "content": "alpha"}, {"text": "beta", "id": 7}]

    find("which?")
    span = by_name(exporter)[
        "retrieval test_retrieval_span_follows_genai_conventions.<locals>.find"
    ]
    assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "retrieval"
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_QUERY_TEXT] == "which?"
    docs = json.loads(span.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert docs == [{"id": "d1", "score": 0.9, "content": "alpha"}, {"id": "7", "content": "beta"}]


def test_documents_and_messages_are_written_as_json_dumps_writes_them(
    exporter: InMemorySpanExporter,
) -> None:
    passages = ['a "quoted"\nline', "naïve café ✓", "plain"]

    @ragpulse.retrieval
    def find(query: str) -> list[str]:
        return passages

    @ragpulse.retrieval
    def find_scored(query: str) -> list[dict[str, Any]]:
        return [{"id": "d1", "score": 0.5, "content": passages[1]}]

    @ragpulse.generation
    def answer(messages: list[dict[str, str]]) -> str:
        return passages[0]

    turns = [{"role": "system", "content": passages[0]}, {"role": "user", "content": passages[1]}]
    find("q"), find_scored("q"), answer(turns)
    spans = {s.name.split(".")[-1]: s.attributes for s in exporter.get_finished_spans()}
    assert spans["find"][semconv.GEN_AI_RETRIEVAL_DOCUMENTS] == json.dumps(
        [{"content": p} for p in passages], ensure_ascii=False
    )
    assert spans["find_scored"][semconv.GEN_AI_RETRIEVAL_DOCUMENTS] == json.dumps(
        [{"id": "d1", "score": 0.5, "content": passages[1]}], ensure_ascii=False
    )
    message = {"role": "assistant", "parts": [{"type": "text", "content": passages[0]}]}
    assert spans["answer"][semconv.GEN_AI_OUTPUT_MESSAGES] == json.dumps(
        [message], ensure_ascii=False
    )
    inputs = [
        {"role": t["role"], "parts": [{"type": "text", "content": t["content"]}]} for t in turns
    ]
    assert spans["answer"][semconv.GEN_AI_INPUT_MESSAGES] == json.dumps(inputs, ensure_ascii=False)


def test_generation_span_carries_model_and_output_messages(exporter: InMemorySpanExporter) -> None:
    write("q", ["an answer"])
    span = by_name(exporter)["chat test-model"]
    assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert span.attributes[semconv.GEN_AI_REQUEST_MODEL] == "test-model"
    messages = json.loads(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert messages[0]["parts"][0]["content"] == "an answer"


async def test_async_request_with_gather_collects_contexts_from_every_task(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.retrieval
    async def shard(query: str, n: int) -> list[str]:
        await asyncio.sleep(0)
        return [f"doc {n}"]

    @ragpulse.generation(model="m")
    async def gen(question: str) -> str:
        return "doc 1 and doc 2"

    @ragpulse.rag(name="fanout")
    async def handle(question: str) -> str:
        await asyncio.gather(shard(question, 1), shard(question, 2))
        return await gen(question)

    assert await handle("q") == "doc 1 and doc 2"
    record = record_of(exporter, "fanout")
    assert sorted(c.text for c in record.contexts) == ["doc 1", "doc 2"]
    assert record.answer == "doc 1 and doc 2"


def test_threads_with_a_copied_context_report_into_the_request(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag(name="threaded")
    def handle(question: str) -> str:
        with ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, search, question) for _ in range(2)
            ]
            [f.result() for f in futures]
        return "answer"

    handle("q")
    assert len(record_of(exporter, "threaded").contexts) == 4


def test_streamed_answer_is_the_concatenation_and_span_ends_after_the_stream(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.rag(name="stream")
    def handle(question: str) -> Iterator[str]:
        search(question)
        yield "Paris is "
        yield "the capital."

    stream = handle("q")
    assert next(stream) == "Paris is "
    assert "stream" not in by_name(exporter)  # still open while the consumer reads
    assert list(stream) == ["the capital."]
    span = by_name(exporter)["stream"]
    assert span.attributes["ragpulse.stream.end"] == "exhausted"
    assert record_of(exporter, "stream").answer == "Paris is the capital."
    assert len(record_of_contexts_span(exporter)) == 1


def record_of_contexts_span(exporter: InMemorySpanExporter) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("retrieval")]


def test_generator_span_ends_when_consumer_closes_stream_early(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.generation(model="g")
    def tokens() -> Iterator[str]:
        yield "a"
        yield "b"
        yield "c"

    stream = tokens()
    next(stream)
    stream.close()  # type: ignore[attr-defined]
    span = by_name(exporter)["chat g"]
    assert span.attributes["ragpulse.stream.end"] == "closed"
    assert (
        json.loads(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "a"
    )


def test_generator_span_ends_when_consumer_abandons_stream(exporter: InMemorySpanExporter) -> None:
    @ragpulse.generation(model="abandoned")
    def tokens() -> Iterator[str]:
        yield "a"
        yield "b"

    stream = tokens()
    next(stream)
    del stream
    gc.collect()
    span = by_name(exporter)["chat abandoned"]
    assert span.attributes["ragpulse.stream.end"] == "abandoned"


async def test_async_generator_span_ends_after_stream_and_on_early_close(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.generation(model="agen")
    async def tokens(n: int) -> AsyncIterator[str]:
        for i in range(n):
            await asyncio.sleep(0)
            yield f"t{i} "

    assert [t async for t in tokens(3)] == ["t0 ", "t1 ", "t2 "]
    early = tokens(5)
    await early.__anext__()
    await early.aclose()
    ends = sorted(s.attributes["ragpulse.stream.end"] for s in exporter.get_finished_spans())
    assert ends == ["closed", "exhausted"]


def test_generator_that_raises_midway_records_error_and_reraises(
    exporter: InMemorySpanExporter,
) -> None:
    @ragpulse.generation(model="broken")
    def tokens() -> Iterator[str]:
        yield "a"
        raise ValueError("upstream cut")

    with pytest.raises(ValueError, match="upstream cut"):
        list(tokens())
    span = by_name(exporter)["chat broken"]
    assert span.status.status_code is StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]


def test_exception_is_recorded_and_reraised_unchanged(exporter: InMemorySpanExporter) -> None:
    class Boom(Exception):
        pass

    error = Boom("no index")

    @ragpulse.rag(name="failing")
    def handle(question: str) -> str:
        raise error

    with pytest.raises(Boom) as caught:
        handle("q")
    assert caught.value is error
    span = by_name(exporter)["failing"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.events[0].attributes["exception.type"].endswith("Boom")


def test_methods_are_decorated_like_functions(exporter: InMemorySpanExporter) -> None:
    class Bot:
        def __init__(self) -> None:
            self.corpus = ["m1", "m2"]

        @ragpulse.retrieval
        def find(self, query: str) -> list[str]:
            return self.corpus

        @ragpulse.rag(name="bot")
        def ask(self, question: str) -> str:
            return " ".join(self.find(question))

    assert Bot().ask("q") == "m1 m2"
    record = record_of(exporter, "bot")
    assert record.question == "q"
    assert [c.text for c in record.contexts] == ["m1", "m2"]


def test_class_and_static_methods_are_decorated_like_functions(
    exporter: InMemorySpanExporter,
) -> None:
    class Store:
        @classmethod
        @ragpulse.retrieval(name="by-class")
        def find(cls, query: str) -> list[str]:
            return [cls.__name__]

        @ragpulse.retrieval(name="static")
        @staticmethod
        def find_static(query: str) -> list[str]:
            return ["s1"]

    assert Store.find("q1") == ["Store"]
    assert Store().find_static("q2") == ["s1"]
    spans = by_name(exporter)
    assert spans["retrieval by-class"].attributes[semconv.GEN_AI_RETRIEVAL_QUERY_TEXT] == "q1"
    assert spans["retrieval static"].attributes[semconv.GEN_AI_RETRIEVAL_QUERY_TEXT] == "q2"


def test_a_methods_argument_callable_is_given_the_arguments_without_self(
    exporter: InMemorySpanExporter,
) -> None:
    class Bot:
        @ragpulse.rag(name="bot-callable", question_arg=lambda question: question.upper())
        def ask(self, question: str) -> str:
            return "a"

    assert Bot().ask("q") == "a"
    assert record_of(exporter, "bot-callable").question == "Q"


def test_explicit_arguments_override_inference(exporter: InMemorySpanExporter) -> None:
    @ragpulse.retrieval(contexts_from="hits")
    def find(query: str) -> dict[str, Any]:
        return {"hits": [{"page_content": "hit one"}], "took_ms": 3}

    @ragpulse.rag(name="explicit", question_arg="user_text", answer_from=lambda r: r["answer"])
    def handle(session: str, user_text: str) -> dict[str, str]:
        find(user_text)
        return {"answer": "the answer", "session": session}

    handle("s-1", "the question")
    record = record_of(exporter, "explicit")
    assert record.question == "the question"
    assert record.answer == "the answer"
    assert [c.text for c in record.contexts] == ["hit one"]


def test_record_helpers_report_from_undecorated_code(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag(name="manual")
    def handle(question: str) -> str:
        ragpulse.record_contexts([{"text": "ctx", "id": "c1"}])
        ragpulse.record_reference("gold")
        ragpulse.record_answer("explicit answer")
        return "returned value"

    handle("q")
    record = record_of(exporter, "manual")
    assert record.answer == "explicit answer"
    assert record.reference == "gold"
    assert record.contexts[0].id == "c1"


def test_reference_callable_receives_the_question(exporter: InMemorySpanExporter) -> None:
    gold = {"q1": "reference one"}

    @ragpulse.rag(name="gold", reference=lambda question: gold.get(question or ""))
    def handle(question: str) -> str:
        return "a"

    handle("q1")
    assert record_of(exporter, "gold").reference == "reference one"


def test_retrieved_items_are_normalised_from_common_library_types(
    exporter: InMemorySpanExporter,
) -> None:
    class Document:  # the shape of a LangChain Document
        def __init__(self, page_content: str, metadata: dict[str, Any]) -> None:
            self.page_content = page_content
            self.metadata = metadata

    class TextNode:  # the shape of a LlamaIndex node
        def __init__(self, text: str, id_: str) -> None:
            self.text, self.id_ = text, id_

        def get_content(self) -> str:
            return self.text

    class NodeWithScore:
        def __init__(self, node: TextNode, score: float) -> None:
            self.node, self.score = node, score

    @ragpulse.retrieval
    def mixed(query: str) -> list[Any]:
        return [
            "plain",
            {"page_content": "dict", "metadata": {"id": "m"}},
            Document("langchain", {"id": "lc", "score": 0.5}),
            NodeWithScore(TextNode("llama", "n1"), 0.8),
            (Document("pair", {}), 0.3),
        ]

    @ragpulse.rag(name="mixed")
    def handle(question: str) -> str:
        mixed(question)
        return "x"

    handle("q")
    contexts = record_of(exporter, "mixed").contexts
    assert [c.text for c in contexts] == ["plain", "dict", "langchain", "llama", "pair"]
    assert [c.id for c in contexts] == [None, "m", "lc", "n1", None]
    assert [c.score for c in contexts] == [None, None, 0.5, 0.8, 0.3]


def test_unknown_objects_warn_once_and_use_repr(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    @ragpulse.retrieval
    def odd(query: str) -> list[Any]:
        return [Opaque(), Opaque()]

    @ragpulse.rag(name="odd")
    def handle(question: str) -> str:
        odd(question)
        odd(question)
        return "x"

    with caplog.at_level("WARNING", logger="ragpulse.capture"):
        handle("q")
    assert [c.text for c in record_of(exporter, "odd").contexts] == ["<opaque>"] * 4
    assert sum("Opaque" in r.getMessage() for r in caplog.records) == 1


def test_capture_content_off_exports_lengths_only_but_record_keeps_text(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(capture_content=False))

    @ragpulse.rag(name="private")
    def handle(question: str) -> str:
        return write(question, search(question))

    handle("secret question")
    spans = by_name(exporter)
    root = spans["private"]
    assert semconv.RAG_QUESTION not in root.attributes
    assert root.attributes[semconv.RAG_QUESTION + semconv.SUFFIX_LENGTH] == len("secret question")
    # No key, no hash: an unkeyed hash of a short text is found by trying every value.
    assert not [k for s in spans.values() for k in s.attributes if "sha256" in k]
    docs = json.loads(spans["retrieval search"].attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert docs[0] == {semconv.DOCUMENT_CONTENT_LENGTH: len(DOCS[0])}
    assert all("Paris" not in str(v) for s in spans.values() for v in s.attributes.values())
    assert record_of(exporter, "private").contexts[0].text == DOCS[0]


def test_capture_content_off_with_a_hash_key_exports_the_keyed_hmac_of_each_text(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(ContentPolicy(capture_content=False, hash_key="deployment-secret"))

    @ragpulse.rag(name="private")
    def handle(question: str) -> str:
        return write(question, search(question))

    handle("secret question")
    spans = by_name(exporter)
    keyed = hmac.new(b"deployment-secret", b"secret question", hashlib.sha256).hexdigest()
    assert spans["private"].attributes[semconv.RAG_QUESTION + semconv.SUFFIX_HMAC_SHA256] == keyed
    assert keyed != hashlib.sha256(b"secret question").hexdigest()
    docs = json.loads(spans["retrieval search"].attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert docs[0][semconv.DOCUMENT_CONTENT_HMAC_SHA256] == (
        hmac.new(b"deployment-secret", DOCS[0].encode(), hashlib.sha256).hexdigest()
    )
    assert all(
        "deployment-secret" not in str(v) for s in spans.values() for v in s.attributes.values()
    )


def test_redact_hook_runs_on_every_exported_text(exporter: InMemorySpanExporter) -> None:
    set_policy(ContentPolicy(redact=lambda text: text.replace("Paris", "[CITY]")))

    @ragpulse.rag(name="redacted")
    def handle(question: str) -> str:
        return write(question, search(question))

    handle("Is Paris big?")
    exported = " ".join(
        str(v) for s in exporter.get_finished_spans() for v in s.attributes.values()
    )
    assert "Paris" not in exported and "[CITY]" in exported
    assert record_of(exporter, "redacted").question == "Is Paris big?"


def test_huge_texts_are_capped_in_bytes_with_a_marker_while_the_record_keeps_them(
    exporter: InMemorySpanExporter,
) -> None:
    set_policy(
        ContentPolicy(max_text_bytes=100, max_documents_bytes=1000, max_record_chars=20_000_000)
    )
    huge = "x" * 5_000_000

    @ragpulse.retrieval
    def big(query: str) -> list[str]:
        return [huge]

    @ragpulse.rag(name="huge")
    def handle(question: str) -> str:
        big(question)
        return huge

    handle("q")
    root = by_name(exporter)["huge"]
    answer = root.attributes[semconv.RAG_ANSWER]
    assert len(answer.encode()) <= 100
    marker = re.search(r"…\[truncated (\d+) bytes\]$", answer)
    assert marker is not None and answer.startswith("xxx")
    assert len(answer) - len(marker.group(0)) + int(marker.group(1)) == 5_000_000
    assert list(root.attributes[semconv.RAG_CAPTURE_TRUNCATED]) == [semconv.RAG_ANSWER]
    docs = by_name(exporter)[
        "retrieval test_huge_texts_are_capped_in_bytes_with_a_marker_while_the_record_keeps_them"
        ".<locals>.big"
    ]
    assert len(docs.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS].encode()) <= 1000
    assert len(record_of(exporter, "huge").answer or "") == 5_000_000


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (b"bytes question", "bytes question"),
        (b"\xff\xfe bad utf-8", "\ufffd\ufffd bad utf-8"),
        ("lone \udc80 surrogate", "lone ? surrogate"),
        (42, "42"),
    ],
)
def test_odd_questions_become_text_and_the_function_is_unchanged(
    exporter: InMemorySpanExporter, value: Any, expected: str | None
) -> None:
    @ragpulse.rag(name="odd-input")
    def handle(question: Any) -> Any:
        return question

    assert handle(value) is value
    assert record_of(exporter, "odd-input").question == expected


def test_deeply_nested_dict_answer_does_not_break_capture(exporter: InMemorySpanExporter) -> None:
    nested: dict[str, Any] = {}
    cursor = nested
    for _ in range(5000):
        cursor["k"] = {}
        cursor = cursor["k"]

    @ragpulse.rag(name="nested")
    def handle(question: str) -> dict[str, Any]:
        return nested

    assert handle("q") is nested
    assert isinstance(record_of(exporter, "nested").answer, str)


def test_inner_decorators_work_outside_any_rag_call(exporter: InMemorySpanExporter) -> None:
    assert search("alone") == DOCS
    assert [s.name for s in exporter.get_finished_spans()] == ["retrieval search"]


def test_every_started_span_ends_under_concurrency(exporter: InMemorySpanExporter) -> None:
    @ragpulse.rag(name="many")
    def handle(question: str) -> str:
        return write(question, search(question))

    threads = [threading.Thread(target=lambda: [handle("q") for _ in range(20)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(exporter.get_finished_spans()) == 4 * 20 * 3
