"""Tool results as evidence: which tools fetch it, and what one call returned.

An agent's retriever is a tool the model calls. Its result reaches a trace in two
places, and ragpulse reads both:

- a span of the call itself: an OpenInference ``TOOL`` span (``tool.name``,
  ``output.value``), a GenAI ``execute_tool`` span (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.result``), an MCP ``tools/call`` span
  (``mcp.method.name``, the same GenAI tool attributes), an OpenLLMetry tool task
  (``traceloop.span.kind = tool``, ``traceloop.entity.output``);
- the message that hands the result back to the model, in the next LLM span's input
  (``_messages``).

``ToolPolicy`` says which tools fetch evidence (``evidence_tools`` globs, default every
tool) and which act (``action_tools``: a calculator, a booking; never evidence).
``result_passages`` turns one raw result into passages within a byte bound: a JSON
list of documents gives one passage each, an MCP ``CallToolResult`` its text parts,
anything else its text; it also tells an error result (MCP ``isError``, a lone
``error`` object) and an empty one apart. Nothing here raises.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.trace import StatusCode

from ragpulse import semconv
from ragpulse.adapters._common import (
    DOCUMENT_TEXT_KEYS,
    Attributes,
    Issues,
    as_id,
    attributes_of,
    parse_json,
    text,
)
from ragpulse.adapters._conventions import is_kind
from ragpulse.capture._content import DEFAULT_MAX_DOCUMENTS_BYTES

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "MAX_RESULT_CHARS",
    "ToolPolicy",
    "ToolResult",
    "is_tool",
    "result_passages",
    "tool_result",
]

MAX_RESULT_CHARS = DEFAULT_MAX_DOCUMENTS_BYTES
"""Characters of one tool result read, as a span's retrieved documents are bounded at
capture: past it the result is cut (and noted), and not parsed as JSON."""
# Passages one structured result may give (a search tool returning a list of hits).
_MAX_RESULT_PASSAGES = 64
_EMPTY_RESULTS = frozenset({"", "[]", "{}", "null", '""'})


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """Which tools' results are evidence: names matching ``evidence`` and no ``action`` glob.

    The default takes every tool as evidence: a tool an agent calls before answering is
    usually how it looks something up. Name the tools that act instead (``action=("book_*",
    "calculator")``) so their results are neither judged against nor counted as failed.
    A tool span that says it is not evidence (``ragpulse.tool.evidence = false``, written by
    ``@ragpulse.tool(evidence=False)``) is an action whatever its name.
    """

    evidence: tuple[str, ...] = ("*",)
    action: tuple[str, ...] = ()

    def is_evidence(self, name: str | None) -> bool:
        """Whether results of the tool ``name`` (``None``: unnamed) are evidence."""
        shown = name or ""
        if any(fnmatch.fnmatchcase(shown, pattern) for pattern in self.action):
            return False
        return any(fnmatch.fnmatchcase(shown, pattern) for pattern in self.evidence)


DEFAULT_POLICY = ToolPolicy()


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool call's outcome as a trace reports it."""

    name: str | None
    call_id: str | None
    passages: tuple[str, ...]
    """What it returned, as evidence text (empty: nothing, or not reported)."""
    failed: bool = False
    """An error status, an error result, or an empty result."""
    reported: bool = True
    """Whether the result itself is in the trace (a span without its result, content
    capture off, says only that the call happened)."""
    declared: bool | None = None
    """What the span itself says of the tool (``ragpulse.tool.evidence``); ``None``: by policy."""


def is_tool(attributes: Attributes) -> bool:
    """A span of one tool call, in any convention."""
    return is_kind("tool", attributes)


