"""What crosses between the application and a judge's process: plain tuples, not objects.

A record goes to the judge's process as one tuple of builtins (a passage as its
text, or ``(text, id, score, tool)`` where it has an id, a score or a tool), with what an
earlier judge found contradicting its claims (``Contradiction``: five offsets each, for a
cascade's escalation judge to read first); an evaluation comes
back as one tuple of builtins too. When the application's sink asked for them
(``ragpulse.signals.make``), the judge's process also makes the evaluation's signals,
under the content policy, and sends those instead of its claims: the claims,
evidence and explanations then never cross. Pickling tuples, strings and dicts
runs in C; pickling the frozen dataclasses they replace called a Python function
per object, on the application's worker thread, holding the GIL its requests need.

Messages to the judge's process: the judge object (once), then ``settings`` (how
to make signals: the sink's spec, the content policy and the credentials to scrub)
whenever they change, and ``batch`` messages of ``evaluate`` records, one message a
batch so that records started together cost one write and one wake-up each way. Each
``evaluate`` is answered, in a batch's ``answers``, with one ``thin`` evaluation (no
claims or parts, or signals made from them) or a ``rich`` one (an ``Evaluation``
whose claims the application still needs).
Whatever cannot be decoded raises ``WireError``: the caller records it as an
evaluation with status ``error``, never as an exception.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import (
    Context,
    Contexts,
    Evaluation,
    MetricResult,
    RagRecord,
    Usage,
)
from ragpulse.judges.base import Contradiction
from ragpulse.metrics._contexts import DocumentRow
from ragpulse.signals.emit import Signals
from ragpulse.signals.make import PreparedEvaluation

__all__ = [
    "ANSWERS",
    "BATCH",
    "EVALUATE",
    "RICH",
    "SETTINGS",
    "THIN",
    "WireError",
    "decode_evaluation",
    "decode_record",
    "encode_evaluation",
    "encode_record",
    "is_thin",
]

EVALUATE = "evaluate"
SETTINGS = "settings"
BATCH = "batch"
"""``(BATCH, (evaluate, ...), bound)``: records the judge's process evaluates in order, and the
seconds (or None) after which the application ends the process if the batch is not answered."""
ANSWERS = "answers"
"""``(ANSWERS, (evaluation, ...))``: a batch's evaluations, in the order of its records."""
THIN = "thin"
RICH = "rich"

Message = tuple[Any, ...]


class WireError(ValueError):
    """A message that is not what this side of the pipe expects."""


# --- records, to the judge's process -------------------------------------------------------


def encode_record(
    record: RagRecord,
    metrics: Collection[str],
    *,
    signals: bool,
    contradicting: Sequence[Contradiction] = (),
) -> Message:
    """``record`` as the judge needs it (no span context), ``metrics``, whether to make
    the evaluation's signals, and what an earlier judge found contradicting its claims."""
    contexts = record.contexts
    stored = contexts.stored() if isinstance(contexts, Contexts) else tuple(contexts)
    passages = tuple(item if type(item) is str else _encode_passage(item) for item in stored)  # type: ignore[arg-type]
    return (
        EVALUATE,
        record.question,
        passages,
        record.answer,
        record.reference,
        record.name,
        dict(record.attributes),
        tuple(record.rubric),
        tuple(metrics),
        signals,
        record.conversation_id,
        tuple(record.failed_tools),
        tuple((c.claim_start, c.claim_end, c.context_index, c.start, c.end) for c in contradicting),
    )


def _encode_passage(item: Context) -> str | tuple[str, str | None, float | None, str | None]:
    if item.id is None and item.score is None and item.tool is None:
        return item.text
    return (item.text, item.id, item.score, item.tool)


