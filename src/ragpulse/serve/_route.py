"""Routing a received request on its protobuf, before any span is decoded into an SDK span.

Most of what ``ragpulse serve`` receives is not evaluated: at sample rate ``r``
only the traces whose id falls in the sample (``EvalSampler.in_sample``, the same
trace-id ratio as the evaluation decision) and the units a rule forces can be.
``route`` reads each span's trace id, parent and flags from the decoded OTLP
message and splits the request in two:

- ``convert``: copies of the spans of sampled (or forced) traces, to be decoded into
  SDK spans for assembly: the units to evaluate and the other spans their records
  are read from;
- ``held``: the retrieval and tool spans of sampled traces (any convention), which leave
  with their unit, carrying their documents' scores, and their LLM calls' spans, which may
  give a final answer of their own (a unit, known when the trace's root is read):
  converted, not forwarded as they came;
- ``raw``: every span that goes on as it came (all but the units and retrieval spans
  of sampled traces, the units received again within the dedupe window and spans
  with invalid ids),
  as the bytes of an export request. When that is the whole request, unchanged, it
  is the received body itself; otherwise the few spans that do not go on are
  deleted from the decoded message, which is serialized again (in C, without
  touching the others one by one).

Results a span arrives with (``ragpulse.eval.*``) are stripped on the way, in the
message, so both halves are clean (``_trust``). Reading one field of a decoded span
costs a third of a microsecond, as much as a collector spends on the whole span, so
nothing is read that the body shows is not there: attributes only when it holds a
result, a force flag (one search of the body each) or the sampler has name or route
rules; at rate 0 with none of those, no span at all (the request is forwarded as it
came, like ``--no-evaluate``). Ids are checked on the spans read: a trace id on every
span at a positive rate, a span id on the spans of sampled traces; a span that goes
on as it came is not otherwise inspected, as in a plain relay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from ragpulse import semconv
from ragpulse.adapters._conventions import MARKER_KEYS, WAITS_FOR_UNIT, Kind, body_marks, kinds
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.serve._convert import attributes_of, count_spans
from ragpulse.serve._trust import SeenUnits, strip_message_results

# OTLP's SpanFlags: bit 8 says whether bit 9 (the parent is remote) is known.
_REMOTE_PARENT = 0x300
_PREFIX = semconv.EVAL_PREFIX.encode()
_UNIT_KEY = semconv.RAG_UNIT
_UNIT_BYTES = semconv.RAG_UNIT.encode()
_FORCE_BYTES = semconv.RAG_FORCE_EVALUATION.encode()
# A body without any of these holds no retrieval, tool or LLM span (the conventions table's
# markers: ``adapters.is_evidence_span``, ``adapters.may_answer``).
_RETRIEVAL_MARKS = body_marks()


@dataclass(frozen=True, slots=True)
class Route:
    """Where the spans of one request go."""

    raw: bytes | None
    """A serialized export request of the spans forwarded as they came; None: none are."""
    raw_count: int
    convert: ExportTraceServiceRequest | None
    """The spans of sampled or forced traces, to decode; None: none."""
    duplicates: int
    """Units received again within the dedupe window: neither forwarded nor judged."""
    rejected: int = 0
    """Spans with invalid ids: neither forwarded nor judged (the OTLP partial success)."""
    errors: tuple[str, ...] = ()
    held: frozenset[tuple[bytes, bytes]] = frozenset()
    """(trace id, span id) of the retrieval, tool and LLM spans in ``convert`` that are not
    in ``raw``: they wait for their unit (``EvaluatingSpanProcessor.on_end_retrieval``)."""


_NO_TRACE = bytes(16)
_NO_SPAN = bytes(8)
_MAX_ERRORS = 5


def _is_local_root(span: PbSpan) -> bool:
    return not span.parent_span_id or span.flags & _REMOTE_PARENT == _REMOTE_PARENT


def marker_attributes(span: PbSpan) -> dict[str, object]:
    """The attributes of ``span`` that the conventions table reads (``MARKER_KEYS``), as plain
    values: what ``adapters._conventions.kinds`` needs of a protobuf span."""
    found: dict[str, object] = {}
    for pair in span.attributes:
        if pair.key in MARKER_KEYS:
            value = pair.value
            kind = value.WhichOneof("value")
            found[pair.key] = getattr(value, kind) if kind is not None else None
    return found


def span_kinds(span: PbSpan) -> frozenset[Kind]:
    """What the conventions table says ``span`` is, read on the protobuf."""
    events = (event.name for event in span.events) if span.events else ()
    return kinds(marker_attributes(span), events)


def _waits_for_unit(span: PbSpan) -> bool:
    """``ragpulse.adapters.is_buffered`` on the protobuf: a retrieval or tool span in any
    convention, where per-context scores go; or an LLM call, which may be a final answer's
    unit (the processor tells, ``adapters.may_answer``)."""
    return bool(span_kinds(span) & WAITS_FOR_UNIT)


def _is_rag_unit(span: PbSpan) -> bool:
    for pair in span.attributes:
        if pair.key == _UNIT_KEY:
            value = pair.value
            return bool(value.bool_value or value.string_value or value.int_value)
    return False


def route(
    request: ExportTraceServiceRequest,
    body: bytes | None,
    sampler: EvalSampler,
    seen: SeenUnits | None,
) -> Route:
    """Split ``request`` (whose serialization is ``body``, when known) as described above."""
    # Reading a field of a decoded span costs a third of a microsecond: what the body does
    # not contain is not looked for, span by span.
    if body is None:
        results = units_marked = forces = True
    else:
        prefixed = body.count(_PREFIX)
        marks = body.count(_UNIT_BYTES)
        forces = _FORCE_BYTES in body
        units_marked = marks > 0
        results = prefixed > marks + (body.count(_FORCE_BYTES) if forces else 0)
    retrievals_marked = body is None or any(mark in body for mark in _RETRIEVAL_MARKS)
    forced = _forced_traces(request, sampler) if forces or sampler.has_rules else set()
    in_sample = None if sampler.selects_nothing else sampler.in_sample
    if in_sample is None and not forced and not results and body is not None:
        # Nothing is sampled, forced or to strip: the request goes on as it came, unread.
        return Route(body, count_spans(request), None, 0)
    changed = False
    duplicates = 0
    raw_count = 0
    rejected = 0
    errors: list[str] = []
    held: set[tuple[bytes, bytes]] = set()
    # The spans to convert, with their groups; the spans that do not go on as they came.
    chosen: list[tuple[ResourceSpans, ScopeSpans, PbSpan]] = []
    drops: list[tuple[Any, list[int]]] = []
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            spans = scope_spans.spans
            dropped: list[int] = []
            for index, span in enumerate(spans):
                trace_id = span.trace_id
                if len(trace_id) != 16 or trace_id == _NO_TRACE:
                    rejected += 1
                    dropped.append(index)
                    _note(errors, span, "trace")
                    continue
                if results and strip_message_results(span):
                    changed = True
                sampled = in_sample is not None and in_sample(int.from_bytes(trace_id, "big"))
                if not (sampled or trace_id in forced):
                    raw_count += 1
                    continue
                span_id = span.span_id
                if len(span_id) != 8 or span_id == _NO_SPAN:
                    rejected += 1
                    dropped.append(index)
                    _note(errors, span, "span")
                    continue
                if not (_is_local_root(span) or (units_marked and _is_rag_unit(span))):
                    chosen.append((resource_spans, scope_spans, span))
                    if sampled and retrievals_marked and _waits_for_unit(span):
                        # Leaves with its unit, carrying its documents' scores, or as a
                        # unit of its own.
                        held.add((trace_id, span_id))
                        dropped.append(index)
                    else:
                        # A part of a sampled trace: read for its unit's record, sent on now.
                        raw_count += 1
                    continue
                dropped.append(index)
                if seen is not None and not seen.first_time(
                    int.from_bytes(trace_id, "big"), int.from_bytes(span_id, "big")
                ):
                    duplicates += 1
                    continue
                # A unit to evaluate: it leaves later, with its scores.
                chosen.append((resource_spans, scope_spans, span))
            if dropped:
                drops.append((spans, dropped))
    # Copied out before the units leave the request (the copies are what gets decoded).
    convert = _convert_request(chosen) if chosen else None
    for spans, dropped in drops:
        for index in reversed(dropped):
            del spans[index]
    raw: bytes | None
    if raw_count == 0:
        raw = None
    elif not drops and not changed and body is not None:
        raw = body
    else:
        raw = request.SerializeToString()
    return Route(raw, raw_count, convert, duplicates, rejected, tuple(errors), frozenset(held))


def _note(errors: list[str], span: PbSpan, which: str) -> None:
    if len(errors) < _MAX_ERRORS:
        errors.append(f"span {span.name!r}: invalid {which} id")


def _forced_traces(request: ExportTraceServiceRequest, sampler: EvalSampler) -> set[bytes]:
    """Trace ids of the units a rule forces (read before routing, so parts that come first
    in the request are kept for them)."""
    forced: set[bytes] = set()
    force_key = sampler.force_attribute
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if not (_is_local_root(span) or _is_rag_unit(span)):
                    continue
                if not sampler.has_rules and not any(
                    pair.key == force_key for pair in span.attributes
                ):
                    continue
                if sampler.forces(span.name, attributes_of(span.attributes)):
                    forced.add(span.trace_id)
    return forced


def _convert_request(
    chosen: list[tuple[ResourceSpans, ScopeSpans, PbSpan]],
) -> ExportTraceServiceRequest:
    """A request of copies of the ``chosen`` spans, in their resources and scopes."""
    out = ExportTraceServiceRequest()
    resource = scope = None
    target_resource: ResourceSpans | None = None
    target: ScopeSpans | None = None
    for resource_spans, scope_spans, span in chosen:
        if resource_spans is not resource or target_resource is None:
            resource, scope = resource_spans, None
            target_resource = out.resource_spans.add()
            target_resource.resource.CopyFrom(resource_spans.resource)
            target_resource.schema_url = resource_spans.schema_url
        if scope_spans is not scope or target is None:
            scope = scope_spans
            target = target_resource.scope_spans.add()
            target.scope.CopyFrom(scope_spans.scope)
            target.schema_url = scope_spans.schema_url
        target.spans.append(span)
    return out
