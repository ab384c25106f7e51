"""Routing in ragpulse serve: sampling is decided on the trace id before any span is decoded;
what is not evaluated goes on as the bytes it came in."""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragpulse import semconv
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.serve._route import Route, route
from ragpulse.serve._trust import SeenUnits
from servers.rag_traces import rag_trace

# Trace ids whose low 64 bits are small are in every positive rate's sample; the highest are
# in none below 1.
SAMPLED = 0x1
UNSAMPLED = 0xFFFFFFFFFFFFFFFF


def _body(*traces: Any) -> bytes:
    return encode_spans([span for trace in traces for span in trace]).SerializeToString()


def _route(body: bytes, rate: float, **sampler: Any) -> Route:
    request = ExportTraceServiceRequest.FromString(body)
    return route(request, body, EvalSampler(rate, **sampler), SeenUnits(600.0, 1000))


def _names(data: bytes | None) -> list[str]:
    if data is None:
        return []
    request = ExportTraceServiceRequest.FromString(data)
    return [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _attributes(data: bytes, name: str) -> dict[str, Any]:
    request = ExportTraceServiceRequest.FromString(data)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.name == name:
                    return {kv.key: kv.value for kv in span.attributes}
    raise AssertionError(f"no span {name!r}")


def test_at_rate_zero_the_request_goes_on_as_the_very_bytes_it_came_in() -> None:
    body = _body(rag_trace(SAMPLED), rag_trace(UNSAMPLED))

    routed = _route(body, 0.0)

    assert routed.raw is body
    assert routed.raw_count == 4 and routed.convert is None


def test_a_sampled_unit_and_its_retrieval_span_are_decoded_and_held_back() -> None:
    body = _body(rag_trace(SAMPLED), rag_trace(UNSAMPLED))

    routed = _route(body, 0.5)

    # The retrieval span leaves with its unit, to carry its documents' scores.
    assert sorted(_names(routed.raw)) == ["POST /ask", "retrieve"]
    assert [int.from_bytes(trace_id, "big") for trace_id, _ in routed.held] == [SAMPLED]
    assert routed.convert is not None
    assert _names(routed.convert.SerializeToString()) == ["POST /ask", "retrieve"]
    (converted_root,) = [
        s
        for rs in routed.convert.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
        if not s.parent_span_id
    ]
    assert int.from_bytes(converted_root.trace_id, "big") == SAMPLED


def test_results_an_unsampled_span_arrives_with_are_stripped_from_the_bytes_and_marked() -> None:
    forged = {semconv.EVAL_STATUS: "ok", f"{semconv.EVAL_PREFIX}faithfulness.score": 1.0}
    body = _body(rag_trace(UNSAMPLED, root_attributes=forged))

    routed = _route(body, 0.0)

    assert routed.raw is not None and routed.raw is not body
    root = _attributes(routed.raw, "POST /ask")
    assert semconv.EVAL_STATUS not in root
    assert root[semconv.SERVE_EVAL_STRIPPED].int_value == 2


def test_a_forced_unit_at_rate_zero_is_decoded_with_the_parts_that_came_before_it() -> None:
    trace = rag_trace(UNSAMPLED, root_attributes={semconv.RAG_FORCE_EVALUATION: True})
    body = _body(list(reversed(trace)))  # the retriever first, as batch processors send

    routed = _route(body, 0.0)

    assert routed.convert is not None
    assert sorted(_names(routed.convert.SerializeToString())) == ["POST /ask", "retrieve"]
    assert _names(routed.raw) == ["retrieve"]


def test_a_unit_matching_an_always_evaluate_glob_is_decoded_at_rate_zero() -> None:
    body = _body(rag_trace(UNSAMPLED))

    routed = _route(body, 0.0, always_evaluate=["POST /*"])

    assert routed.convert is not None
    assert "POST /ask" in _names(routed.convert.SerializeToString())


def test_a_sampled_unit_received_again_is_neither_forwarded_nor_decoded() -> None:
    body = _body(rag_trace(SAMPLED))
    sampler = EvalSampler(1.0)
    seen = SeenUnits(600.0, 1000)
    route(ExportTraceServiceRequest.FromString(body), body, sampler, seen)

    again = route(ExportTraceServiceRequest.FromString(body), body, sampler, seen)

    assert again.duplicates == 1
    assert _names(again.raw) == []  # the retrieval span is held for its unit
    assert again.convert is not None
    assert _names(again.convert.SerializeToString()) == ["retrieve"]


def test_a_span_with_an_invalid_trace_id_is_rejected_at_a_positive_rate() -> None:
    request = encode_spans(rag_trace(SAMPLED))
    request.resource_spans[0].scope_spans[0].spans[1].trace_id = b"\x00" * 16
    body = request.SerializeToString()

    routed = _route(body, 1.0)

    assert routed.rejected == 1 and "invalid trace id" in routed.errors[0]
    assert _names(routed.raw) == []


def test_a_part_of_a_sampled_trace_that_retrieved_nothing_goes_on_at_once() -> None:
    trace = rag_trace(SAMPLED)
    request = encode_spans(trace)
    part = request.resource_spans[0].scope_spans[0].spans[1]
    del part.attributes[:]
    part.name = "chat"
    body = request.SerializeToString()

    routed = _route(body, 1.0)

    assert _names(routed.raw) == ["chat"]
    assert routed.held == frozenset()


def test_an_llm_call_of_a_sampled_trace_waits_for_its_root_in_any_convention() -> None:
    # Its output may be a final answer the conversation went on from: a unit of its own,
    # known only when the root is read, so it is held rather than sent on as it came.
    for attributes in (
        {"openinference.span.kind": "LLM"},
        {"gen_ai.operation.name": "chat"},
        {"llm.request.type": "chat"},
        {"gen_ai.prompt.0.content": "hello"},
    ):
        request = encode_spans(rag_trace(SAMPLED) + rag_trace(UNSAMPLED))
        for spans in (ss.spans for rs in request.resource_spans for ss in rs.scope_spans):
            for span in spans:
                if span.parent_span_id:
                    del span.attributes[:]
                    span.name = "chat"
                    for key, value in attributes.items():
                        span.attributes.add(key=key).value.string_value = value
        body = request.SerializeToString()

        routed = _route(body, 0.5)

        assert [int.from_bytes(trace_id, "big") for trace_id, _ in routed.held] == [SAMPLED]
        assert sorted(_names(routed.raw)) == ["POST /ask", "chat"], attributes
