"""Readers the adapters share: attributes, JSON, numbers, messages and documents.

The conventions borrow their shapes from one another (OpenInference and
OpenLLMetry write GenAI-like messages, every vector store has its own name for a
document's text), so the small readers live here, once. Every reader notes what
it could not read in ``issues`` and never raises.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import ReadableSpan

from ragpulse import semconv
from ragpulse.evaluation.types import Context

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Event
    from opentelemetry.util.types import AttributeValue

Attributes = Mapping[str, "AttributeValue"]
"""A span's attributes, as ``attributes_of`` returns them."""
Events = Sequence["Event"]
"""A span's events."""


class Issues(list[str]):
    """Where readers note what they skipped: one short line per unreadable item.

    The first ``keep`` lines are kept and every one is counted (``total``): a trace of a
    million unreadable documents costs a counter, not a million strings held.
    """

    def __init__(self, keep: int = 20) -> None:
        super().__init__()
        self.keep = keep
        self.total = 0

    def append(self, issue: str) -> None:
        self.total += 1
        if len(self) < self.keep:
            super().append(issue)


_USER_ROLES = frozenset({"user", "human"})
_ASSISTANT_ROLES = frozenset({"assistant", "ai", "model"})
# LangChain's serialised messages name the role by class.
_LANGCHAIN_ROLES = {"HumanMessage": "user", "AIMessage": "assistant", "SystemMessage": "system"}
# Keys a retrieved document's text goes by across vector stores and frameworks.
DOCUMENT_TEXT_KEYS = ("content", "text", "page_content", "document", "chunk")
_SDK_EVENTS = ReadableSpan.events
_NUMBER_BYTES = 8
# A list index of more digits than this is no list's (a position past an int64).
_MAX_INDEX_DIGITS = 18


def attributes_of(span: ReadableSpan) -> Mapping[str, AttributeValue]:
    """The span's attributes as a plain mapping, empty when it has none.

    ``span.attributes`` wraps the SDK's ``BoundedAttributes`` in a new proxy on
    every access, and ``BoundedAttributes`` answers a missing key through
    ``KeyError``: together about 1.5 µs a lookup, and detection is mostly
    missing keys on every span that ends. The dict behind them answers in
    nanoseconds; a finished span's attributes no longer change, so reading it is
    safe. Spans built any other way go through the public property.
    """
    stored = getattr(span, "_attributes", None)
    backing = getattr(stored, "_dict", stored)
    if isinstance(backing, dict):
        return backing
    return span.attributes or {}


def events_of(span: ReadableSpan) -> Events:
    """The span's events, without copying them.

    ``span.events`` copies the SDK's ``BoundedList`` into a new tuple under its
    lock on every access, for every span that ends, though most have no events.
    A finished span's events no longer change, so the deque behind the SDK's own
    property is read as it is. A span class with an ``events`` of its own goes
    through it.
    """
    if type(span).events is _SDK_EVENTS:
        stored = getattr(span, "_events", None)
        backing = getattr(stored, "_dq", stored)
        if isinstance(backing, deque | tuple | list):
            return backing  # type: ignore[return-value]
    return span.events


def with_attributes(span: ReadableSpan, extra: Mapping[str, AttributeValue]) -> ReadableSpan:
    """A plain copy of an ended span with ``extra`` attributes merged in (they win),
    everything else kept; its attributes, events and links are read, not copied twice."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes={**attributes_of(span), **extra},
        events=tuple(events_of(span)),
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def text(value: object) -> str | None:
    """``value`` when it is a string with something in it."""
    if isinstance(value, str) and value.strip():
        return value
    return None


def parse_json(value: str) -> object:
    """``json.loads``; a value nested past the interpreter's recursion limit (``[`` ten
    thousand times) is invalid JSON too: ``ValueError``, not ``RecursionError``."""
    try:
        return json.loads(value)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def load_json(value: object, where: str, issues: Issues) -> object | None:
    """``value`` parsed as JSON; ``None`` (noted in ``issues``) when it is not."""
    if not isinstance(value, str):
        issues.append(f"{where}: expected a JSON string, got {type(value).__name__}")
        return None
    try:
        parsed: object = parse_json(value)
    except ValueError:
        issues.append(f"{where}: not valid JSON")
        return None
    return parsed


def as_float(value: object) -> float | None:
    """A relevance score as a float; ``None`` for anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return None
        return None
    try:
        return float(value)
    except OverflowError:
        # An integer past a float's range (JSON has no bound): as far as a float goes, as
        # float() reads the same number written as a string.
        return math.inf if value > 0 else -math.inf


def as_id(value: object) -> str | None:
    """A document id as a string (vector stores use ints as often as strings)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:
            # Past Python's digit limit for int to str (over 4,300 digits): no usable id.
            return None
    return None


def indexed(attributes: Mapping[str, AttributeValue], prefix: str) -> dict[int, dict[str, object]]:
    """Flattened list attributes grouped by index, in index order.

    ``{"p.0.a": 1, "p.0.b": 2, "p.1.a": 3}`` with prefix ``"p."`` gives
    ``{0: {"a": 1, "b": 2}, 1: {"a": 3}}``. Keys whose index is not a number are
    left out: they are not part of the list.
    """
    groups: dict[int, dict[str, object]] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix) :].partition(".")
        position = list_index(index)
        if position is None or not rest:
            continue
        groups.setdefault(position, {})[rest] = value
    return dict(sorted(groups.items()))


def list_index(index: str) -> int | None:
    """A flattened list key's index as a number; ``None`` when it is not one.

    ASCII digits only: ``str.isdigit`` also accepts ``"²"``, which ``int`` cannot
    read, and thousands of digits are past what ``int`` converts (nor any list's
    length).
    """
    if index.isascii() and index.isdigit() and len(index) <= _MAX_INDEX_DIGITS:
        return int(index)
    return None


def role_of(message: Mapping[str, object]) -> str | None:
    """A message's role, from GenAI/OpenAI ``role`` or LangChain ``type``/class name."""
    role = message.get("role")
    if isinstance(role, str):
        return role.lower()
    kind = message.get("type")
    if isinstance(kind, str) and kind != "constructor":
        return {"human": "user", "ai": "assistant"}.get(kind, kind)
    class_path = message.get("id")
    if isinstance(class_path, list) and class_path and isinstance(class_path[-1], str):
        return _LANGCHAIN_ROLES.get(class_path[-1])
    return None


