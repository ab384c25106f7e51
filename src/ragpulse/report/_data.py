"""The compact data a page embeds: columns for the request list, detail loaded on demand.

The list needs a few numbers per request (scores in thousandths, a status code,
verdict counts, slice codes); the detail of a request (texts, claims, evidence
offsets) is a separate array the page parses only when a request is opened.
Passages repeated across requests are stored once, and every text is capped,
so the file grows with the number of requests, not with the size of a corpus.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse import semconv
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Verdict
from ragpulse.report._feedback_events import feedback_columns, feedback_detail
from ragpulse.report._model import ReportClaim, ReportContext, ReportRequest, Run, threshold_for
from ragpulse.report._traces import DIAGNOSIS

MAX_TEXT = 20_000
"""Characters of a question, answer or passage kept in the page; the rest is cut with a marker."""
MAX_LIST_QUESTION = 160
"""Characters of the question shown in the request list."""
MAX_LIST_CLAIM = 160
"""Characters of a request's first failing claim shown in the request list."""
MAX_CLAIMS = 500
"""Claims of one request kept in the page; the rest are counted."""
MAX_FAILED_TOOLS = 20
"""Failed tools of one request named in the page."""
MAX_SLICE_VALUES = 20
"""A slice with more values than this is not low-cardinality and is not offered as a cut."""
STATUSES = tuple(
    status.value
    for status in (
        EvalStatus.OK,
        EvalStatus.NO_CLAIMS,
        EvalStatus.ERROR,
        EvalStatus.SKIPPED,
        EvalStatus.PENDING,
    )
)
VERDICTS = tuple(v.value for v in Verdict)
_SUPPORTING = (Verdict.SUPPORTED.value, Verdict.INFERRED.value)
_FAILING = (Verdict.CONTRADICTED.value, Verdict.NOT_FOUND.value)


