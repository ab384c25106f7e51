"""In the application's process, each final answer of an agent's trace is scored on its own
span: the earlier answers on the LLM calls that gave them, the last on the root; every
span still goes downstream once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from tests.unit.test_adapters_agent_answers import FIRST, two_turns
from tests.unit.test_processor_any_trace import Recording

from ragpulse import semconv
from ragpulse.adapters import records_from_trace
from ragpulse.judges.lexical import LexicalJudge
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.processor.settle import CARRIER_SPAN_NAME
from ragpulse.sampling import EvalSampler
from ragpulse.settings.options import BoundsOptions


@pytest.fixture
def downstream() -> Recording:
    return Recording()


def processor(
    downstream: Recording, max_held_spans: int | None = None, **options: Any
) -> Iterator[EvaluatingSpanProcessor]:
    evaluating = EvaluatingSpanProcessor(
        downstream,
        judge=LexicalJudge(),
        sampler=EvalSampler(rate=1.0),
        bounds=BoundsOptions(hold_timeout=30.0, max_held_spans=max_held_spans),
        **options,
    )
    try:
        yield evaluating
    finally:
        evaluating.shutdown()


def run(downstream: Recording, **options: Any) -> tuple[dict[str, ReadableSpan], list[Any]]:
    top, spans, named = two_turns()
    for evaluating in processor(downstream, **options):
        for span in (*spans, top):
            evaluating.on_end(span)
        assert evaluating.force_flush(60_000)
    return named, [top, *spans]


def by_id(spans: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {span.context.span_id: span for span in spans if span.context is not None}


def test_each_answer_is_scored_on_its_own_span(downstream: Recording) -> None:
    named, sent = run(downstream)

    out = by_id(downstream.spans)
    first = out[named["answer1"].context.span_id].attributes or {}
    last = out[named["top"].context.span_id].attributes or {}
    assert first[semconv.EVAL_STATUS] == "ok"
    assert last[semconv.EVAL_STATUS] == "ok"
    # The second turn's LLM call is a step of the last answer: not a unit of its own.
    assert semconv.EVAL_STATUS not in (out[named["answer2"].context.span_id].attributes or {})
    # Each span once, with its ids.
    assert sorted(by_id(downstream.spans)) == sorted(by_id(sent))
    assert len(downstream.spans) == len(sent)


def test_the_tool_span_of_each_turn_gets_its_own_answers_context_scores(
    downstream: Recording,
) -> None:
    named, _ = run(downstream)

    out = by_id(downstream.spans)
    for tool in ("tool1", "tool2"):
        attributes = out[named[tool].context.span_id].attributes or {}
        assert any(
            key.startswith("ragpulse.eval.context_relevance.documents.0") for key in attributes
        )


def test_an_earlier_answers_span_past_the_holding_bound_gets_its_scores_on_a_carrier(
    downstream: Recording,
) -> None:
    # One span may be held: the root. The earlier answer's call goes on as it is, and its
    # result follows as a carrier span linked to it.
    named, sent = run(downstream, max_held_spans=1)

    answer1 = named["answer1"].context
    [carrier] = [span for span in downstream.spans if span.name == CARRIER_SPAN_NAME]
    attributes = carrier.attributes or {}
    assert attributes[semconv.EVAL_TARGET_SPAN_ID] == format(answer1.span_id, "016x")
    assert attributes[semconv.EVAL_STATUS] == "ok"
    assert [link.context.span_id for link in carrier.links] == [answer1.span_id]
    # Everything else still goes downstream once.
    assert len(downstream.spans) == len(sent) + 1


def test_the_earlier_answer_record_reaches_the_hook_with_its_own_question(
    downstream: Recording,
) -> None:
    seen: list[tuple[str | None, str | None]] = []
    run(downstream, on_evaluation=lambda record, _: seen.append((record.question, record.answer)))

    assert seen[0][1] == FIRST
    assert len(seen) == 2 and seen[0] != seen[1]


def test_an_answer_span_received_after_its_root_goes_on_at_once(downstream: Recording) -> None:
    # ragpulse serve receives spans in any order: a model call arriving after its root was
    # read has no unit left to wait for.
    top, _, named = two_turns()
    early, late = named["answer1"], named["answer2"]
    for evaluating in processor(downstream):
        evaluating.on_end_retrieval(early)
        assert early not in downstream.spans  # may be a unit: waits for its root
        evaluating.on_end_with_records(top, records_from_trace(top, [early]))
        assert early in downstream.spans  # its root took it, or let it go
        evaluating.on_end_retrieval(late)
        assert late in downstream.spans
        assert evaluating.force_flush(60_000)
    assert len(downstream.spans) == 3


def test_an_agent_trace_of_ten_thousand_tool_spans_is_judged_on_its_last_result(
    downstream: Recording,
) -> None:
    # As ragpulse serve judges it: a trace is bounded by its bytes, not a count of spans.
    from tests.unit.test_adapters_agents import (
        ANSWER,
        QUESTION,
        WARRANTY,
        oi_llm,
        root,
        tool_span,
    )

    top = root()
    tools = [
        tool_span(
            top,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_docs",
                "gen_ai.tool.call.result": f"Shelf {i} holds spare parts.",
            },
        )
        for i in range(9_999)
    ]
    tools.append(
        tool_span(
            top,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_docs",
                "gen_ai.tool.call.result": WARRANTY,
            },
        )
    )
    answer = oi_llm(top, [{"role": "user", "content": QUESTION}], ANSWER)
    for evaluating in processor(downstream):
        for index, span in enumerate((*tools, answer, top)):
            if index % 1000 == 0:
                # As a real agent's tools end, over time: the worker reads them as they come.
                evaluating.force_flush(120_000)
            evaluating.on_end(span)
        assert evaluating.force_flush(120_000)

    unit = by_id(downstream.spans)[top.context.span_id].attributes or {}
    assert unit[semconv.EVAL_STATUS] == "ok"
    assert unit["ragpulse.eval.faithfulness.score"] == 1.0
    assert len(downstream.spans) == 10_002