def message_text(message: Mapping[str, object]) -> str | None:
    """The text of one message in any of the shapes instrumentations write.

    GenAI ``parts: [{type: "text", content}]``; OpenAI ``content`` as a string or
    as ``[{type: "text", text}]``; LangChain ``{kwargs|data: {content}}``.
    """
    parts = message.get("parts")
    if isinstance(parts, list):
        return _join_parts(parts)
    content = message.get("content")
    if isinstance(content, str):
        return text(content)
    if isinstance(content, list):
        return _join_parts(content)
    for nested_key in ("kwargs", "data"):
        nested = message.get(nested_key)
        if isinstance(nested, Mapping):
            return message_text(nested)
    return None


def _join_parts(parts: Sequence[object]) -> str | None:
    # Text parts of one message are consecutive segments of the same text.
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and part.get("type", "text") == "text":
            value = part.get("content", part.get("text"))
            if isinstance(value, str):
                texts.append(value)
    return text("".join(texts))


def last_user_text(messages: object) -> str | None:
    """The latest user turn: what the answer answers in a multi-turn conversation."""
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and role_of(message) in _USER_ROLES:
            found = message_text(message)
            if found is not None:
                return found
    return None


def first_output_text(messages: object) -> str | None:
    """The first assistant message's text (the first choice when ``n > 1``)."""
    if not isinstance(messages, list):
        return None
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role = role_of(message)
        if role is None or role in _ASSISTANT_ROLES:
            found = message_text(message)
            if found is not None:
                return found
    return None


def context_from_mapping(item: Mapping[str, object]) -> Context | None:
    """A retrieved document from a ``{id, score, content}``-like object."""
    body: str | None = None
    for key in DOCUMENT_TEXT_KEYS:
        body = text(item.get(key))
        if body is not None:
            break
    if body is None:
        # LangChain's serialised Document keeps its fields under "kwargs".
        nested = item.get("kwargs")
        if isinstance(nested, Mapping):
            return context_from_mapping(nested)
        return None
    score = as_float(item.get("score"))
    return Context(text=body, id=as_id(item.get("id")), score=score)


# Where each convention names an LLM span's model; the response's name is the model that
# actually answered (a request for an alias gets a dated version).
_RESPONSE_MODEL_KEYS = (semconv.GEN_AI_RESPONSE_MODEL, semconv.TRACELOOP_LLM_RESPONSE_MODEL)
_REQUEST_MODEL_KEYS = (
    semconv.GEN_AI_REQUEST_MODEL,
    semconv.TRACELOOP_LLM_REQUEST_MODEL,
    semconv.OI_LLM_MODEL_NAME,
)


def generator_models(llm_spans: Sequence[ReadableSpan]) -> dict[str, str]:
    """``gen_ai.response.model`` / ``gen_ai.request.model`` of the LLM span that answered
    last, under the GenAI names whatever convention wrote them (the judge's family is
    checked against them)."""
    for span in sorted(llm_spans, key=lambda s: s.end_time or s.start_time or 0, reverse=True):
        attributes = attributes_of(span)
        found: dict[str, str] = {}
        for target, keys in (
            (semconv.GEN_AI_RESPONSE_MODEL, _RESPONSE_MODEL_KEYS),
            (semconv.GEN_AI_REQUEST_MODEL, _REQUEST_MODEL_KEYS),
        ):
            value = next((attributes[k] for k in keys if isinstance(attributes.get(k), str)), None)
            if isinstance(value, str) and value.strip():
                found[target] = value.strip()[:200]
        if found:
            return found
    return {}


def response_id(span: ReadableSpan | None) -> dict[str, str]:
    """``gen_ai.response.id`` of the LLM call ``span`` (the one that answered), if it has
    one: the evaluation's events name the completion they judge by it."""
    if span is None:
        return {}
    found = attributes_of(span).get(semconv.GEN_AI_RESPONSE_ID)
    if isinstance(found, str) and found.strip():
        return {semconv.GEN_AI_RESPONSE_ID: found.strip()[:256]}
    return {}


def attributes_bytes(attributes: Mapping[str, object] | None) -> int:
    """A cheap estimate of the bytes a mapping of attributes holds: its strings dominate."""
    if not attributes:
        return 0
    size = 0
    for key, value in attributes.items():
        # Strings are nearly every value and nearly all the bytes: take them first.
        size += len(key) + (len(value) if type(value) is str else value_bytes(value))
    return size


def value_bytes(value: object) -> int:
    """A cheap estimate of the bytes a plain value (strings, numbers, mappings, lists) holds."""
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, Mapping):
        return attributes_bytes(value)
    if isinstance(value, list | tuple):
        return sum(value_bytes(item) for item in value)
    return _NUMBER_BYTES
