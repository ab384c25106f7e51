"""The demo's RAG application: a Larkspur support bot, decorated as a user would decorate it.

``@ragpulse.retrieval`` marks the search, ``@ragpulse.generation`` the answer
writer and ``@ragpulse.rag`` the request: that is all ragpulse needs to capture
the question, the passages and the answer of each request and evaluate them.
One request in five goes the agent's way instead: the model calls a
``search_docs`` tool (``@ragpulse.tool``), whose result is the evidence its answer
is judged against; its turns belong to a conversation (``gen_ai.conversation.id``).

The decorated functions are defined inside ``SupportBot`` only because the demo
picks its retriever and generator (and so the generation span's model name) at
run time; in an application they would sit at module level.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry import trace

import ragpulse
from ragpulse.demo.corpus import DOCUMENTS_BY_ID
from ragpulse.demo.generator import (
    AGENT_FAULTS,
    EXTRACTIVE_MODEL,
    RETRIEVAL_FAULTS,
    AnswerGenerator,
    FaultKind,
    InjectedFault,
    Source,
    Style,
    cite,
    inject_fault,
    restate,
    split_sentences,
)
from ragpulse.demo.questions import QUESTIONS
from ragpulse.demo.retriever import Bm25Retriever

APP_NAME = "support-bot"
"""The ``@rag`` unit's name (``ragpulse.rag.name``)."""
AGENT_EVERY = 5
"""One request in this many is answered by the agent (and every failed-tool fault)."""


def reference_answer(question: str | None) -> str | None:
    """The gold answer to a demo question: the sentence of its document holding the fact."""
    for known in QUESTIONS:
        if known.text == question:
            document = DOCUMENTS_BY_ID[known.doc_id]
            return next(s for s in split_sentences(document.text) if known.fact in s)
    return None


def required_points(question: str | None) -> list[str]:
    """The rubric of a demo question: its key fact, which a complete answer states."""
    return [known.fact for known in QUESTIONS if known.text == question]


@dataclass(frozen=True, slots=True)
class Reply:
    """What one request produced, with the demo's ground truth about it."""

    request_id: int
    question: str
    answer: str
    fault: InjectedFault | None
    trace_id: int
    span_id: int
    """The ``@rag`` span's id: the evaluation of this request names it."""
    agent: bool = False
    """Answered by the tool-calling agent rather than the retrieve-then-generate path."""


