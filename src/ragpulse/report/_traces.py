"""Reads evaluated requests from OTLP-JSON trace lines (``ragpulse-traces.jsonl``).

An evaluated span carries ``ragpulse.eval.*``; its question and answer are the
captured attributes on it, its contexts the documents of the retrieval spans
below it in the same trace, in the order they ended (the order ``@retrieval``
reports them into the record). A ``pending`` span takes the result its carrier
span brought later.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragpulse import semconv
from ragpulse.report._model import ReportClaim, ReportContext, ReportRequest, Run, SkippedLines

_SCORE = re.compile(re.escape(semconv.EVAL_PREFIX) + r"(\w+)\.score$")
_SLICE_PREFIX = f"{semconv.EVAL_PREFIX}slice."
DIAGNOSIS = "diagnosis"
"""The report's cut by diagnosis, and the key of its reason among a request's explanations."""
_OI_DOCUMENT = re.compile(
    re.escape(semconv.OI_RETRIEVAL_DOCUMENTS) + r"\.(\d+)\.document\.(content|id)$"
)


@dataclass(slots=True)
class _Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    end: int
    attributes: dict[str, Any]


def _value(value: Any) -> Any:
    # Any shape a file may hold is read or dropped here, never raised from.
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        text = value["stringValue"]
        return text if isinstance(text, str) else None
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError, OverflowError):
            return None
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])
        except (TypeError, ValueError, OverflowError):
            return None
    if "boolValue" in value:
        flag = value["boolValue"]
        return flag if isinstance(flag, bool) else None
    if "arrayValue" in value:
        return [_value(v) for v in _items(value["arrayValue"], "values")]
    return None


def _items(container: object, key: str) -> list[Any]:
    """``container[key]`` when it is a list of objects' worth; else nothing."""
    if not isinstance(container, dict):
        return []
    items = container.get(key)
    return items if isinstance(items, list) else []


def _spans(payload: dict[str, Any]) -> Iterable[_Span]:
    for resource in _items(payload, "resourceSpans"):
        for scope in _items(resource, "scopeSpans"):
            for span in _items(scope, "spans"):
                if not isinstance(span, dict):
                    continue
                attributes = {
                    a["key"]: _value(a.get("value"))
                    for a in _items(span, "attributes")
                    if isinstance(a, dict) and isinstance(a.get("key"), str)
                }
                try:
                    end = int(span.get("endTimeUnixNano", 0))
                except (TypeError, ValueError, OverflowError):
                    end = 0
                yield _Span(
                    str(span.get("traceId", "")),
                    str(span.get("spanId", "")),
                    str(span.get("parentSpanId", "")),
                    str(span.get("name", "")),
                    end,
                    attributes,
                )


def _documents(span: _Span) -> list[ReportContext]:
    raw = span.attributes.get(semconv.GEN_AI_RETRIEVAL_DOCUMENTS)
    if isinstance(raw, str):
        try:
            docs = json.loads(raw)
        except (ValueError, RecursionError):
            docs = None
        if isinstance(docs, list):
            return [
                ReportContext(
                    d.get("content") if isinstance(d.get("content"), str) else None,
                    None if d.get("id") is None else str(d.get("id")),
                )
                for d in docs
                if isinstance(d, dict)
            ]
    found: dict[int, dict[str, str]] = defaultdict(dict)
    for key, value in span.attributes.items():
        match = _OI_DOCUMENT.match(key)
        if match and value is not None:
            found[int(match.group(1))][match.group(2)] = str(value)
    return [ReportContext(found[i].get("content"), found[i].get("id")) for i in sorted(found)]


def _tool_result(span: _Span) -> ReportContext | None:
    """An evidence tool span's result as a context; ``None`` for an acting tool's, a failed
    one's, or a span that is no tool call."""
    attrs = span.attributes
    tool = attrs.get(semconv.GEN_AI_TOOL_NAME, attrs.get(semconv.OI_TOOL_NAME))
    is_tool = (
        attrs.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_EXECUTE_TOOL
        or attrs.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.OI_KIND_TOOL
    )
    if not is_tool or attrs.get(semconv.RAG_TOOL_EVIDENCE) is False:
        return None
    if attrs.get(semconv.RAG_TOOL_OUTCOME) not in (None, semconv.TOOL_OUTCOME_OK):
        return None
    result = attrs.get(semconv.GEN_AI_TOOL_CALL_RESULT, attrs.get(semconv.OI_OUTPUT_VALUE))
    call_id = attrs.get(semconv.GEN_AI_TOOL_CALL_ID)
    return ReportContext(
        result if isinstance(result, str) else None,
        None if call_id is None else str(call_id),
        str(tool) if tool is not None else "tool",
    )


