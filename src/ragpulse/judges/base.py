"""The ``Judge`` protocol every judge implements, and the one safe way to call a judge."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar, runtime_checkable

from ragpulse import errors, semconv
from ragpulse.evaluation.families import same_family
from ragpulse.evaluation.types import AnnotatorKind, Evaluation, RagRecord, Verdict

__all__ = [
    "Contradiction",
    "Judge",
    "ReadsContradictions",
    "StartsEvaluations",
    "call_judge",
    "caller_deadline",
    "contradictions_in",
    "failed",
    "is_cpu_bound",
    "time_left",
]

_T = TypeVar("_T")
_timeout: Callable[[float | None], AbstractAsyncContextManager[object]] | None = getattr(
    asyncio, "timeout", None
)

# When the evaluation running in this context must be finished (``time.monotonic()``),
# set by ``call_judge`` for the judge it calls, so a judge that makes several calls (a
# ``ResilientJudge``) fits its retries and fallback into its caller's bound.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "ragpulse_judge_deadline", default=None
)


@runtime_checkable
class Judge(Protocol):
    """Turns a ``RagRecord`` into an ``Evaluation``.

    ``evaluate`` must not raise: failures come back as an ``Evaluation`` with
    status ``error`` and an ``error_type``. It runs on ragpulse's worker loop,
    never on the request's thread.

    A judge whose work is computation rather than waiting (no network, pure
    Python) declares ``cpu_bound = True`` as a class attribute: the worker then
    runs it in a separate process, so the application's threads keep the GIL and
    the evaluation timeout can end a runaway evaluation.

    A judge may also implement one optional method, ``start`` (``StartsEvaluations``),
    for records it can take many at a time without a coroutine each.
    """

    name: str
    annotator_kind: AnnotatorKind

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation: ...


@runtime_checkable
class StartsEvaluations(Protocol):
    """The ``Judge`` protocol's optional method: start a record, get a future.

    For a judge whose records are cheaper to run many at once than one coroutine each
    (records batched to a judge's processes): the worker calls ``start`` when a judge has
    it and awaits ``evaluate`` when it has not, or when ``start`` declines.

    ``start`` runs on the worker's event loop and must return at once. The future it
    returns gets the record's ``Evaluation`` (never an exception) within ``timeout``
    seconds of judge time: the judge keeps that bound itself, since only it knows what
    is judge time (a record waiting for a process to start is not). ``None`` declines:
    the judge has as many records as it takes at once (a caller with records started
    here keeps the others queued until one is done), or it does not start records this
    way at present (a caller with none started awaits ``evaluate`` instead).
    """

    def start(
        self, record: RagRecord, metrics: Collection[str], timeout: float
    ) -> asyncio.Future[Evaluation] | None: ...


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A passage range an earlier judge found contradicting one of the answer's claims.

    ``claim_start:claim_end`` is the claim's range in the answer; ``context_index`` the
    passage's position in the record's contexts, ``start:end`` the range in that passage.
    Offsets and positions only: nothing of the text travels with it.
    """

    claim_start: int
    claim_end: int
    context_index: int
    start: int
    end: int


def contradictions_in(evaluation: Evaluation) -> tuple[Contradiction, ...]:
    """The ranges ``evaluation`` found contradicting its claims: each ``CONTRADICTED`` claim
    with an answer range and verified evidence."""
    found = []
    for verdict in evaluation.claims:
        claim, evidence = verdict.claim, verdict.evidence
        if (
            verdict.verdict is Verdict.CONTRADICTED
            and evidence is not None
            and claim.answer_start is not None
            and claim.answer_end is not None
        ):
            found.append(
                Contradiction(
                    claim.answer_start,
                    claim.answer_end,
                    evidence.context_index,
                    evidence.start,
                    evidence.end,
                )
            )
    return tuple(found)


@runtime_checkable
class ReadsContradictions(Protocol):
    """The ``Judge`` protocol's optional method: evaluate, reading what an earlier judge found.

    For a judge that reads each claim against selected evidence (the local model judges):
    a cascade hands it what its screen found contradicting the answer, and the judge reads
    each of those passage ranges with the claim it contradicted, whatever its own first
    stage selects. Like ``evaluate``, it never raises.
    """

    async def evaluate_with_contradictions(
        self,
        record: RagRecord,
        metrics: Collection[str],
        contradicting: Sequence[Contradiction],
    ) -> Evaluation: ...


def is_cpu_bound(judge: Judge) -> bool:
    """True when the judge declares ``cpu_bound = True`` (the marker is optional)."""
    return getattr(judge, "cpu_bound", False) is True


@contextlib.contextmanager
def caller_deadline(at: float | None) -> Iterator[None]:
    """Within, ``time_left()`` counts down to ``at`` (``time.monotonic()``): a bound someone
    else keeps (a judge's process, which the application ends past it). Nothing here is cut
    at ``at``; a judge that makes several parts of an evaluation fits them into it."""
    token = _deadline.set(at)
    try:
        yield
    finally:
        _deadline.reset(token)


def time_left() -> float | None:
    """Seconds until the current evaluation's caller gives up; ``None``: no bound."""
    deadline = _deadline.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def failed(
    judge: Judge,
    error_type: str,
    explanation: str | None = None,
    *,
    started: float | None = None,
) -> Evaluation:
    """A failed evaluation in ``judge``'s name, timed from ``started`` (``perf_counter``)."""
    duration = 0.0 if started is None else (time.perf_counter() - started) * 1000.0
    # A third-party judge may lack the protocol's attributes; a failure must still be named.
    kind = getattr(judge, "annotator_kind", "CODE")
    return Evaluation.failed(
        error_type,
        judge=str(getattr(judge, "name", type(judge).__name__)),
        annotator_kind="LLM" if kind == "LLM" else "CODE",
        explanation=explanation,
        duration_ms=duration,
    )


async def _bounded(awaitable: Awaitable[_T], timeout: float | None) -> _T:
    """``awaitable`` within ``timeout`` (``asyncio.TimeoutError`` past it).

    In the calling task where the interpreter can (3.11's ``asyncio.timeout``): the
    worker calls judges within judges, and ``wait_for`` made a task and a timer for each
    level of every evaluation, on the application's worker thread.
    """
    if timeout is None:
        return await awaitable
    if _timeout is not None:
        async with _timeout(timeout):
            return await awaitable
    return await asyncio.wait_for(awaitable, timeout)


async def call_judge(
    judge: Judge,
    record: RagRecord,
    metrics: Collection[str],
    timeout: float | None = None,
    *,
    contradicting: Sequence[Contradiction] = (),
) -> Evaluation:
    """``judge.evaluate``, held to the protocol: bounded by ``timeout``, never raising.

    With ``contradicting`` (what an earlier judge found) and a judge that reads it
    (``ReadsContradictions``), its ``evaluate_with_contradictions`` instead.

    A timeout gives error type ``timeout``; an exception, its class name (the
    explanation carries its message); anything but an ``Evaluation``,
    ``invalid_result``. A result without a duration gets the measured one.
    A bound of an enclosing ``call_judge`` applies too (the shorter wins), and the
    judge can read what is left of it with ``time_left()``. Cancellation propagates.
    """
    started = time.perf_counter()
    left = time_left()
    bound = timeout
    if left is not None and (timeout is None or left <= timeout):
        # The enclosing bound ends first (or with this one): its timer alone will do, and
        # its expiry is this call's too. One timer less per level of every evaluation.
        timeout, bound = left, None
    token = _deadline.set(None if timeout is None else time.monotonic() + timeout)
    try:
        evaluating = (
            judge.evaluate_with_contradictions(record, metrics, contradicting)
            if contradicting and isinstance(judge, ReadsContradictions)
            else judge.evaluate(record, metrics)
        )
        returned: object = await _bounded(evaluating, bound)
    except asyncio.TimeoutError:
        return failed(judge, errors.TIMEOUT, f"no answer within {timeout:g}s", started=started)
    except Exception as exc:
        return failed(judge, type(exc).__name__, str(exc) or type(exc).__name__, started=started)
    finally:
        _deadline.reset(token)
    if not isinstance(returned, Evaluation):
        explanation = f"judge returned {type(returned).__name__}"
        return failed(judge, errors.INVALID_RESULT, explanation, started=started)
    if returned.duration_ms == 0.0:
        returned = replace(returned, duration_ms=(time.perf_counter() - started) * 1000.0)
    return with_judge_model(returned, judge, record)


def with_judge_model(evaluation: Evaluation, judge: object, record: RagRecord) -> Evaluation:
    """``evaluation`` naming the judge's model (its ``model_name``, where the judge that
    decided did not) and whether it is of the generator's family (``record``'s
    ``gen_ai.response.model``, else ``gen_ai.request.model``)."""
    model = evaluation.judge_model
    if model is None and evaluation.judge == getattr(judge, "name", None):
        model = model_name_of(judge)
    family = evaluation.same_family
    if family is None and model is not None:
        family = same_family(model, generator_model(record))
    if model == evaluation.judge_model and family == evaluation.same_family:
        return evaluation
    return replace(evaluation, judge_model=model, same_family=family)


def model_name_of(judge: object) -> str | None:
    """The ``model_name`` of ``judge``, or of the judge it wraps (``judge``, ``primary``)."""
    for _ in range(4):  # a few wrappers deep at most
        named = getattr(judge, "model_name", None)
        if isinstance(named, str) and named:
            return named
        inner = getattr(judge, "primary", None) or getattr(judge, "judge", None)
        if inner is None:
            return None
        judge = inner
    return None


def generator_model(record: RagRecord) -> str | None:
    """The model that generated ``record``'s answer, as its trace names it."""
    for key in (semconv.GEN_AI_RESPONSE_MODEL, semconv.GEN_AI_REQUEST_MODEL):
        value = record.attributes.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None
