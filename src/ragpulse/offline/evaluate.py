"""Offline evaluation (``ragpulse eval``): JSONL records in, one JSONL result per record out.

This is the engine behind ``ragpulse eval``; the CLI only parses arguments and
prints. Input lines hold ``id``, ``question``, ``contexts`` (``context`` is accepted
as an alias), ``answer``, an optional ``reference``, an optional ``rubric`` (a list
of required points, for completeness) and an optional ``conversation_id``. An agent's
line may carry ``messages`` (OpenAI chat format, tool calls and results included)
instead of ``contexts``: ``ragpulse.offline.messages`` reads its question, answer and tool
results; one with no evidence at all is ``skipped`` with ``error_type`` ``no_evidence``.
Every non-blank input line gets exactly one
output line, in input order, with the keys ``id``, ``status``, ``scores`` (every
metric of the vector, null when undefined or not asked), ``explanations`` (the judge's
words per metric), ``slices``, ``abstained``, ``answerable``, ``claims`` (each with the
contexts its ``[N]`` markers cite, 0-based, and whether the citation holds), ``judge``,
``error_type`` and ``error``; a line that cannot
be read is an ``error`` row with ``error_type`` ``invalid_input`` (its ``id``, or its
line number when it has none). Input is read line by line, each line bounded in
bytes, so one hostile line costs its bound and no more.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from ragpulse import semconv
from ragpulse.capture._roles import EvidenceRule
from ragpulse.errors import NO_EVIDENCE
from ragpulse.evaluation.types import (
    COMPLETENESS,
    ClaimVerdict,
    Context,
    EvalStatus,
    Evaluation,
    RagRecord,
)
from ragpulse.judges.base import Judge, call_judge
from ragpulse.metrics import ALL_METRICS, METRICS
from ragpulse.metrics import _registry as registry
from ragpulse.offline.messages import read_messages
from ragpulse.signals.emit import label_for

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "INVALID_INPUT",
    "BadLine",
    "BatchSummary",
    "ErrorAllowance",
    "InputRecord",
    "MetricPlan",
    "MetricSummary",
    "bad_line_to_json",
    "evaluate_records",
    "evaluate_stream",
    "evaluation_to_json",
    "missing_input",
    "numbered_lines",
    "parse_fail_under",
    "parse_max_errors",
    "read_records",
    "record_from_json",
    "result_to_json",
    "summarize",
]

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest input line read (bytes); a longer line is an ``invalid_input`` row."""
INVALID_INPUT = "invalid_input"
_READ_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One valid input line."""

    line: int
    id: str
    record: RagRecord
    skip: str | None = None
    """Why the record is not evaluated (``no_evidence``: an agent's answer with no evidence);
    ``None``: it is."""
    why: str | None = None
    """``skip`` in words, when the reader says more than the reason's usual words."""


@dataclass(frozen=True, slots=True)
class BadLine:
    """An input line that could not be read, and why (its ``id``, else its line number)."""

    line: int
    reason: str
    id: str = ""

    @property
    def record_id(self) -> str:
        """The id its output row carries."""
        return self.id or str(self.line)


def _check_text(value: str, key: str) -> str:
    # A lone surrogate (a JSON "\ud800" escape) decodes to a str that UTF-8 cannot
    # encode: refuse it here, with its key, rather than fail later while writing.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"'{key}' holds an unpaired surrogate ({value[exc.start]!r}) that is not text"
        ) from None
    return value