class SupportBot:
    """Answers Larkspur questions; the requests listed in ``faulty`` get a drifting answer."""

    def __init__(
        self,
        retriever: Bm25Retriever,
        generator: AnswerGenerator,
        *,
        faulty: frozenset[int] = frozenset(),
        seed: int = 0,
        top_k: int = 3,
    ) -> None:
        self._retriever = retriever
        self._generator = generator
        self._faulty = faulty
        # The faulty requests take the kinds of fault in turn, so every kind is shown.
        kinds = list(FaultKind)
        self._kinds = {r: kinds[i % len(kinds)] for i, r in enumerate(sorted(faulty))}
        self._seed = seed
        self._top_k = top_k
        self._lock = threading.Lock()
        self._faults: dict[int, InjectedFault] = {}
        self._spans: dict[int, tuple[int, int]] = {}
        self._handle_request = self._build()
        self._handle_agent = self._build_agent()

    def ask(self, request_id: int, question: str) -> Reply:
        """Run one request through the decorated app."""
        agent = self.by_agent(request_id)
        if agent:
            # A conversation of a few turns per simulated user.
            conversation = f"session-{request_id // (2 * AGENT_EVERY)}"
            answer = self._handle_agent(question, request_id, conversation)
        else:
            answer = self._handle_request(question, request_id)
        with self._lock:
            fault = self._faults.pop(request_id, None)
            trace_id, span_id = self._spans.pop(request_id)
        return Reply(request_id, question, answer, fault, trace_id, span_id, agent)

    def by_agent(self, request_id: int) -> bool:
        """Whether the agent answers this request: every failed-tool fault, and one request
        in ``AGENT_EVERY`` that is clean or gets an invented claim."""
        kind = self._kinds.get(request_id)
        if kind in AGENT_FAULTS:
            return True
        return request_id % AGENT_EVERY == AGENT_EVERY - 1 and kind in (
            None,
            FaultKind.UNSUPPORTED_SENTENCE,
        )

    def style(self, request_id: int) -> Style:
        """How a clean answer is worded: the passages' sentences, reworded, or summed up,
        in turn (as a chat model writes); an answer that gets a fault stays verbatim, so
        its ground truth names the changed text exactly. A chat model words its own."""
        if request_id in self._faulty or self._generator.model != EXTRACTIVE_MODEL:
            return Style.VERBATIM
        styles = list(Style)
        return styles[request_id % len(styles)]

    def _worded(self, text: str, request_id: int) -> str:
        return restate(text, self.style(request_id))

    def _note_span(self, request_id: int) -> None:
        # The demo notes its span's ids to match the evaluation to the request later.
        context = trace.get_current_span().get_span_context()
        with self._lock:
            self._spans[request_id] = (context.trace_id, context.span_id)

    def _build_agent(self) -> Callable[[str, int, str], str]:
        """The agent's path: one ``search_docs`` tool call, then the model's answer from it."""
        retriever, generator, top_k = self._retriever, self._generator, self._top_k

        @ragpulse.tool
        def search_docs(query: str, tool_call_id: str, request_id: int) -> list[dict[str, str]]:
            if self._kinds.get(request_id) in AGENT_FAULTS:
                raise TimeoutError("search backend did not answer within 5 s")
            return [
                {"id": p.document.id, "content": p.text} for p in retriever.search(query, top_k)
            ]

        @ragpulse.generation(model=generator.model)
        def final_answer(question: str, docs: Sequence[dict[str, str]], request_id: int) -> str:
            sources = [Source(d["content"], d["id"]) for d in docs]
            text = self._worded(generator.generate(question, sources), request_id)
            if self._kinds.get(request_id) is FaultKind.UNSUPPORTED_SENTENCE:
                rng = random.Random(f"{self._seed}:{request_id}")
                text, fault = inject_fault(
                    text, sources, rng, FaultKind.UNSUPPORTED_SENTENCE, question=question
                )
                with self._lock:
                    self._faults[request_id] = fault
            return text

        @ragpulse.rag(name=APP_NAME, reference=reference_answer, rubric=required_points)
        def handle_agent(question: str, request_id: int, conversation_id: str) -> str:
            self._note_span(request_id)
            try:
                docs = search_docs(
                    question, tool_call_id=f"call_{request_id}", request_id=request_id
                )
            except TimeoutError as exc:
                # The model answers anyway, from what it remembers of the documentation:
                # nothing in this request supports it.
                with self._lock:
                    self._faults[request_id] = InjectedFault(
                        FaultKind.FAILED_TOOL, "", f"search_docs: {exc}", 0, 0, None
                    )
                remembered = retriever.search(question, top_k)
                docs = [{"id": p.document.id, "content": p.text} for p in remembered]
            return final_answer(question, docs, request_id)

        return handle_agent

    def _build(self) -> Callable[[str, int], str]:
        retriever, generator, top_k = self._retriever, self._generator, self._top_k

        @ragpulse.retrieval
        def search(query: str, request_id: int) -> list[dict[str, object]]:
            passages = retriever.search(query, top_k)
            kind = self._kinds.get(request_id)
            if kind in RETRIEVAL_FAULTS:
                # A retrieval fault: the index lost the document, or returns other ones.
                lost = {p.document.id for p in passages[:1]}
                passages = (
                    []
                    if kind is FaultKind.MISSING_CHUNKS
                    else [p for p in retriever.search(query, 4 * top_k)
                          if p.document.id not in lost][:top_k]
                )  # fmt: skip
                assert kind is not None
                with self._lock:
                    self._faults[request_id] = InjectedFault(kind, "", "", 0, 0, None)
            return [
                {"id": p.document.id, "content": p.text, "score": round(p.score, 4)}
                for p in passages
            ]

        @ragpulse.generation(model=generator.model)
        def answer(question: str, docs: Sequence[dict[str, object]], request_id: int) -> str:
            sources = [Source(str(d["content"]), str(d["id"])) for d in docs]
            # A cited assistant: each sentence names its passage.
            text = self._worded(cite(generator.generate(question, sources), sources), request_id)
            if request_id in self._faulty and self._kinds[request_id] not in RETRIEVAL_FAULTS:
                # Seeded per request, so the same faults come back whatever the concurrency.
                rng = random.Random(f"{self._seed}:{request_id}")
                points = required_points(question)
                text, fault = inject_fault(
                    text,
                    sources,
                    rng,
                    self._kinds[request_id],
                    question=question,
                    required=points[0] if points else None,
                )
                with self._lock:
                    self._faults[request_id] = fault
            return text

        @ragpulse.rag(name=APP_NAME, reference=reference_answer, rubric=required_points)
        def handle_request(question: str, request_id: int) -> str:
            self._note_span(request_id)
            docs = search(question, request_id)
            return answer(question, docs, request_id)

        return handle_request