def _cap(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"…[{len(text) - limit} more characters not embedded]"


def _code(values: list[str], value: str) -> int:
    if value not in values:
        values.append(value)
    return values.index(value)


def _sources(claims: Sequence[ReportClaim]) -> str:
    used = {
        c.context_index for c in claims if c.verdict in _SUPPORTING and c.context_index is not None
    }
    return "none" if not used else "single" if len(used) == 1 else "multi"


def _slices(request: ReportRequest) -> dict[str, str]:
    slices = dict(request.slices)
    if request.status == EvalStatus.OK:
        slices.setdefault("sources", _sources(request.claims))
    if request.judge:
        slices.setdefault("judge", request.judge)
    return slices


def _defined(score: float | None) -> bool:
    # NaN or infinity from a third-party judge is no score: it would break the page's JSON.
    return score is not None and math.isfinite(score)


def _thousandths(score: float | None) -> int:
    """The score in thousandths of [0, 1]; -1 when undefined."""
    if score is None or not _defined(score):
        return -1
    return round(min(max(score, 0.0), 1.0) * 1000)


def _label(request: ReportRequest, metric: str, threshold: float | None) -> int:
    """1 pass, 0 fail, -1 undefined or no pass/fail (a metric without a threshold)."""
    score = request.scores.get(metric)
    if score is None or not _defined(score):
        return -1
    recorded = request.labels.get(metric)
    if recorded in (semconv.LABEL_PASS, semconv.LABEL_FAIL):
        return int(recorded == semconv.LABEL_PASS)
    return -1 if threshold is None else int(score >= threshold)


def _worst(request: ReportRequest, limits: Mapping[str, float | None]) -> tuple[int, int]:
    """The metric furthest below (or least above) its threshold, as ``(index, margin in
    thousandths)``; ``(-1, 0)`` when no metric with a threshold is scored. A recorded
    ``fail`` ranks below every pass whatever the margin."""
    worst: tuple[int, int] = (-1, 0)
    best_key: tuple[int, int] | None = None
    for index, (metric, limit) in enumerate(limits.items()):
        label = _label(request, metric, limit)
        if label < 0 or limit is None:
            continue
        margin = _thousandths(request.scores.get(metric)) - round(limit * 1000)
        key = (label, margin)
        if best_key is None or key < best_key:
            best_key, worst = key, (index, margin)
    return worst


def _first_failing(request: ReportRequest, verdicts: list[str]) -> list[Any] | None:
    """``[verdict code, text]`` of the answer's first contradicted or unsupported claim (in
    answer order where the claims are located), for the list; ``None`` when none fails."""
    failing = [
        (c.answer_start if c.answer_start is not None else math.inf, k, c)
        for k, c in enumerate(request.claims)
        if c.verdict in _FAILING
    ]
    if not failing:
        return None
    _, _, claim = min(failing, key=lambda item: (item[0], item[1]))
    return [verdicts.index(claim.verdict), _cap(claim.text, MAX_LIST_CLAIM)]


ABSTAINED_ANSWERABLE = "the answer abstains though the passages could answer: groundedness 0"
ABSTAINED_UNANSWERABLE = "the answer abstains and the passages could not answer: no claim scored"
ABSTAINED = "the answer abstains: it makes no claim to check"


def _abstention_code(request: ReportRequest) -> int:
    """0: no abstention; 1: abstained though answerable; 2: rightly abstained; 3: unknown."""
    if not request.abstained:
        return 0
    return 1 if request.answerable is True else 2 if request.answerable is False else 3


def _abstention(request: ReportRequest) -> str | None:
    """Why an abstaining answer scored as it did; ``None`` when it did not abstain."""
    if not request.abstained:
        return None
    if request.answerable is True:
        return ABSTAINED_ANSWERABLE
    if request.answerable is False:
        return ABSTAINED_UNANSWERABLE
    return ABSTAINED


class _Texts:
    """A table of distinct passage texts: each is embedded once, requests point at it."""

    def __init__(self) -> None:
        self.items: list[str | None] = []
        self._index: dict[str | None, int] = {}

    def ref(self, text: str | None) -> int:
        capped = _cap(text)
        if capped not in self._index:
            self._index[capped] = len(self.items)
            self.items.append(capped)
        return self._index[capped]


def _stretch(text: str | None, start: int | None, end: int | None) -> str | None:
    if text is None or start is None or end is None:
        return None
    return text[start:end]


def _claim(claim: ReportClaim, answer: str | None, passage: str | None) -> list[Any]:
    # A claim's text is usually its stretch of the answer, and its evidence the stretch of its
    # passage: those are left out (null) and the page cuts them from the texts it has.
    text: str | None = claim.text
    if _stretch(answer, claim.answer_start, claim.answer_end) == claim.text:
        text = None
    evidence = claim.evidence_text
    if _stretch(passage, claim.start, claim.end) == evidence:
        evidence = None
    holds = None if claim.citation_holds is None else int(claim.citation_holds)
    return [
        text,
        claim.verdict,
        claim.answer_start,
        claim.answer_end,
        claim.context_index,
        claim.start,
        claim.end,
        evidence,
        list(claim.cited),
        holds,
        claim.reason,
    ]


def _detail(request: ReportRequest, texts: _Texts, thresholds: Mapping[str, float]) -> list[Any]:
    contexts = request.contexts
    answer = _cap(request.answer)
    passages = [] if contexts is None else [_cap(c.text) for c in contexts]

    def passage(index: int | None) -> str | None:
        return passages[index] if index is not None and 0 <= index < len(passages) else None

    claims = request.claims[:MAX_CLAIMS]
    return [
        request.id,
        _cap(request.question),
        answer,
        None if contexts is None else [_context(c, texts) for c in contexts],
        [_claim(c, answer, passage(c.context_index)) for c in claims],
        request.judge,
        request.error_type,
        request.explanations,
        len(request.claims) - len(claims),
        _abstention(request),
        feedback_detail(request, thresholds),
        list(request.failed_tools[:MAX_FAILED_TOOLS]),
    ]


def _context(context: ReportContext, texts: _Texts) -> list[Any]:
    """``[text ref, id]``, and the tool's name for a tool's result."""
    row: list[Any] = [texts.ref(context.text), context.id]
    if context.tool is not None:
        row.append(context.tool)
    return row


def _conversations(requests: Sequence[ReportRequest]) -> tuple[list[str], list[int]]:
    """The run's conversations (those with more than one turn here, in order of first
    turn) and each request's index among them (-1: none, or a conversation of one)."""
    turns: dict[str, int] = {}
    for request in requests:
        if request.conversation_id is not None:
            turns[request.conversation_id] = turns.get(request.conversation_id, 0) + 1
    names = [name for name, count in turns.items() if count > 1]
    index = {name: k for k, name in enumerate(names)}
    return names, [
        index.get(r.conversation_id, -1) if r.conversation_id is not None else -1 for r in requests
    ]


def _run_threshold(run: Run, metric: str, thresholds: Mapping[str, float]) -> float | None:
    """The threshold a metric is read against in the report: the one given; else none where
    the run records labels but never one for this metric (its judge declined to label it);
    else the one the metric declares (a run recorded before labels were written)."""
    if metric in thresholds:
        return thresholds[metric]
    records_labels = any(r.labels for r in run.requests)
    if records_labels and not any(metric in r.labels for r in run.requests):
        return None
    return threshold_for(metric, thresholds)


def run_data(run: Run, thresholds: Mapping[str, float]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The list columns of a run, and its detail (parsed by the page on demand)."""
    metrics = run.metrics
    statuses = list(STATUSES)
    verdicts = list(VERDICTS)
    slices = [_slices(r) for r in run.requests]
    names = sorted({name for s in slices for name in s})
    slice_values: dict[str, list[str]] = {}
    for name in names:
        values = sorted({s[name] for s in slices if name in s})
        distinct = len(values) + any(name not in s for s in slices)
        if distinct > 1 and len(values) <= MAX_SLICE_VALUES:
            slice_values[name] = values
    for request in run.requests:
        for claim in request.claims:
            _code(verdicts, claim.verdict)
    flat: list[int] = []
    for request in run.requests:
        tally = [0] * len(verdicts)
        for claim in request.claims:
            tally[verdicts.index(claim.verdict)] += 1
        flat.extend(tally)
    limits = {m: _run_threshold(run, m, thresholds) for m in metrics}
    worst = [_worst(r, limits) for r in run.requests]
    diagnoses: list[str] = []
    diagnosed = [r.slices.get(DIAGNOSIS) for r in run.requests]
    diagnosis_codes = [-1 if d is None else _code(diagnoses, d) for d in diagnosed]
    rows = {
        "name": run.name,
        "source": run.source,
        "notes": run.notes,
        "n": len(run.requests),
        "metrics": list(metrics),
        "thresholds": limits,
        "statuses": statuses,
        "verdicts": verdicts,
        "id": [r.id for r in run.requests],
        "q": [_cap(r.question, MAX_LIST_QUESTION) or "" for r in run.requests],
        "st": [_code(statuses, r.status) for r in run.requests],
        "sc": {m: [_thousandths(r.scores.get(m)) for r in run.requests] for m in metrics},
        "lab": {m: [_label(r, m, limits[m]) for r in run.requests] for m in metrics},
        "vc": flat,
        "ab": [_abstention_code(r) for r in run.requests],
        "wm": [index for index, _ in worst],
        "wv": [margin for _, margin in worst],
        "diagnoses": diagnoses,
        "dg": diagnosis_codes,
        "fc": [_first_failing(r, verdicts) for r in run.requests],
        "slices": slice_values,
        "sl": {
            name: [values.index(s[name]) if name in s else -1 for s in slices]
            for name, values in slice_values.items()
        },
    }
    conversations, turns = _conversations(run.requests)
    if conversations:
        # A conversation's turns are shown together: the page groups rows by this column.
        rows["convs"] = [_cap(name, MAX_LIST_QUESTION) for name in conversations]
        rows["cv"] = turns
    rows.update(feedback_columns(run.requests, thresholds))
    texts = _Texts()
    details = [_detail(r, texts, thresholds) for r in run.requests]
    return rows, {"texts": texts.items, "requests": details}


def _verdicts_by_claim(request: ReportRequest) -> dict[str, str]:
    return {c.text: c.verdict for c in request.claims}


def _keys(run: Run, by_question: bool) -> list[str]:
    if not by_question:
        return [r.id for r in run.requests]
    # The n-th time a question was asked in one run matches its n-th time in the other.
    seen: dict[str, int] = {}
    keys = []
    for request in run.requests:
        question = request.question or ""
        seen[question] = seen.get(question, 0) + 1
        keys.append(f"{question}\x00{seen[question]}")
    return keys


def _largest_drop(before: ReportRequest, after: ReportRequest) -> float:
    changes = []
    for metric, old in before.scores.items():
        new = after.scores.get(metric)
        if old is not None and new is not None and _defined(old) and _defined(new):
            changes.append(new - old)
    return min(changes, default=0.0)


def compare_data(before: Run, after: Run) -> dict[str, Any]:
    """Requests of two runs matched, and those whose status or claim verdicts changed
    (the largest score drop first).

    Requests match by id when the runs share ids (``ragpulse eval`` of the same
    records), else by question (trace files, whose ids differ from run to run).
    """
    ids_after = {r.id for r in after.requests}
    by_question = not any(r.id in ids_after for r in before.requests) and all(
        r.question is not None for r in (*before.requests, *after.requests)
    )
    keys_before, keys_after = _keys(before, by_question), _keys(after, by_question)
    index_after = {key: i for i, key in enumerate(keys_after)}
    changed: list[list[Any]] = []
    matched = 0
    for i, request in enumerate(before.requests):
        j = index_after.get(keys_before[i])
        if j is None:
            continue
        matched += 1
        other = after.requests[j]
        old, new = _verdicts_by_claim(request), _verdicts_by_claim(other)
        transitions = [
            [_cap(text, 300), old.get(text), new.get(text)]
            for text in [*old, *(t for t in new if t not in old)]
            if old.get(text) != new.get(text)
        ]
        if transitions or request.status != other.status:
            changed.append([i, j, request.status, other.status, transitions])
    # Worst regressions first: the largest drop of any metric scored in both runs.
    changed.sort(key=lambda row: _largest_drop(before.requests[row[0]], after.requests[row[1]]))
    known = set(keys_before)
    return {
        "matched": matched,
        "only_before": len(before.requests) - matched,
        "only_after": sum(key not in known for key in keys_after),
        "changed": changed,
    }