def _is_retrieval(span: _Span) -> bool:
    attrs = span.attributes
    return (
        attrs.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_RETRIEVAL
        or attrs.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.OI_KIND_RETRIEVER
    )


def _is_carrier(span: _Span) -> bool:
    return semconv.EVAL_TARGET_SPAN_ID in span.attributes


def _contexts(unit: _Span, trace: list[_Span]) -> tuple[ReportContext, ...]:
    children: dict[str, list[_Span]] = defaultdict(list)
    for span in trace:
        children[span.parent_id].append(span)
    below: list[_Span] = []
    # A span may name itself, or a descendant, as its parent: each span is visited once,
    # so any cycle of parents ends.
    seen = {id(unit)}
    stack = list(children.get(unit.span_id, []))
    while stack:
        span = stack.pop()
        if id(span) in seen:
            continue
        seen.add(id(span))
        below.append(span)
        stack.extend(children.get(span.span_id, []))
    contexts: list[ReportContext] = []
    # Retrieved passages and evidence tools' results, in the order they were reported.
    for span in sorted(below, key=lambda s: s.end):
        if _is_retrieval(span):
            contexts.extend(_documents(span))
        else:
            result = _tool_result(span)
            if result is not None:
                contexts.append(result)
    return tuple(contexts)


def _locate(claims: list[dict[str, Any]], answer: str | None) -> list[ReportClaim]:
    # The span's claims JSON has no answer offsets; claims are answer substrings in order.
    located: list[ReportClaim] = []
    cursor = 0
    for item in claims:
        raw_text = item.get("text")
        text = raw_text if isinstance(raw_text, str) else ""
        start: int | None = None
        if answer and text:
            found = answer.find(text, cursor)
            if found < 0:
                found = answer.find(text)
            if found >= 0:
                start = found
                cursor = found + len(text)

        def number(key: str, item: dict[str, Any] = item) -> int | None:
            value = item.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        cited = item.get("cited")
        holds = item.get("citation_holds")
        located.append(
            ReportClaim(
                text=text,
                verdict=str(item.get("verdict") or "UNKNOWN"),
                answer_start=start,
                answer_end=None if start is None else start + len(text),
                context_index=number("context_index"),
                start=number("start"),
                end=number("end"),
                evidence_text=item.get("evidence_text")
                if isinstance(item.get("evidence_text"), str)
                else None,
                cited=tuple(i for i in cited if isinstance(i, int))
                if isinstance(cited, list)
                else (),
                citation_holds=holds if isinstance(holds, bool) else None,
                reason=item.get("reason") if isinstance(item.get("reason"), str) else None,
            )
        )
    return located


