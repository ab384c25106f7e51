"""Routing a received request on its protobuf, before any span is decoded into an SDK span.

Most of what ``ragpulse serve`` receives is not evaluated: at sample rate ``r``
only the traces whose id falls in the sample (``EvalSampler.in_sample``, the same
trace-id ratio as the evaluation decision) and the units a rule forces can be.
``route`` reads each span's trace id, parent and flags from the decoded OTLP
message and splits the request in two:

- ``convert``: the spans of sampled (or forced) traces, decoded into SDK spans for
  assembly: the units to evaluate and the retrieval and LLM spans their records
  are read from;
- ``raw``: every span that goes on as it came (all but the units in ``convert``
  and the units received again within the dedupe window), as the bytes of an
  export request. When that is the whole request, unchanged, it is the received
  body itself; otherwise the spans are copied, within their resource and scope,
  into a request of their own.

Results a span arrives with (``ragpulse.eval.*``) are stripped on the way, in the
message, so both halves are clean (``_trust``). The attributes are read only when
the request carries the ``ragpulse.eval.`` prefix at all (one search of the body)
or the sampler has name or route rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from ragpulse import semconv
from ragpulse.sampling import EvalSampler
from ragpulse.serve._convert import attributes_of
from ragpulse.serve._trust import SeenUnits, strip_message_results

# OTLP's SpanFlags: bit 8 says whether bit 9 (the parent is remote) is known.
_REMOTE_PARENT = 0x300
_PREFIX = semconv.EVAL_PREFIX.encode()
_UNIT_KEY = semconv.RAG_UNIT


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


_NO_TRACE = bytes(16)
_NO_SPAN = bytes(8)
_MAX_ERRORS = 5


def _low_bits(trace_id: bytes) -> int:
    return int.from_bytes(trace_id, "big")


def _is_local_root(span: PbSpan) -> bool:
    return not span.parent_span_id or span.flags & _REMOTE_PARENT == _REMOTE_PARENT


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
    marked = body is None or _PREFIX in body
    rules = marked or sampler.has_rules
    forced = _forced_traces(request, sampler) if rules else set()
    in_sample = sampler.in_sample
    # Per span: True to convert, and whether it also goes on raw.
    convert_any = False
    raw_all = True
    changed = False
    duplicates = 0
    raw_count = 0
    rejected = 0
    errors: list[str] = []
    plan: list[list[list[tuple[PbSpan, bool, bool]]]] = []
    for resource_spans in request.resource_spans:
        groups: list[list[tuple[PbSpan, bool, bool]]] = []
        plan.append(groups)
        for scope_spans in resource_spans.scope_spans:
            group: list[tuple[PbSpan, bool, bool]] = []
            groups.append(group)
            for span in scope_spans.spans:
                trace_id = span.trace_id
                span_id = span.span_id
                if (
                    len(trace_id) != 16
                    or len(span_id) != 8
                    or trace_id == _NO_TRACE
                    or span_id == _NO_SPAN
                ):
                    rejected += 1
                    raw_all = False
                    if len(errors) < _MAX_ERRORS:
                        errors.append(f"span {span.name!r}: invalid trace or span id")
                    group.append((span, False, False))
                    continue
                if marked and strip_message_results(span):
                    changed = True
                unit = _is_local_root(span) or (marked and _is_rag_unit(span))
                if (
                    unit
                    and seen is not None
                    and not seen.first_time(_low_bits(trace_id), int.from_bytes(span_id, "big"))
                ):
                    duplicates += 1
                    raw_all = False
                    group.append((span, False, False))
                    continue
                sampled = trace_id in forced or in_sample(_low_bits(trace_id))
                # A unit to evaluate leaves with its scores; every other span leaves now.
                goes_raw = not (sampled and unit)
                group.append((span, sampled, goes_raw))
                convert_any = convert_any or sampled
                if goes_raw:
                    raw_count += 1
                else:
                    raw_all = False
    convert = _select(request, plan, 1) if convert_any else None
    raw: bytes | None
    if raw_count == 0:
        raw = None
    elif raw_all and not changed and body is not None:
        raw = body
    else:
        raw = _select(request, plan, 2).SerializeToString()
    return Route(raw, raw_count, convert, duplicates, rejected, tuple(errors))


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


def _select(
    request: ExportTraceServiceRequest,
    plan: list[list[list[tuple[PbSpan, bool, bool]]]],
    which: int,
) -> ExportTraceServiceRequest:
    """The spans whose plan entry has ``which`` set, in their resources and scopes."""
    out = ExportTraceServiceRequest()
    for resource_spans, groups in zip(request.resource_spans, plan, strict=True):
        target = None
        for scope_spans, group in zip(resource_spans.scope_spans, groups, strict=True):
            chosen = [entry[0] for entry in group if entry[which]]
            if not chosen:
                continue
            if target is None:
                target = out.resource_spans.add()
                target.resource.CopyFrom(resource_spans.resource)
                target.schema_url = resource_spans.schema_url
            scope = target.scope_spans.add()
            scope.scope.CopyFrom(scope_spans.scope)
            scope.schema_url = scope_spans.schema_url
            scope.spans.extend(chosen)
    return out
