"""An evaluation's signals as plain data, made under the content policy: ``Signals``.

One evaluation writes the ``ragpulse.eval.*`` attributes of its span, one point of
the outcome counter, the score histogram's points and one log event per metric.
``make_signals`` makes all of them at once, after the content policy
(``ragpulse.signals.privacy``), as dicts and tuples of plain values; the sink only hands
them to the SDK. Where a judge runs in its own process, that process makes them and
only the plain data crosses back (``ragpulse.judging.process``), so the scrubbing,
the explanations, the claims JSON and the log-event bodies cost the application
nothing; a judge on the worker thread gets them from the same function there.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragpulse._guard import Guard
from ragpulse.capture._content import ContentPolicy
from ragpulse.evaluation.types import Evaluation
from ragpulse.metrics._assemble import apply_strict
from ragpulse.signals.emit import EmitOptions, Signals, signals_of
from ragpulse.signals.privacy import export_evaluation

__all__ = [
    "PreparedEvaluation",
    "SignalSpec",
    "Signals",
    "make_signals",
    "portable_policy",
]

_guard = Guard("ragpulse.signals")

_serials = itertools.count(1)


@dataclass(frozen=True)
class SignalSpec:
    """How one sink writes signals: what a judge's process needs to make them for it."""

    options: EmitOptions
    serial: int = field(default_factory=lambda: next(_serials), compare=False)
    """Tells this sink's signals from another's."""


@dataclass(frozen=True, slots=True)
class PreparedEvaluation(Evaluation):
    """An evaluation whose signals were made where it was judged.

    Its claims, evidence and parts stayed in the judge's process (``claims`` and the
    other parts are empty); what is here is the evaluation as it may leave the
    process (content policy and strict mode applied) and its ``signals``.
    """

    signals: Signals | None = None


def portable_policy(policy: ContentPolicy) -> bool:
    """Whether a judge's process may apply ``policy`` itself.

    Content on or off, a ``hash_key``, and ragpulse's own redaction (a pattern
    redactor) travel. A ``redact`` hook of the application stays in the application:
    the judge's process would have to import the hook's module, and whatever that
    module runs on import with it.
    """
    redact = policy.redact
    if redact is None:
        return True
    module = getattr(redact, "__module__", None) or type(redact).__module__
    return isinstance(module, str) and module.startswith("ragpulse.")


def make_signals(
    evaluation: Evaluation,
    *,
    name: str | None,
    service: str | None,
    options: EmitOptions,
    policy: ContentPolicy | None = None,
    spec: int = 0,
    conversation: str | None = None,
    response_id: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> tuple[Evaluation, Signals]:
    """The evaluation as it may leave the process, and every signal it writes.

    ``name`` is the unit's name, ``service`` the evaluated trace's own service (used
    when ``options`` names none), ``conversation`` its conversation id, ``response_id`` the
    judged completion's id; ``policy`` the
    content policy (the process's by default). Strict mode applies first, then the
    content policy, once, so no signal can leak what another withholds. Never raises:
    a policy that fails gives an error evaluation carrying no text, span attributes
    that cannot be made give the status that says so, metric points and events that
    cannot be made are left out (and logged).
    """
    if options.strict:
        evaluation = apply_strict(evaluation)
    exported = _exported(evaluation, policy)
    return exported, signals_of(
        exported,
        name=name,
        service=service,
        options=options,
        spec=spec,
        conversation=conversation,
        response_id=response_id,
        attributes=attributes,
    )


def _exported(evaluation: Evaluation, policy: ContentPolicy | None) -> Evaluation:
    """``export_evaluation``, or, should it fail, an error that carries no text at all."""
    try:
        return export_evaluation(evaluation, policy)
    except Exception as exc:
        _guard.exception("ragpulse: could not apply the content policy to an evaluation")
        return Evaluation.failed(
            type(exc).__name__,
            judge=evaluation.judge,
            annotator_kind=evaluation.annotator_kind,
            usage=evaluation.usage,
            duration_ms=evaluation.duration_ms,
        )