def decode_record(
    message: Message,
) -> tuple[RagRecord, tuple[str, ...], bool, tuple[Contradiction, ...]]:
    """The record, the metrics, whether to make signals and the contradictions, of an
    ``encode_record`` message."""
    try:
        (
            kind,
            question,
            passages,
            answer,
            reference,
            name,
            attributes,
            rubric,
            metrics,
            signals,
            conversation,
            failed_tools,
            contradicting,
        ) = message
        if kind != EVALUATE:
            raise WireError(f"expected {EVALUATE!r}, got {kind!r}")
        record = RagRecord(
            question=_text(question),
            contexts=Contexts(_passage(item) for item in passages),
            answer=_text(answer),
            reference=_text(reference),
            name=_text(name),
            attributes=_mapping(attributes),
            rubric=tuple(_str(point) for point in rubric),
            conversation_id=_text(conversation),
            failed_tools=tuple(_str(tool) for tool in failed_tools),
        )
        found = tuple(_contradiction(item) for item in contradicting)
        return record, tuple(_str(metric) for metric in metrics), bool(signals), found
    except WireError:
        raise
    except (TypeError, ValueError) as exc:
        raise WireError(f"not a record: {exc}") from None


def _passage(item: object) -> Context | str:
    if type(item) is str:
        return item
    if isinstance(item, tuple) and len(item) == 4:
        text, id_, score, tool = item
        return Context(
            _str(text),
            _text(id_),
            None if score is None else float(_number(score)),
            _text(tool),
        )
    raise WireError(f"not a passage: {type(item).__name__}")


def _contradiction(item: object) -> Contradiction:
    if (
        type(item) is not tuple
        or len(item) != 5
        or any(type(offset) is not int or offset < 0 for offset in item)
    ):
        raise WireError("a contradiction is not five offsets")
    return Contradiction(*item)


# --- evaluations, back to the application --------------------------------------------------


def is_thin(evaluation: Evaluation) -> bool:
    """True when the evaluation has no claims or parts: a ``thin`` message carries it whole."""
    return not (
        evaluation.claims
        or evaluation.reference_claims
        or evaluation.question_parts
        or evaluation.required_points
        or evaluation.contexts
        or evaluation.reference_support
    )


def encode_evaluation(evaluation: Evaluation, signals: Signals | None = None) -> Message:
    """``evaluation`` without its claims and parts, and ``signals`` made from it (if any).

    Without signals, send only an evaluation ``is_thin`` says is whole, or ``(RICH,
    evaluation)`` for one the application must write itself.
    """
    usage = evaluation.usage
    fields = (
        evaluation.status.value,
        tuple(
            (name, result.score, result.explanation, result.status.value)
            for name, result in evaluation.metrics.items()
        ),
        evaluation.judge,
        evaluation.annotator_kind,
        (usage.calls, usage.prompt_tokens, usage.completion_tokens),
        evaluation.duration_ms,
        evaluation.error_type,
        evaluation.explanation,
        evaluation.retry_after,
        evaluation.disagreement,
        evaluation.abstained,
        evaluation.answerable,
        dict(evaluation.slices),
        evaluation.escalated,
        evaluation.diagnosis,
        evaluation.diagnosis_reason,
        evaluation.judge_model,
        evaluation.same_family,
    )
    made = None
    if signals is not None:
        made = (
            signals.span,
            signals.outcome,
            signals.points,
            signals.events,
            signals.duration_ms,
            signals.spec,
            signals.documents,
            signals.labels,
        )
    return (THIN, fields, made)


