"""``ragpulse serve`` takes any body: it is refused as not OTLP (a 400) or decoded and read.

Whoever can reach the port chooses the bytes. The receive path must either raise its own
``DecodeError``, which serve answers with 400, or decode the request, route it, convert the
spans it decodes and read their traces, without any other exception (which serve could only
answer with 500). Bodies are seeded random mutations of a valid request (an OpenInference
RAG trace with attributes of every OTLP value shape: key-value lists, arrays, bytes, nesting
near protobuf's depth limit): protobuf with flipped, cut, inserted or spliced bytes, or with
edited fields (ids of the wrong length, any flags, kind, trace state, results a span should
not carry); plain random bytes; OTLP/JSON with any node replaced by a value of the wrong
type, hex ids of the wrong length or not hex, names with lone surrogates, or text mutations.
The seeds are fixed, so a failure names a body that can be replayed.
"""

from __future__ import annotations

import json
import random
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ragpulse.adapters import read_trace
from ragpulse.outputs.files import otlp_json
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.serve._convert import DecodeError, parse_json, parse_protobuf, to_readable_spans
from ragpulse.serve._route import route
from ragpulse.serve._trust import SeenUnits
from servers.rag_traces import rag_trace

BODIES = 1500
_VALUES: tuple[Any, ...] = (
    "", "RETRIEVER", "LLM", "retrieval", "chat", "application/json", "[" * 500, '{"a": [1, ',
    "é🙂", 0, -1, 2**63 - 1, 0.5, float("nan"), float("inf"), True, False, b"", b"\xff\xfe",
    None, ("a", 1, None), ["chat", ("x", b"y")], {"k": {"v": [1, "two"]}},
)  # fmt: skip
_KEYS = (
    "openinference.span.kind", "input.value", "output.value", "input.mime_type",
    "retrieval.documents.0.document.content", "retrieval.documents.1.document.score",
    "llm.output_messages.0.message.content", "gen_ai.operation.name",
    "gen_ai.retrieval.documents", "gen_ai.output.messages", "llm.request.type",
    "traceloop.entity.output", "ragpulse.eval.unit", "ragpulse.eval.force",
    "ragpulse.eval.groundedness.score", "http.route",
)  # fmt: skip
_JUNK: tuple[Any, ...] = (
    None, True, 0, -1, 1.5, 10**30, "", "x", "0" * 31, "0" * 32, "0" * 33, "g" * 32,
    "\ud800", [], {}, [1], {"a": 1}, "1e400", "18446744073709551616", "NaN",
)  # fmt: skip
_FIELDS = (
    "stringValue", "intValue", "boolValue", "bytesValue", "arrayValue", "kvlistValue", "values",
    "key", "value", "traceId", "spanId", "parentSpanId", "attributes", "events", "kind", "flags",
    "name", "status", "spans", "scopeSpans", "\ud800",
)  # fmt: skip
_SAMPLERS = (
    lambda: EvalSampler(1.0),
    lambda: EvalSampler(0.0),
    lambda: EvalSampler(0.0, always_evaluate=["POST*"]),
)


def _set(value: AnyValue, item: Any) -> None:
    if isinstance(item, bool):
        value.bool_value = item
    elif isinstance(item, int):
        value.int_value = item
    elif isinstance(item, float):
        value.double_value = item
    elif isinstance(item, str):
        value.string_value = item
    elif isinstance(item, bytes):
        value.bytes_value = item
    elif isinstance(item, list | tuple):
        value.array_value.SetInParent()
        for element in item:
            _set(value.array_value.values.add(), element)
    elif isinstance(item, dict):
        value.kvlist_value.SetInParent()
        for key, element in item.items():
            _set(value.kvlist_value.values.add(key=key).value, element)


def _request(rng: random.Random) -> ExportTraceServiceRequest:
    trace_id = rng.choice((1, rng.randint(1, 2**128 - 1)))
    request = encode_spans(rag_trace(trace_id))
    for span in request.resource_spans[0].scope_spans[0].spans:
        for _ in range(rng.randint(0, 5)):
            _set(span.attributes.add(key=rng.choice(_KEYS)).value, rng.choice(_VALUES))
        if rng.random() < 0.05:
            value = span.attributes.add(key="deep").value
            for _ in range(rng.choice((20, 90))):
                value = value.kvlist_value.values.add(key="k").value
        if rng.random() < 0.2:
            event = span.events.add(name=rng.choice(("db.query.result", "gen_ai.content.prompt")))
            _set(event.attributes.add(key="db.query.result.document").value, rng.choice(_VALUES))
    return request


