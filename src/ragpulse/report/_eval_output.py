"""Reads ``ragpulse eval`` output lines, joined by id with the input records they scored."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragpulse.offline.evaluate import InputRecord, read_records
from ragpulse.report._model import (
    ReportClaim,
    ReportContext,
    ReportRequest,
    Run,
    SkippedLines,
    plural,
)

_CITATION_KEYS = ("citation_holds", "citation_supported", "citation_valid")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _claim(obj: Mapping[str, Any]) -> ReportClaim:
    evidence = obj.get("evidence")
    evidence = evidence if isinstance(evidence, dict) else {}
    cited_raw = obj.get("cited")
    cited = (
        tuple(i for i in cited_raw if _int(i) is not None) if isinstance(cited_raw, list) else ()
    )
    holds = next((obj[k] for k in _CITATION_KEYS if isinstance(obj.get(k), bool)), None)
    return ReportClaim(
        text=_str(obj.get("text")) or "",
        verdict=_str(obj.get("verdict")) or "UNKNOWN",
        answer_start=_int(obj.get("answer_start")),
        answer_end=_int(obj.get("answer_end")),
        context_index=_int(evidence.get("context_index")),
        start=_int(evidence.get("start")),
        end=_int(evidence.get("end")),
        evidence_text=_str(evidence.get("text")),
        cited=cited,
        citation_holds=holds,
        reason=_str(obj.get("reason")) or _str(obj.get("explanation")),
    )


def _scores(value: object) -> dict[str, float | None]:
    if not isinstance(value, dict):
        return {}
    scores: dict[str, float | None] = {}
    for metric, score in value.items():
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            scores[str(metric)] = float(score)
        elif score is None:
            scores[str(metric)] = None
    return scores


def _text_map(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, (str, int, float, bool))}


def request_from_line(obj: Mapping[str, Any], line: int) -> ReportRequest:
    """One output line as a request (question, answer and contexts when the line has them)."""
    raw_id = obj.get("id")
    claims = obj.get("claims")
    request = ReportRequest(
        id=str(line) if raw_id is None else str(raw_id),
        status=_str(obj.get("status")) or "unknown",
        scores=_scores(obj.get("scores")),
        labels=_text_map(obj.get("labels")),
        explanations=_text_map(obj.get("explanations")),
        claims=tuple(_claim(c) for c in claims if isinstance(c, dict))
        if isinstance(claims, list)
        else (),
        question=_str(obj.get("question")),
        answer=_str(obj.get("answer")),
        judge=_str(obj.get("judge")),
        error_type=_str(obj.get("error_type")),
        slices=_text_map(obj.get("slices")),
        abstained=_bool(obj.get("abstained")),
        answerable=_bool(obj.get("answerable")),
    )
    explanation = _str(obj.get("explanation"))
    if explanation:
        request.explanations.setdefault("evaluation", explanation)
    diagnosis, reason = _str(obj.get("diagnosis")), _str(obj.get("diagnosis_reason"))
    if diagnosis:
        request.slices.setdefault("diagnosis", diagnosis)
    if reason:
        request.explanations.setdefault("diagnosis", reason)
    conversation = obj.get("conversation_id")
    if isinstance(conversation, (str, int)) and not isinstance(conversation, bool):
        request.conversation_id = str(conversation)
    failed = obj.get("failed_tools")
    if isinstance(failed, list):
        request.failed_tools = tuple(t for t in failed if isinstance(t, str))
    contexts = obj.get("contexts", obj.get("context"))
    if isinstance(contexts, list):
        request.contexts = tuple(
            ReportContext(c) if isinstance(c, str) else ReportContext(_str(c.get("text")))
            for c in contexts
            if isinstance(c, (str, dict))
        )
    return request


def _join(request: ReportRequest, item: InputRecord) -> None:
    record = item.record
    if request.question is None:
        request.question = record.question
    if request.answer is None:
        request.answer = record.answer
    if request.contexts is None:
        request.contexts = tuple(ReportContext(c.text, c.id, c.tool) for c in record.contexts)
    if request.conversation_id is None:
        request.conversation_id = record.conversation_id
    if not request.failed_tools:
        request.failed_tools = record.failed_tools


def read_inputs(path: Path) -> dict[str, InputRecord]:
    """The valid records of a ``ragpulse eval`` input file, by id (read as ``ragpulse eval``
    reads it: line by line, on ``\\n`` only)."""
    with path.open("rb") as stream:
        return {item.id: item for item in read_records(stream) if isinstance(item, InputRecord)}


def load_eval_output(
    path: Path,
    lines: Iterable[tuple[int, str]],
    inputs: Mapping[str, InputRecord] | None,
    skipped: SkippedLines,
) -> Run:
    """A run from ``ragpulse eval`` output ``(number, line)`` pairs; ``inputs`` supply
    question, answer and contexts. Each line that is not a result goes into ``skipped``."""
    run = Run(name=path.name, source="eval", requests=[])
    for number, text in lines:
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            skipped.add(number, "not JSON")
            continue
        if not isinstance(obj, dict):
            skipped.add(number, "not a JSON object")
            continue
        request = request_from_line(obj, number)
        if inputs is not None and request.id in inputs:
            _join(request, inputs[request.id])
        run.requests.append(request)
    if inputs is None and any(r.contexts is None for r in run.requests):
        run.notes.append(
            "no --input given: questions, answers and contexts come only from the output lines"
        )
    elif inputs is not None:
        unmatched = sum(r.id not in inputs for r in run.requests)
        if unmatched:
            run.notes.append(
                f"{plural(unmatched, 'result')} {'has' if unmatched == 1 else 'have'} "
                "no input record with the same id"
            )
    return run