def decode_evaluation(message: object) -> Evaluation:
    """The ``Evaluation`` of a judge's answer; a ``PreparedEvaluation`` when it has signals."""
    if not isinstance(message, tuple) or not message:
        raise WireError(f"not an evaluation message: {type(message).__name__}")
    if message[0] == RICH and len(message) == 2:
        if not isinstance(message[1], Evaluation):
            raise WireError(f"not an evaluation: {type(message[1]).__name__}")
        return message[1]
    try:
        kind, fields, made = message
        if kind != THIN:
            raise WireError(f"unknown message kind {kind!r}")
        (
            status,
            metrics,
            judge,
            annotator_kind,
            (calls, prompt_tokens, completion_tokens),
            duration_ms,
            error_type,
            explanation,
            retry_after,
            disagreement,
            abstained,
            answerable,
            slices,
            escalated,
            diagnosis,
            diagnosis_reason,
            judge_model,
            same_family,
        ) = fields
        values: dict[str, Any] = {
            "status": _STATUSES[status],
            "metrics": {
                _str(name): MetricResult(name, _score(score), _text(text), _STATUSES[metric_status])
                for name, score, text, metric_status in metrics
            },
            "judge": _str(judge),
            "annotator_kind": "LLM" if annotator_kind == "LLM" else "CODE",
            "usage": Usage(int(calls), int(prompt_tokens), int(completion_tokens)),
            "duration_ms": float(_number(duration_ms)),
            "error_type": _text(error_type),
            "explanation": _text(explanation),
            "retry_after": _score(retry_after),
            "disagreement": _flag(disagreement),
            "abstained": _flag(abstained),
            "answerable": _flag(answerable),
            "slices": _texts(slices),
            "escalated": _flag(escalated),
            "diagnosis": _text(diagnosis),
            "diagnosis_reason": _text(diagnosis_reason),
            "judge_model": _text(judge_model),
            "same_family": _flag(same_family),
        }
        if made is None:
            return Evaluation(**values)
        span, outcome, points, events, signals_duration, spec, documents, labels = made
        if type(points) is not tuple or type(events) is not tuple or type(labels) is not tuple:
            raise WireError("signals' points, events and labels are not tuples")
        if any(type(attributes) is not dict for attributes in labels):
            raise WireError("a label point is not a dict")
        for value, attributes in points:
            if type(value) is not float or type(attributes) is not dict:
                raise WireError("a score point is not (float, dict)")
        for severity, attributes in events:
            if type(severity) is not int or type(attributes) is not dict:
                raise WireError("an event is not (int, dict)")
        signals = Signals(
            _mapping(span),
            _mapping(outcome),
            points,
            events,
            float(_number(signals_duration)),
            int(spec),
            _documents(documents),
            labels,
        )
        return PreparedEvaluation(**values, signals=signals)
    except WireError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise WireError(f"not an evaluation: {exc!r}") from None


_STATUSES = {status.value: status for status in EvalStatus}


def _str(value: object) -> str:
    if type(value) is not str:
        raise WireError(f"expected a str, got {type(value).__name__}")
    return value


def _text(value: object) -> str | None:
    return None if value is None else _str(value)


def _number(value: object) -> float | int:
    if type(value) not in (float, int):
        raise WireError(f"expected a number, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def _flag(value: object) -> bool | None:
    if value is not None and type(value) is not bool:
        raise WireError(f"expected a bool, got {type(value).__name__}")
    return value


def _score(value: object) -> float | None:
    return None if value is None else float(_number(value))


def _texts(value: object) -> dict[str, str]:
    texts = _mapping(value)
    for key, text in texts.items():
        if type(key) is not str or type(text) is not str:
            raise WireError("expected a dict of str")
    return texts


def _documents(value: object) -> tuple[DocumentRow, ...]:
    """Per-passage rows: numbers and flags only, so no text can ride along."""
    if type(value) is not tuple:
        raise WireError(f"expected a tuple of documents, got {type(value).__name__}")
    for row in value:
        if (
            type(row) is not tuple
            or len(row) != 4
            or type(row[0]) is not int
            or (row[1] is not None and type(row[1]) is not float)
            or (row[2] is not None and type(row[2]) is not bool)
            or type(row[3]) is not bool
        ):
            raise WireError("a document is not (int, float | None, bool | None, bool)")
    return value


def _mapping(value: object) -> dict[str, Any]:
    if type(value) is not dict:
        raise WireError(f"expected a dict, got {type(value).__name__}")
    return value