def _request(unit: _Span, result: dict[str, Any], trace: list[_Span]) -> ReportRequest:
    attrs = unit.attributes
    scores: dict[str, float | None] = {}
    labels: dict[str, str] = {}
    explanations: dict[str, str] = {}
    slices: dict[str, str] = {}
    for key, value in result.items():
        match = _SCORE.match(key)
        if match and isinstance(value, (int, float)):
            metric = match.group(1)
            scores[metric] = float(value)
            label = result.get(semconv.eval_label(metric))
            if isinstance(label, str):
                labels[metric] = label
        elif key.startswith(_SLICE_PREFIX) and value is not None:
            slices[key[len(_SLICE_PREFIX) :]] = str(value).lower()
    # The diagnosis is a cut of its own (whose fault), its reason shown with the request.
    diagnosis = result.get(semconv.EVAL_DIAGNOSIS)
    if isinstance(diagnosis, str) and diagnosis:
        slices[DIAGNOSIS] = diagnosis
    reason = result.get(semconv.EVAL_DIAGNOSIS_EXPLANATION)
    if isinstance(reason, str) and reason:
        explanations[DIAGNOSIS] = reason
    for key, value in result.items():
        if key == semconv.EVAL_DIAGNOSIS_EXPLANATION:
            continue
        if key.startswith(semconv.EVAL_PREFIX) and key.endswith(".explanation"):
            metric = key[len(semconv.EVAL_PREFIX) : -len(".explanation")]
            if isinstance(value, str) and value:
                explanations[metric] = value
                scores.setdefault(metric, None)
    question = attrs.get(semconv.RAG_QUESTION, attrs.get(semconv.OI_INPUT_VALUE))
    answer = attrs.get(semconv.RAG_ANSWER, attrs.get(semconv.OI_OUTPUT_VALUE))
    answer = answer if isinstance(answer, str) else None
    try:
        claims_json = json.loads(result.get(semconv.EVAL_CLAIMS) or "[]")
    except (TypeError, ValueError, RecursionError):
        claims_json = []
    if not isinstance(claims_json, list):
        claims_json = []
    claims = [c for c in claims_json if isinstance(c, dict) and "text" in c]
    name = attrs.get(semconv.RAG_NAME) or unit.name
    slices.setdefault("rag", str(name))
    status = result.get(semconv.EVAL_STATUS)
    judge = _judge_shown(result, slices)
    error_type = result.get(semconv.EVAL_ERROR_TYPE)
    abstained = result.get(semconv.EVAL_ABSTAINED)
    answerable = result.get(semconv.EVAL_ANSWERABLE)
    conversation = attrs.get(semconv.GEN_AI_CONVERSATION_ID, attrs.get(semconv.OI_SESSION_ID))
    failed = attrs.get(semconv.RAG_TOOLS_FAILED)
    return ReportRequest(
        id=f"{unit.trace_id}/{unit.span_id}",
        status=status if isinstance(status, str) else "unknown",
        scores=scores,
        labels=labels,
        explanations=explanations,
        claims=tuple(_locate(claims, answer)),
        question=question if isinstance(question, str) else None,
        answer=answer,
        contexts=_contexts(unit, trace),
        judge=judge if isinstance(judge, str) else None,
        error_type=error_type if isinstance(error_type, str) else None,
        slices=slices,
        abstained=abstained if isinstance(abstained, bool) else None,
        answerable=answerable if isinstance(answerable, bool) else None,
        conversation_id=None if conversation is None else str(conversation),
        failed_tools=tuple(t for t in failed if isinstance(t, str))
        if isinstance(failed, list)
        else (),
    )


def json_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """The JSON object on one line, or why the line holds none."""
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not JSON"
    if not isinstance(payload, dict):
        return None, "not a JSON object"
    return payload, ""


def _payload(text: str) -> tuple[dict[str, Any] | None, str]:
    """The export request on one line, or why the line cannot be one."""
    payload, reason = json_object(text)
    if payload is None:
        return None, reason
    if not isinstance(payload.get("resourceSpans"), list):
        return None, "not an OTLP trace export (resourceSpans is not a list)"
    return payload, ""


def load_traces(path: Path, lines: Iterable[tuple[int, str]], skipped: SkippedLines) -> Run:
    """The evaluated spans of OTLP-JSON ``(number, line)`` pairs, as requests in the order
    they ended; each line that is not an export request goes into ``skipped``."""
    traces: dict[str, list[_Span]] = defaultdict(list)
    for number, text in lines:
        if not text.strip():
            continue
        payload, reason = _payload(text)
        if payload is None:
            skipped.add(number, reason)
            continue
        for span in _spans(payload):
            traces[span.trace_id].append(span)
    units: list[tuple[_Span, dict[str, Any], list[_Span]]] = []
    for trace in traces.values():
        late = {
            str(s.attributes[semconv.EVAL_TARGET_SPAN_ID]): s.attributes
            for s in trace
            if _is_carrier(s)
        }
        for span in trace:
            if semconv.EVAL_STATUS in span.attributes and not _is_carrier(span):
                result = dict(span.attributes)
                if span.span_id in late:
                    result.update(late[span.span_id])
                units.append((span, result, trace))
    units.sort(key=lambda u: u[0].end)
    run = Run(name=path.name, source="traces", requests=[])
    run.requests.extend(_request(unit, result, trace) for unit, result, trace in units)
    return run


def _judge_shown(result: Mapping[str, object], slices: dict[str, str]) -> str | None:
    """The judge as the page shows it: its name, its model, and a same-family warning (also
    a slice, so the requests a same-family judge scored can be cut out)."""
    judge = result.get(semconv.EVAL_JUDGE)
    if not isinstance(judge, str):
        return None
    model = result.get(semconv.EVAL_JUDGE_MODEL)
    shown = f"{judge} (model {model})" if isinstance(model, str) and model else judge
    same = result.get(semconv.EVAL_JUDGE_SAME_FAMILY)
    if isinstance(same, bool):
        slices.setdefault("judge_family", "same as generator" if same else "other")
        if same:
            shown += " · same family as the generator: scores may be inflated"
    return shown
