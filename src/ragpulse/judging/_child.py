"""The judge process's side of ``ProcessJudge``: receive records, send evaluations.

Started by ``ProcessJudge`` as ``python -c`` with two inherited pipe descriptors;
it imports nothing of the application (no ``__main__`` re-run, unlike
``multiprocessing``'s spawn). The first message is the pickled judge; then come
``settings`` (how the application's sink writes signals) and batches of ``evaluate``
messages (``ragpulse.judging._wire``), each batch answered with one message holding an
evaluation per record, in order. When the
settings are there and the record asks for them, an evaluation with claims comes
back with its signals made here, under the content policy, and without its
claims. End of input (the parent closed the pipe or died) ends the process, and so does the
parent's end while it is busy (``ragpulse.judging._lifeline``). Its stdout
is its stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from ragpulse import errors, semconv
from ragpulse._guard import Guard
from ragpulse._secrets import register_secret
from ragpulse.capture._content import ContentPolicy
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Evaluation, RagRecord
from ragpulse.judges.base import Judge, call_judge, caller_deadline, failed
from ragpulse.judging._lifeline import die_with_parent
from ragpulse.judging._wire import (
    ANSWERS,
    BATCH,
    RICH,
    SETTINGS,
    WireError,
    decode_record,
    encode_evaluation,
    is_thin,
)
from ragpulse.signals.emit import EmitOptions, response_id_of
from ragpulse.signals.make import make_signals

_guard = Guard(__name__)

_SLACK = 0.25
"""Share of a batch's bound kept back for the answer's way to the application."""
_SLACK_MAX = 2.0
"""Seconds kept back at most."""


@dataclass(frozen=True, slots=True)
class _Settings:
    """What the application's sink sent: how to make an evaluation's signals."""

    spec: int
    options: EmitOptions
    policy: ContentPolicy


def main(read_fd: int, write_fd: int, nice: int, parent: int = 0, kernel_signal: int = 0) -> None:
    """Serve evaluations until the parent closes the pipe, or ends (``parent``: its pid)."""
    if parent:
        # Busy, this process reads no pipe: it must not outlive a parent that ended.
        die_with_parent(parent, kernel_signal=bool(kernel_signal))
    # Ctrl-C in a terminal reaches the whole process group: the parent decides when we end.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The parent's stdout may be a stream of results (ragpulse eval's JSONL): what a judge
    # or a user's metric prints here goes to stderr, never into it.
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    if nice:
        # Evaluation is background work: the application's own processes go first.
        with contextlib.suppress(OSError):
            os.nice(nice)
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    loop = asyncio.new_event_loop()
    try:
        judge: Judge = inbox.recv()
        outbox.send("ready")
        settings: _Settings | None = None
        while True:
            try:
                message = inbox.recv()
            except EOFError:
                return
            if isinstance(message, tuple) and message and message[0] == SETTINGS:
                settings = _settings(message)
                continue
            if not (isinstance(message, tuple) and len(message) == 3 and message[0] == BATCH):
                continue  # not ours to answer: the application sends batches
            batch = message[1] if isinstance(message[1], tuple) else ()
            deadline = _deadline(message[2])
            answers = loop.run_until_complete(_evaluate_batch(judge, batch, settings, deadline))
            try:
                outbox.send((ANSWERS, answers))
            except Exception:  # an Evaluation a third-party judge filled oddly
                outbox.send((ANSWERS, tuple(_picklable(judge, answer) for answer in answers)))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return
    finally:
        loop.close()


def _deadline(bound: object) -> float | None:
    """When to have answered a batch the application ends this process ``bound`` seconds
    after sending: a share of it earlier (at most ``_SLACK_MAX``), so that the answer is
    back before, on a busy host too."""
    if not isinstance(bound, int | float) or bound <= 0:
        return None
    return time.monotonic() + bound - min(_SLACK_MAX, bound * _SLACK)


async def _evaluate_batch(
    judge: Judge, batch: tuple[object, ...], settings: _Settings | None, deadline: float | None
) -> tuple[object, ...]:
    """The answers to a batch's records, judged one after another in one pass of the loop
    (a pass per record cost about as much as a short record's judging). Within the batch,
    ``time_left()`` counts down to ``deadline``: the user's metrics measured after the
    judge fit into it, so that one of them that is slow fails alone, rather than the
    application ending this process with every score of the record."""
    with caller_deadline(deadline):
        return tuple([await _evaluate(judge, item, settings) for item in batch])


async def _evaluate(judge: Judge, message: object, settings: _Settings | None) -> object:
    """The answer to one record of a batch: its evaluation, with signals where asked."""
    try:
        record, metrics, wanted, contradicting = decode_record(message)  # type: ignore[arg-type]
    except WireError as exc:
        return encode_evaluation(failed(judge, errors.INVALID_INPUT, str(exc)))
    result = await call_judge(judge, record, metrics, contradicting=contradicting)
    try:
        return _answer(result, record, settings if wanted else None)
    except Exception as exc:  # an Evaluation a third-party judge filled oddly
        return encode_evaluation(failed(judge, errors.INVALID_RESULT, f"unusable: {exc}"))


def _picklable(judge: Judge, answer: object) -> object:
    """``answer`` when it pickles; else an ``invalid_result`` evaluation saying why."""
    try:
        pickle.dumps(answer)
        return answer
    except Exception as exc:
        return encode_evaluation(failed(judge, errors.INVALID_RESULT, f"not picklable: {exc}"))


def _settings(message: tuple[object, ...]) -> _Settings | None:
    """The settings of a ``settings`` message; None (signals made by the application) when
    they are not what they should be."""
    try:
        _, spec, options, policy, secrets = message
        if not isinstance(options, EmitOptions) or not isinstance(policy, ContentPolicy):
            raise TypeError(f"got {type(options).__name__} and {type(policy).__name__}")
        for secret in secrets:  # type: ignore[attr-defined]
            register_secret(secret)
        return _Settings(int(spec), options, policy)  # type: ignore[call-overload]
    except Exception:
        _guard.exception("ragpulse: unusable signal settings; the application makes the signals")
        return None


def _answer(result: Evaluation, record: RagRecord, settings: _Settings | None) -> object:
    """The message that carries ``result``: with its signals made here when it can."""
    if settings is not None and result.status is EvalStatus.OK and result.claims:
        service = record.attributes.get(semconv.ATTR_SERVICE_NAME)
        exported, signals = make_signals(
            result,
            name=record.name,
            service=service if isinstance(service, str) else None,
            options=settings.options,
            policy=settings.policy,
            spec=settings.spec,
            conversation=record.conversation_id,
            response_id=response_id_of(record),
            attributes=record.attributes,
        )
        # Signals made from an evaluation that stays OK do not depend on what the
        # application may still change (a fallback's explanation): they stay true.
        if exported.status is EvalStatus.OK:
            return encode_evaluation(exported, signals)
    if is_thin(result):
        return encode_evaluation(result)
    return (RICH, result)