def tool_result(span: ReadableSpan, issues: Issues) -> ToolResult:
    """What the tool span ``span`` (``is_tool``) says of its call."""
    attributes = attributes_of(span)
    name = _first_text(
        attributes,
        semconv.GEN_AI_TOOL_NAME,
        semconv.OI_TOOL_NAME,
        semconv.TRACELOOP_ENTITY_NAME,
    )
    call_id = as_id(attributes.get(semconv.GEN_AI_TOOL_CALL_ID)) or as_id(
        attributes.get(semconv.OI_TOOL_CALL_ID)
    )
    if call_id is None and attributes.get(semconv.MCP_METHOD_NAME) == semconv.MCP_METHOD_TOOLS_CALL:
        call_id = as_id(attributes.get(semconv.JSONRPC_REQUEST_ID))
    raw: object = None
    for key in (
        semconv.GEN_AI_TOOL_CALL_RESULT,
        semconv.OI_OUTPUT_VALUE,
        semconv.TRACELOOP_ENTITY_OUTPUT,
    ):
        raw = attributes.get(key)
        if raw is not None:
            break
    status = getattr(span, "status", None)
    errored = bool(
        (status is not None and status.status_code is StatusCode.ERROR)
        or attributes.get(semconv.ERROR_TYPE)
    )
    declared = attributes.get(semconv.RAG_TOOL_EVIDENCE)
    declared_flag = declared if isinstance(declared, bool) else None
    if raw is None:
        return ToolResult(name, call_id, (), errored, reported=False, declared=declared_flag)
    passages, failed = result_passages(raw, f"tool {name or '?'}", issues)
    return ToolResult(name, call_id, passages, errored or failed, declared=declared_flag)


def result_passages(raw: object, where: str, issues: Issues) -> tuple[tuple[str, ...], bool]:
    """The passages of one raw tool result, and whether it failed (an error or nothing)."""
    if isinstance(raw, Sequence) and not isinstance(raw, str | bytes):
        # An array attribute: one passage per string in it.
        found = tuple(t for item in raw[:_MAX_RESULT_PASSAGES] if (t := text(item)) is not None)
        return found, not found
    if not isinstance(raw, str):
        issues.append(f"{where}: unexpected result type {type(raw).__name__}")
        return (), False
    if len(raw) > MAX_RESULT_CHARS:
        # Too long to parse at the request's expense: read as text, cut like a document.
        issues.append(f"{where}: result over {MAX_RESULT_CHARS} characters, cut")
        return (raw[:MAX_RESULT_CHARS],), False
    stripped = raw.strip()
    if stripped in _EMPTY_RESULTS:
        return (), True
    if stripped[:1] not in ("{", "[", '"'):
        return (raw,), False
    try:
        parsed: object = parse_json(stripped)
    except ValueError:
        return (raw,), False
    return _parsed_passages(parsed, raw)


def _parsed_passages(parsed: object, raw: str) -> tuple[tuple[str, ...], bool]:
    if isinstance(parsed, str):
        found = text(parsed)
        return ((found,), False) if found is not None else ((), True)
    if parsed is None or parsed == [] or parsed == {}:
        return (), True
    if isinstance(parsed, Mapping):
        if parsed.get("isError") is True:
            # MCP's CallToolResult: the tool ran and failed.
            return (), True
        content = parsed.get("content")
        if isinstance(content, list) and "isError" in parsed:
            parts = _text_parts(content)
            return parts, not parts
        if set(parsed) == {"error"} or (parsed.get("error") and not _document_text(parsed)):
            return (), True
        body = _document_text(parsed)
        if body is not None and len(parsed) <= 4:
            return (body,), False
        # A structured record (a product, an order): the JSON itself is the evidence.
        return (raw,), False
    if isinstance(parsed, list):
        documents = [
            body
            for item in parsed[:_MAX_RESULT_PASSAGES]
            if isinstance(item, Mapping) and (body := _document_text(item)) is not None
        ]
        if documents and len(documents) == min(len(parsed), _MAX_RESULT_PASSAGES):
            return tuple(documents), False
        strings = [t for item in parsed[:_MAX_RESULT_PASSAGES] if (t := text(item)) is not None]
        if strings and len(strings) == min(len(parsed), _MAX_RESULT_PASSAGES):
            return tuple(strings), False
    return (raw,), False


def _text_parts(parts: list[object]) -> tuple[str, ...]:
    found: list[str] = []
    for part in parts[:_MAX_RESULT_PASSAGES]:
        if isinstance(part, Mapping) and part.get("type", "text") == "text":
            body = text(part.get("text"))
            if body is not None:
                found.append(body)
    return tuple(found)


def _document_text(item: Mapping[str, object]) -> str | None:
    for key in DOCUMENT_TEXT_KEYS:
        body = text(item.get(key))
        if body is not None:
            return body
    return None


def _first_text(attributes: Attributes, *keys: str) -> str | None:
    for key in keys:
        found = text(attributes.get(key))
        if found is not None:
            return found
    return None
