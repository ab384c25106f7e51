"""What makes a span a retrieval, a tool call, an LLM call or an agent, in each convention.

One table, read by the adapters in the application's process (``_classify``, the convention
readers, ``_tools.is_tool``) and by ``ragpulse serve``'s router on the protobuf, before any
span is decoded (``serve._route``). A convention added here is recognised by both; nothing
else lists these keys and values.

A ``Marker`` says: a span with ``key`` (set to one of ``values``; any value when ``values``
is ``None``) is of ``kind``, unless it also has ``unless``. A ``EventMarker`` says the same
of a span event's name. ``kinds`` reads them over any mapping of attributes, so the router
passes the few attributes of a protobuf span whose keys are in ``MARKER_KEYS``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ragpulse import semconv

Kind = Literal["retrieval", "tool", "llm", "agent", "unit"]
"""``retrieval``: it reports retrieved documents; ``tool``: it ran one tool call; ``llm``: one
model call; ``agent``: an agent's (or workflow's) run, whose answer is an agent's; ``unit``:
ragpulse's own evaluation unit (``@rag``)."""

WAITS_FOR_UNIT: frozenset[Kind] = frozenset({"retrieval", "tool", "llm"})
"""Kinds of span a trace's record is read from: held until the trace's unit is read."""


@dataclass(frozen=True, slots=True)
class Marker:
    """A span attribute that says what a span is, in one convention."""

    convention: str
    kind: Kind
    key: str
    values: frozenset[str] | None = None
    """The values that mark it; ``None``: the key's presence does."""
    unless: str | None = None
    """A key whose presence overrides this marker (the older GenAI prompt attributes mark an
    LLM call only where no ``gen_ai.operation.name`` says otherwise)."""

    def marks(self, attributes: Mapping[str, object]) -> bool:
        value = attributes.get(self.key)
        if value is None or (self.unless is not None and self.unless in attributes):
            return False
        # Any value type may arrive (a list, an OTLP key-value list): only a name can match.
        return self.values is None or (isinstance(value, str) and value in self.values)


@dataclass(frozen=True, slots=True)
class EventMarker:
    """A span event whose name says what the span is."""

    convention: str
    kind: Kind
    name: str


LLM_OPERATIONS = frozenset(
    {
        semconv.GEN_AI_OPERATION_CHAT,
        semconv.GEN_AI_OPERATION_TEXT_COMPLETION,
        semconv.GEN_AI_OPERATION_GENERATE_CONTENT,
    }
)

LLM_REQUEST_TYPES = frozenset({"chat", "completion"})
"""OpenLLMetry's ``llm.request.type`` values of a model call."""

MARKERS: tuple[Marker, ...] = (
    # OpenInference: openinference.span.kind
    Marker(
        "openinference",
        "retrieval",
        semconv.OPENINFERENCE_SPAN_KIND,
        frozenset({semconv.OI_KIND_RETRIEVER}),
    ),
    Marker(
        "openinference", "tool", semconv.OPENINFERENCE_SPAN_KIND, frozenset({semconv.OI_KIND_TOOL})
    ),
    Marker(
        "openinference", "llm", semconv.OPENINFERENCE_SPAN_KIND, frozenset({semconv.OI_KIND_LLM})
    ),
    Marker(
        "openinference",
        "agent",
        semconv.OPENINFERENCE_SPAN_KIND,
        frozenset({semconv.OI_KIND_AGENT}),
    ),
    # OpenTelemetry GenAI: gen_ai.operation.name, and the attributes that carry documents
    Marker(
        "genai",
        "retrieval",
        semconv.GEN_AI_OPERATION_NAME,
        frozenset({semconv.GEN_AI_OPERATION_RETRIEVAL}),
    ),
    Marker("genai", "retrieval", semconv.GEN_AI_RETRIEVAL_DOCUMENTS),
    Marker(
        "genai",
        "tool",
        semconv.GEN_AI_OPERATION_NAME,
        frozenset({semconv.GEN_AI_OPERATION_EXECUTE_TOOL}),
    ),
    Marker("genai", "llm", semconv.GEN_AI_OPERATION_NAME, LLM_OPERATIONS),
    Marker(
        "genai",
        "llm",
        f"{semconv.GEN_AI_PROMPT}.0.content",
        unless=semconv.GEN_AI_OPERATION_NAME,
    ),
    Marker(
        "genai",
        "llm",
        f"{semconv.GEN_AI_COMPLETION}.0.content",
        unless=semconv.GEN_AI_OPERATION_NAME,
    ),
    Marker(
        "genai",
        "agent",
        semconv.GEN_AI_OPERATION_NAME,
        frozenset(
            {semconv.GEN_AI_OPERATION_INVOKE_AGENT, semconv.GEN_AI_OPERATION_INVOKE_WORKFLOW}
        ),
    ),
    # MCP (GenAI's Model Context Protocol conventions)
    Marker("mcp", "tool", semconv.MCP_METHOD_NAME, frozenset({semconv.MCP_METHOD_TOOLS_CALL})),
    # OpenLLMetry (Traceloop)
    Marker(
        "openllmetry", "tool", semconv.TRACELOOP_SPAN_KIND, frozenset({semconv.TRACELOOP_KIND_TOOL})
    ),
    Marker("openllmetry", "llm", semconv.LLM_REQUEST_TYPE, LLM_REQUEST_TYPES),
    Marker(
        "openllmetry",
        "agent",
        semconv.TRACELOOP_SPAN_KIND,
        frozenset({semconv.TRACELOOP_KIND_AGENT}),
    ),
    # ragpulse's own unit (its @retrieval, @generation and @tool spans write GenAI's markers)
    Marker("ragpulse", "unit", semconv.RAG_UNIT),
)