def _text_list(value: object, key: str) -> tuple[Context, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (Context(_check_text(value, key)),)
    if not isinstance(value, list):
        raise ValueError(f"'{key}' must be a list of strings")
    contexts = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            contexts.append(Context(_check_text(item, f"{key}[{i}]")))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            item_id = item.get("id")
            contexts.append(
                Context(
                    _check_text(item["text"], f"{key}[{i}].text"),
                    None if item_id is None else _check_text(str(item_id), f"{key}[{i}].id"),
                )
            )
        else:
            raise ValueError(f"'{key}[{i}]' must be a string")
    return tuple(contexts)


# Required points read from one record's rubric; more is an invalid line.
MAX_RUBRIC_POINTS = 64


def _rubric(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValueError("'rubric' must be a list of strings or null")
    if len(value) > MAX_RUBRIC_POINTS:
        raise ValueError(f"'rubric' has more than {MAX_RUBRIC_POINTS} points")
    return tuple(_check_text(p, f"rubric[{i}]") for i, p in enumerate(value) if p.strip())


def _optional_text(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return _check_text(value, key)
    raise ValueError(f"'{key}' must be a string or null")


def _record_id(obj: object) -> str:
    """The line's own id, when it has a usable one."""
    if isinstance(obj, dict):
        raw = obj.get("id")
        if isinstance(raw, (str, int)) and not isinstance(raw, bool):
            text = str(raw)
            try:
                return _check_text(text, "id")
            except ValueError:
                return ""
    return ""


def _conversation_id(obj: dict[str, Any]) -> str | None:
    value = obj.get("conversation_id")
    if value is None:
        return None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return _check_text(str(value), "conversation_id")
    raise ValueError("'conversation_id' must be a string, a number or null")


def record_from_json(obj: object, line: int, roles: EvidenceRule | None = None) -> InputRecord:
    """Validate one decoded input line; raises ``ValueError`` saying what is wrong.

    A line with ``messages`` (an agent's chat history) is read by ``read_messages``:
    ``roles`` say which tools' results are evidence (by default, every tool's).
    """
    if not isinstance(obj, dict):
        raise ValueError("a line must be a JSON object")
    if "messages" in obj:
        return _record_from_messages(obj, line, roles)
    if "answer" not in obj:
        raise ValueError("missing 'answer'")
    if "contexts" in obj:
        contexts = _text_list(obj["contexts"], "contexts")
    elif "context" in obj:
        contexts = _text_list(obj["context"], "context")
    else:
        raise ValueError("missing 'contexts' (or 'context', or 'messages')")
    record = RagRecord(
        question=_optional_text(obj, "question"),
        contexts=contexts,
        answer=_optional_text(obj, "answer"),
        reference=_optional_text(obj, "reference"),
        rubric=_rubric(obj.get("rubric")),
        # The model that wrote the answer: a judge of its family is marked same-family.
        attributes=_generator_attributes(obj),
        conversation_id=_conversation_id(obj),
    )
    return InputRecord(line, _own_id(obj, line), record)


def _generator_attributes(obj: dict[str, Any]) -> dict[str, object]:
    """The model that wrote the answer (``generator_model``), where the line names one."""
    generator = _optional_text(obj, "generator_model")
    return {semconv.GEN_AI_RESPONSE_MODEL: generator} if generator else {}


def _own_id(obj: dict[str, Any], line: int) -> str:
    raw_id = obj.get("id")
    return str(line) if raw_id is None else _check_text(str(raw_id), "id")


def _record_from_messages(
    obj: dict[str, Any], line: int, roles: EvidenceRule | None
) -> InputRecord:
    """An agent's turn: question, answer and evidence read from its chat ``messages``."""
    given = obj.get("contexts", obj.get("context"))
    contexts = _text_list(given, "contexts" if "contexts" in obj else "context")
    conversation = read_messages(obj["messages"], roles, answer=_optional_text(obj, "answer"))
    if conversation.answer is None:
        raise ValueError(
            "no answer: 'messages' has no assistant message without tool calls, and no 'answer'"
        )
    question = _optional_text(obj, "question")
    record = RagRecord(
        question=_check_text(conversation.question, "messages")
        if question is None and conversation.question is not None
        else question,
        contexts=(*contexts, *conversation.contexts),
        answer=_check_text(conversation.answer, "messages"),
        reference=_optional_text(obj, "reference"),
        rubric=_rubric(obj.get("rubric")),
        attributes=_generator_attributes(obj),
        conversation_id=_conversation_id(obj),
        failed_tools=conversation.failed_tools,
    )
    skip = NO_EVIDENCE if not record.contexts and not record.failed_tools else None
    return InputRecord(line, _own_id(obj, line), record, skip)


def _lines(stream: IO[bytes], max_line_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """``(number, line)`` for each line, or ``(number, None)`` for one over the bound.

    A line over the bound is read through in chunks and dropped, never held whole.
    """
    number = 0
    while True:
        chunk = stream.readline(max_line_bytes + 1)
        if not chunk:
            return
        number += 1
        if len(chunk) <= max_line_bytes or chunk.endswith(b"\n"):
            yield number, chunk
            continue
        while chunk and not chunk.endswith(b"\n"):
            chunk = stream.readline(_READ_CHUNK)
        yield number, None


def _parse_line(
    number: int, raw: bytes, roles: EvidenceRule | None = None
) -> InputRecord | BadLine | None:
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 byte order mark
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadLine(number, f"not UTF-8 (byte {exc.start + 1} of the line)")
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return BadLine(number, f"not valid JSON: {exc.msg} (column {exc.colno})")
    except RecursionError:
        return BadLine(number, "not readable JSON: nested too deeply")
    except ValueError as exc:  # e.g. an integer longer than Python converts
        return BadLine(number, f"not readable JSON: {exc}")
    try:
        return record_from_json(obj, number, roles)
    except ValueError as exc:
        return BadLine(number, str(exc), _record_id(obj))
    except RecursionError:
        return BadLine(number, "nested too deeply", _record_id(obj))


def numbered_lines(
    source: IO[bytes] | Iterable[str], max_line_bytes: int
) -> Iterator[tuple[int, bytes | None]]:
    """``(number, line)`` for each line of ``source``, or ``(number, None)`` for one longer
    than ``max_line_bytes`` (read through and dropped, never held whole)."""
    if hasattr(source, "readline"):
        return _lines(source, max_line_bytes)  # type: ignore[arg-type]
    return (
        (number, encoded if len(encoded) <= max_line_bytes else None)
        for number, text in enumerate(source, start=1)  # type: ignore[arg-type]
        for encoded in (text.encode("utf-8", "surrogatepass"),)
    )


def read_records(
    source: IO[bytes] | Iterable[str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    roles: EvidenceRule | None = None,
) -> Iterator[InputRecord | BadLine]:
    """Each non-blank line as an ``InputRecord``, or a ``BadLine`` with its line number.

    ``source`` is a binary stream, read one line at a time (never loaded whole), or lines
    already read as ``str``. A line longer than ``max_line_bytes`` is a ``BadLine``.
    ``roles`` say which tools of a ``messages`` line fetch evidence (by default, all).
    ``OSError`` from the stream propagates.
    """
    for number, raw in numbered_lines(source, max_line_bytes):
        if raw is None:
            yield BadLine(number, f"line longer than {max_line_bytes} bytes (--max-line-bytes)")
            continue
        item = _parse_line(number, raw, roles)
        if item is not None:
            yield item


# --- which metrics a record is evaluated on ----------------------------------------------

WIDENING_METRICS: tuple[str, ...] = tuple(
    name for name in METRICS if (metric := registry.get(name)) is not None and metric.widens
)
"""Metrics the default set adds for each record that carries what they need."""


def missing_input(record: RagRecord, metric: str) -> str | None:
    """What ``record`` lacks for ``metric`` to have a score, in words; ``None`` when nothing."""
    spec = registry.get(metric)
    return None if spec is None else spec.missing(record)


def _widening_gap(record: RagRecord, metric: str) -> str | None:
    # Completeness joins the default set for a rubric only: from a reference alone it would
    # repeat correctness's recall, which the default set already reports.
    if metric == COMPLETENESS and not record.rubric:
        return "no rubric"
    return missing_input(record, metric)


@dataclass(frozen=True, slots=True)
class MetricPlan:
    """The metrics each record is evaluated on.

    Asked for (``requested``): exactly those. Otherwise the default set
    (faithfulness, groundedness, correctness) plus, per record, each metric of
    ``WIDENING_METRICS`` whose input the record carries: a question for relevancy, a
    rubric for completeness, ``[N]`` markers for citation.
    """

    requested: tuple[str, ...] | None = None

    def for_record(self, record: RagRecord) -> tuple[str, ...]:
        """The metrics to compute for ``record``."""
        if self.requested is not None:
            return self.requested
        widened = (m for m in WIDENING_METRICS if _widening_gap(record, m) is None)
        return (*ALL_METRICS, *widened)

    def skipped(self, record: RagRecord) -> list[tuple[str, str]]:
        """``(metric, what is missing)`` for each metric left without a score for lack of input."""
        if self.requested is not None:
            gaps = ((m, missing_input(record, m)) for m in self.requested)
        else:
            gaps = (
                (m, missing_input(record, m) if m in ALL_METRICS else _widening_gap(record, m))
                for m in METRICS
            )
        return [(m, why) for m, why in gaps if why is not None]


def _claim_to_json(verdict: ClaimVerdict) -> dict[str, Any]:
    evidence = verdict.evidence
    row: dict[str, Any] = {
        "text": verdict.claim.text,
        "answer_start": verdict.claim.answer_start,
        "answer_end": verdict.claim.answer_end,
        "verdict": verdict.verdict.value,
        "evidence": None
        if evidence is None
        else {
            "context_index": evidence.context_index,
            "start": evidence.start,
            "end": evidence.end,
            "text": evidence.text,
        },
    }
    if verdict.cited:
        row["cited"] = list(verdict.cited)
        row["citation_holds"] = verdict.citation_holds
    return row


def _scores(evaluation: Evaluation | None) -> dict[str, float | None]:
    names = [*METRICS, *(m for m in (evaluation.metrics if evaluation else ()) if m not in METRICS)]
    return {m: (evaluation.score(m) if evaluation else None) for m in names}


def _labels(
    scores: Mapping[str, float | None], thresholds: Mapping[str, float]
) -> dict[str, str | None]:
    return {m: label_for(score, thresholds.get(m)) for m, score in scores.items()}


def evaluation_to_json(
    record_id: str, evaluation: Evaluation, thresholds: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The output line for one evaluation (the keys other tools read).

    Give it the evaluation as it may leave (``ragpulse.signals.privacy.export_evaluation``):
    claim texts, evidence and the error message are written as they are. ``labels`` holds
    each score's pass/fail against ``thresholds`` (``None``: the metrics' own), as the span
    would carry it: ``None`` where the score is undefined or its metric has no threshold
    (the judge declines to label it).
    """
    error = evaluation.explanation if evaluation.status is EvalStatus.ERROR else None
    scores = _scores(evaluation)
    limits = registry.thresholds_with(None) if thresholds is None else thresholds
    row = {
        "id": record_id,
        "status": evaluation.status.value,
        "scores": scores,
        "labels": _labels(scores, limits),
        "explanations": {
            name: result.explanation
            for name, result in evaluation.metrics.items()
            if result.explanation
        },
        "slices": {name: str(value) for name, value in evaluation.slices.items()},
        "abstained": evaluation.abstained,
        "answerable": evaluation.answerable,
        "diagnosis": evaluation.diagnosis,
        "diagnosis_reason": evaluation.diagnosis_reason,
        "claims": [_claim_to_json(c) for c in evaluation.claims],
        "judge": evaluation.judge,
        "error_type": evaluation.error_type,
        "error": error,
    }
    # Only where known: a judge without a model (the offline judge) writes what it did.
    if evaluation.judge_model is not None:
        row["judge_model"] = evaluation.judge_model
    if evaluation.same_family is not None:
        row["judge_same_family"] = evaluation.same_family
    return row


def result_to_json(
    item: InputRecord, evaluation: Evaluation, thresholds: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The output line for one evaluated record: ``evaluation_to_json``, with the record's
    ``conversation_id`` when it has one (a report shows a conversation's turns together), and
    for a unit read from a trace file its span's ``trace_id`` and ``span_id`` (hex)."""
    row = evaluation_to_json(item.id, evaluation, thresholds)
    if item.record.conversation_id is not None:
        row["conversation_id"] = item.record.conversation_id
    target = item.record.span_context
    if target is not None:
        row["trace_id"] = format(target.trace_id, "032x")
        row["span_id"] = format(target.span_id, "016x")
    return row


def bad_line_to_json(bad: BadLine) -> dict[str, Any]:
    """The output line for an input line that could not be read."""
    return {
        "id": bad.record_id,
        "status": EvalStatus.ERROR.value,
        "scores": _scores(None),
        "labels": dict.fromkeys(_scores(None)),
        "explanations": {},
        "slices": {},
        "abstained": None,
        "answerable": None,
        "diagnosis": None,
        "diagnosis_reason": None,
        "claims": [],
        "judge": None,
        "error_type": INVALID_INPUT,
        "error": f"line {bad.line}: {bad.reason}",
    }


Item = InputRecord | BadLine


async def evaluate_stream(
    items: Iterable[Item],
    judge: Judge,
    metrics: Sequence[str] | MetricPlan,
    *,
    concurrency: int = 4,
) -> AsyncIterator[tuple[Item, Evaluation | None]]:
    """Evaluate records as they are read, yielding ``(item, evaluation)`` in input order.

    At most ``concurrency`` evaluations run at once and at most twice that many items
    are read ahead, so memory stays bounded whatever the input's length. A ``BadLine``
    comes back with ``None``. If reading ``items`` fails, every item read before the
    failure is still yielded, then the error propagates. ``metrics`` is the list every
    record is evaluated on, or a ``MetricPlan`` that chooses them record by record.
    """
    semaphore = asyncio.Semaphore(max(1, concurrency))
    window = 2 * max(1, concurrency)
    pending: deque[tuple[Item, asyncio.Task[Evaluation] | None]] = deque()

    plan = metrics if isinstance(metrics, MetricPlan) else MetricPlan(tuple(metrics))

    async def one(record: RagRecord) -> Evaluation:
        async with semaphore:
            # One bad record (a third-party judge that raises) must not end the batch.
            return await call_judge(judge, record, plan.for_record(record))

    async def skipped(item: InputRecord) -> Evaluation:
        reason = item.skip or ""
        return Evaluation(
            status=EvalStatus.SKIPPED,
            metrics={},
            judge=getattr(judge, "name", ""),
            annotator_kind=getattr(judge, "annotator_kind", "CODE"),
            error_type=reason,
            explanation=item.why or _SKIPS.get(reason),
        )

    iterator = iter(items)
    failure: BaseException | None = None
    try:
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                break
            except Exception as exc:  # an unreadable input: finish what was read first
                failure = exc
                break
            task = (
                asyncio.ensure_future(one(item.record) if item.skip is None else skipped(item))
                if isinstance(item, InputRecord)
                else None
            )
            pending.append((item, task))
            while len(pending) >= window or (pending and _done(pending[0][1])):
                head, head_task = pending.popleft()
                yield head, (await head_task if head_task is not None else None)
        while pending:
            head, head_task = pending.popleft()
            yield head, (await head_task if head_task is not None else None)
    finally:
        for _, task in pending:
            if task is not None:
                task.cancel()
    if failure is not None:
        raise failure


_SKIPS = {
    NO_EVIDENCE: "an agent's answer with no evidence: no passage and no evidence tool result",
}
"""Why a record was not evaluated, in words, by its reason."""


def _done(task: asyncio.Task[Evaluation] | None) -> bool:
    return task is None or task.done()


async def evaluate_records(
    records: Sequence[InputRecord],
    judge: Judge,
    metrics: Sequence[str] | MetricPlan,
    *,
    concurrency: int = 4,
    on_done: Callable[[InputRecord, Evaluation], None] | None = None,
) -> list[Evaluation]:
    """Evaluate every record with at most ``concurrency`` evaluations in flight.

    Results come back in input order; ``on_done`` is called as each one finishes.
    """
    results: list[Evaluation] = []
    async for item, evaluation in evaluate_stream(records, judge, metrics, concurrency=concurrency):
        assert isinstance(item, InputRecord) and evaluation is not None
        if on_done is not None:
            on_done(item, evaluation)
        results.append(evaluation)
    return results


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """Mean, 10th percentile and share below the threshold of one metric's defined scores."""

    metric: str
    count: int
    mean: float | None
    p10: float | None
    below: float | None
    threshold: float | None = None
    """The metric's own threshold, which ``below`` compares with; ``None``: it has none (a
    share to read, not to pass), and ``below`` is ``None`` too."""


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What a batch run found, per metric and per status."""

    metrics: tuple[MetricSummary, ...]
    statuses: dict[str, int] = field(default_factory=dict)
    bad_lines: int = 0

    def mean(self, metric: str) -> float | None:
        """The metric's mean over records where it is defined."""
        for summary in self.metrics:
            if summary.metric == metric:
                return summary.mean
        return None


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default).
    position = (len(sorted_values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def summarize(
    evaluations: Sequence[Evaluation],
    metrics: Sequence[str],
    *,
    thresholds: Mapping[str, float] | None = None,
    bad_lines: int = 0,
) -> BatchSummary:
    """Per-metric statistics (undefined scores skipped) and counts by status.

    Each metric is compared with its entry of ``thresholds``; ``None``: the thresholds the
    metrics declare (``ragpulse.metrics``). A metric without one has no share below it.
    """
    limits = registry.thresholds_with(None) if thresholds is None else thresholds
    summaries = []
    for metric in metrics:
        limit = limits.get(metric)
        values = sorted(s for e in evaluations if (s := e.score(metric)) is not None)
        if values:
            below = None if limit is None else sum(1 for v in values if v < limit) / len(values)
            summaries.append(
                MetricSummary(
                    metric,
                    len(values),
                    sum(values) / len(values),
                    _percentile(values, 0.10),
                    below,
                    limit,
                )
            )
        else:
            summaries.append(MetricSummary(metric, 0, None, None, None, limit))
    statuses = Counter(e.status.value for e in evaluations)
    return BatchSummary(tuple(summaries), dict(sorted(statuses.items())), bad_lines)


def parse_fail_under(
    specs: Iterable[str], metrics: Sequence[str] | None = None
) -> dict[str, float]:
    """``["groundedness=0.8"]`` -> ``{"groundedness": 0.8}``; raises ``ValueError`` if malformed.

    A gate is a score, so it must lie in [0, 1]. ``metrics``: the names a gate may take
    (the built-ins and the user's metrics registered here); default: the built-ins.
    """
    names = METRICS if metrics is None else metrics
    gates: dict[str, float] = {}
    for spec in specs:
        metric, sep, value = spec.partition("=")
        metric = metric.strip()
        if not sep or metric not in names:
            raise ValueError(
                f"--fail-under expects METRIC=VALUE with METRIC one of {', '.join(names)};"
                f" got {spec!r}"
            )
        try:
            gate = float(value)
        except ValueError:
            raise ValueError(f"--fail-under {spec!r}: {value!r} is not a number") from None
        if not 0.0 <= gate <= 1.0:  # also refuses nan
            raise ValueError(f"--fail-under {spec!r}: scores lie in [0, 1], so must the gate")
        gates[metric] = gate
    return gates


@dataclass(frozen=True, slots=True)
class ErrorAllowance:
    """How many failed records a run tolerates: a count, or a fraction of the records."""

    count: int | None = 0
    fraction: float | None = None

    def allows(self, errors: int, total: int) -> bool:
        """True when ``errors`` failed records out of ``total`` are within the allowance."""
        if self.fraction is not None:
            return errors <= self.fraction * total
        return errors <= (self.count or 0)

    def __str__(self) -> str:
        if self.fraction is not None:
            return f"{self.fraction:g} of the records"
        return f"{self.count} record{'' if self.count == 1 else 's'}"


_COUNT = re.compile(r"\d+")


def parse_max_errors(text: str) -> ErrorAllowance:
    """``"3"`` (a count), ``"0.05"`` or ``"5%"`` (a fraction); raises ``ValueError``."""
    text = text.strip()
    if _COUNT.fullmatch(text):
        return ErrorAllowance(count=int(text))
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(
            f"--max-errors expects a count (3) or a fraction (0.05 or 5%), got {text!r}"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"--max-errors {text!r}: a fraction lies in [0, 1]")
    return ErrorAllowance(count=None, fraction=value)