def _edit_fields(rng: random.Random, request: ExportTraceServiceRequest) -> bytes:
    spans = request.resource_spans[0].scope_spans[0].spans
    for _ in range(rng.randint(1, 5)):
        span = rng.choice(spans)
        field = rng.randrange(7)
        if field == 0:
            span.trace_id = rng.randbytes(rng.choice((0, 15, 16, 17)))
        elif field == 1:
            span.span_id = rng.choice((b"", bytes(8), rng.randbytes(8), rng.randbytes(9)))
        elif field == 2:
            span.parent_span_id = rng.choice((b"", bytes(8), rng.randbytes(3), span.span_id))
        elif field == 3:
            span.flags = rng.randrange(2**32)
        elif field == 4:
            span.trace_state = rng.choice(("a=1", ",,,", "x" * 600, "a=b=c", "é=1"))
        elif field == 5:
            span.kind = rng.randrange(2**31)
        else:
            span.links.add(trace_id=rng.randbytes(16), span_id=rng.randbytes(rng.choice((0, 8))))
    return request.SerializeToString()


def _mutate_bytes(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        if not data:
            break
        at = rng.randrange(len(data))
        roll = rng.random()
        if roll < 0.4:
            data[at] ^= 1 << rng.randrange(8)
        elif roll < 0.6:
            del data[at : at + rng.randint(1, 8)]
        elif roll < 0.8:
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        else:
            data = data[:at]
    return bytes(data)


def _junk(rng: random.Random, depth: int = 0) -> Any:
    if depth > 2 or rng.random() < 0.6:
        return rng.choice(_JUNK)
    if rng.random() < 0.5:
        return [_junk(rng, depth + 1) for _ in range(rng.randint(0, 2))]
    return {rng.choice(_FIELDS): _junk(rng, depth + 1) for _ in range(rng.randint(0, 2))}


def _mutate_json(rng: random.Random, document: Any) -> Any:
    nodes: list[tuple[Any, Any]] = []
    stack: list[Any] = [document]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in items:
            nodes.append((node, key))
            if isinstance(item, dict | list):
                stack.append(item)
    for _ in range(rng.randint(1, 4)):
        parent, key = rng.choice(nodes)
        roll = rng.random()
        if roll < 0.6:
            parent[key] = _junk(rng)
        elif isinstance(parent, dict):
            id_key = rng.choice(("traceId", "spanId", "parentSpanId"))
            parent[id_key] = rng.choice(("ab", "0" * 15, "G" * 16, 5, None, " " + "0" * 31))
    return document


def _body(seed: int) -> tuple[bytes, bool]:
    """A body and whether it is OTLP/JSON."""
    rng = random.Random(seed)
    request = _request(rng)
    mode = rng.randrange(6)
    if mode == 0:
        return request.SerializeToString(), False
    if mode == 1:
        return _mutate_bytes(rng, request.SerializeToString()), False
    if mode == 2:
        return _edit_fields(rng, request), False
    if mode == 3:
        return rng.randbytes(rng.randint(0, 200)), rng.random() < 0.5
    document = json.loads(otlp_json(request))
    if mode == 4:
        return json.dumps(_mutate_json(rng, document)).encode("utf-8", "surrogatepass"), True
    return _mutate_bytes(rng, json.dumps(document).encode()), True


def _take(seed: int, body: bytes, is_json: bool) -> None:
    """The receive path of one body, up to the traces read from its spans."""
    rng = random.Random(seed)
    try:
        request = parse_json(body) if is_json else parse_protobuf(body)
    except DecodeError:
        return
    routed = route(
        request, None if is_json else body, rng.choice(_SAMPLERS)(), SeenUnits(600.0, 1000)
    )
    if routed.convert is None:
        return
    spans = to_readable_spans(routed.convert).spans
    for span in spans:
        reading = read_trace(span, spans)
        assert not [issue for issue in reading.issues if issue.startswith("unreadable trace")]


def test_no_body_makes_the_receive_path_fail_with_anything_but_a_decode_error() -> None:
    failed = []
    for seed in range(BODIES):
        body, is_json = _body(seed)
        try:
            _take(seed, body, is_json)
        except Exception as exc:
            failed.append((seed, repr(exc)[:200]))
    assert not failed, f"{len(failed)} of {BODIES} bodies failed; first: {failed[:3]}"