EVENT_MARKERS: tuple[EventMarker, ...] = (
    # OpenLLMetry's vector-store instrumentations: one event per match
    EventMarker("openllmetry", "retrieval", semconv.DB_QUERY_RESULT_EVENT),
)

MARKER_KEYS: frozenset[str] = frozenset(
    {marker.key for marker in MARKERS}
    | {marker.unless for marker in MARKERS if marker.unless is not None}
)
"""Every attribute key the table reads: all a classifier needs of a span's attributes."""

MARKER_EVENTS: frozenset[str] = frozenset(marker.name for marker in EVENT_MARKERS)


def _group(convention: str | None, kind: Kind) -> tuple[Marker, ...]:
    return tuple(
        m for m in MARKERS if m.kind == kind and (convention is None or m.convention == convention)
    )


_BY_KIND: dict[tuple[str | None, Kind], tuple[Marker, ...]] = {}
_EVENTS_BY_KIND: dict[tuple[str | None, Kind], frozenset[str]] = {}
for _convention in (None, *{m.convention for m in MARKERS}):
    for _kind in ("retrieval", "tool", "llm", "agent", "unit"):
        _BY_KIND[(_convention, _kind)] = _group(_convention, _kind)  # type: ignore[arg-type]
        _EVENTS_BY_KIND[(_convention, _kind)] = frozenset(  # type: ignore[index]
            e.name
            for e in EVENT_MARKERS
            if e.kind == _kind and (_convention is None or e.convention == _convention)
        )


def is_kind(
    kind: Kind,
    attributes: Mapping[str, object],
    event_names: Iterable[str] = (),
    *,
    convention: str | None = None,
) -> bool:
    """Whether the table marks a span of these attributes and event names as ``kind`` (in
    ``convention`` alone, when given)."""
    for marker in _BY_KIND[(convention, kind)]:
        if marker.marks(attributes):
            return True
    names = _EVENTS_BY_KIND[(convention, kind)]
    return bool(names) and any(name in names for name in event_names)


def kinds(attributes: Mapping[str, object], event_names: Iterable[str] = ()) -> frozenset[Kind]:
    """Every kind the table marks a span as (empty: a span no convention here classifies)."""
    found: set[Kind] = {marker.kind for marker in MARKERS if marker.marks(attributes)}
    found.update(e.kind for e in EVENT_MARKERS if e.name in set(event_names))
    return frozenset(found)


def body_marks() -> tuple[bytes, ...]:
    """Byte strings one of which an OTLP request must contain to hold a span the table marks
    as waiting for its unit (the router skips reading spans of a request without any)."""
    marks: set[bytes] = set()
    for marker in MARKERS:
        if marker.kind not in WAITS_FOR_UNIT:
            continue
        if marker.values is None:
            marks.add(marker.key.encode())
        else:
            marks.update(value.encode() for value in marker.values)
    marks.update(e.name.encode() for e in EVENT_MARKERS if e.kind in WAITS_FOR_UNIT)
    return tuple(sorted(marks))
