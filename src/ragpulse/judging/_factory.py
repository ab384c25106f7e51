"""The judges a command or a setting names (``--judge``, ``RAGPULSE_JUDGE``), built in one place.

``ragpulse eval``, ``ragpulse calibrate``, ``ragpulse serve``, the demo and
``configure(judge="nli")`` all offer the same judges; they build them here, so an
option means the same thing in each and a missing extra or an unusable model gets
the same one-line message: a command exits with it (code 2), ``configure()`` gets a
judge whose every evaluation is a ``judge_unavailable`` error saying it.

- ``lexical``: the offline judge.
- ``openai``: the LLM judge; ``model`` is the model name.
- ``nli``, ``tokens``: a local ONNX model; ``model`` is its directory.
- ``cascade``: the offline judge screens, ``escalate`` (``openai``, ``nli`` or
  ``tokens``, built with ``model``) decides where it is unsure (``band``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ragpulse import errors
from ragpulse._guard import Guard
from ragpulse.evaluation.types import AnnotatorKind, Evaluation, RagRecord
from ragpulse.judges._kinds import DEFAULT_BAND, ESCALATION_KINDS, JUDGE_KINDS, parse_band
from ragpulse.judges.base import Judge
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judging.cascade import CascadeJudge
from ragpulse.judging.process import DEFAULT_NICE
from ragpulse.judging.resilient import ResilientJudge
from ragpulse.metrics.correctness import DEFAULT_CORRECTNESS_MODE

if TYPE_CHECKING:
    from ragpulse.settings import Settings

__all__ = [
    "ESCALATION_KINDS",
    "JUDGE_KINDS",
    "JudgeUnavailable",
    "UnavailableJudge",
    "build_judge",
    "judge_from_settings",
    "judge_notes",
    "parse_band",
]

_LOCAL_KINDS = ("nli", "tokens")
_guard = Guard(__name__)


class JudgeUnavailable(Exception):
    """The named judge cannot be built here; the message says why and what to do."""


class UnavailableJudge:
    """Stands in for a judge that could not be built: every evaluation says why.

    Its results are ``error`` evaluations of type ``judge_unavailable``, so a
    ``ResilientJudge``'s fallback answers for it and the spans say what is wrong.
    """

    annotator_kind: AnnotatorKind = "CODE"

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """A ``judge_unavailable`` error naming the problem."""
        return Evaluation.failed(
            errors.JUDGE_UNAVAILABLE,
            judge=self.name,
            annotator_kind=self.annotator_kind,
            explanation=self.problem,
        )


def _local(
    kind: str,
    model: str | None,
    *,
    label_map: str | Mapping[int, str] | None,
    threads: int | None,
    device: str,
    processes: int,
    correctness_mode: str,
) -> Judge:
    if not model:
        raise JudgeUnavailable(
            f"the {kind} judge needs a model directory (--model DIR, RAGPULSE_JUDGE_MODEL): "
            f"export one with `optimum-cli export onnx --model <hub id> --task "
            f"{'text' if kind == 'nli' else 'token'}-classification DIR`"
        )
    try:
        if kind == "nli":
            from ragpulse.judges.local.nli import NLIJudge as local
        else:
            from ragpulse.judges.local.token_classifier import TokenJudge as local  # type: ignore[assignment]
        judge = local(
            model,
            label_map=label_map,
            threads=threads,
            device=device,
            processes=processes,
            correctness_mode=correctness_mode,
        )
    except ValueError as exc:
        raise JudgeUnavailable(str(exc)) from None
    if judge.problem is not None:
        raise JudgeUnavailable(judge.problem)
    return judge


def judge_notes(judge: object) -> list[str]:
    """What a command tells its user on stderr about the judge it built: a requested
    execution provider onnxruntime here lacks (the judge runs on the CPU instead)."""
    notes: list[str] = []
    for part in (judge, getattr(judge, "escalate", None), getattr(judge, "primary", None)):
        note = getattr(part, "device_note", None)
        if isinstance(note, str) and note not in notes:
            notes.append(note)
    return notes


def build_judge(
    kind: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    resilient: bool = False,
    correctness_mode: str = DEFAULT_CORRECTNESS_MODE,
    label_map: str | Mapping[int, str] | None = None,
    threads: int | None = None,
    device: str = "cpu",
    escalate: str = "openai",
    band: tuple[float, float] = DEFAULT_BAND,
    processes: int = 1,
    nice: int = DEFAULT_NICE,
) -> Judge:
    """The judge ``kind`` names, ``resilient`` wrapping an LLM judge in ``ResilientJudge``.

    ``resilient`` suits callers that call the judge themselves (``ragpulse eval``,
    ``ragpulse calibrate``): a 429 or a timeout is retried with backoff and
    ``Retry-After``, and a judge that is down trips the breaker instead of being called
    for every record. ``configure()`` and ``ragpulse serve`` wrap judges themselves.
    The offline and local judges are returned as they are: they have nothing to retry.
    A cascade's LLM escalation judge is always resilient: when it is down, the screen
    decides, and its judge processes run at ``nice``. ``correctness_mode`` is the judge's
    correctness mode; an unknown one is refused. ``JudgeUnavailable`` says in one line why
    a judge cannot be built.
    """
    if kind == "lexical":
        try:
            return LexicalJudge(correctness_mode=correctness_mode)
        except ValueError as exc:
            raise JudgeUnavailable(str(exc)) from None
    if kind in _LOCAL_KINDS:
        return _local(
            kind,
            model,
            label_map=label_map,
            threads=threads,
            device=device,
            processes=processes,
            correctness_mode=correctness_mode,
        )
    if kind == "cascade":
        if escalate not in ESCALATION_KINDS:
            raise JudgeUnavailable(
                f"unknown escalation judge {escalate!r}; use {' or '.join(ESCALATION_KINDS)}"
            )
        decider = build_judge(
            escalate,
            model=model,
            base_url=base_url,
            api_key=api_key,
            resilient=escalate == "openai",
            correctness_mode=correctness_mode,
            label_map=label_map,
            threads=threads,
            device=device,
            processes=processes,
        )
        try:
            return CascadeJudge(
                LexicalJudge(correctness_mode=correctness_mode),
                decider,
                band=band,
                processes=processes,
                nice=nice,
            )
        except ValueError as exc:
            raise JudgeUnavailable(str(exc)) from None
    if kind != "openai":
        raise JudgeUnavailable(f"unknown judge {kind!r}; use {', '.join(JUDGE_KINDS)}")
    try:
        from ragpulse.judges.llm.openai import OpenAIJudge
    except ImportError as exc:
        raise JudgeUnavailable(
            f"the openai judge is not available ({exc}); install the openai extra "
            "(`pip install '.[openai]'` in a checkout)"
        ) from None
    options: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "api_key": api_key,
        "correctness_mode": correctness_mode,
    }
    try:
        judge: Judge = OpenAIJudge(**{k: v for k, v in options.items() if v is not None})
    except Exception as exc:
        raise JudgeUnavailable(f"the openai judge could not be built: {exc}") from None
    return ResilientJudge(judge) if resilient else judge


def judge_from_settings(settings: Settings) -> Judge:
    """The judge ``settings.judge`` names; never raises.

    A judge that cannot be built is logged once and stands as an ``UnavailableJudge``,
    so every evaluation records why (``judge_unavailable``) instead of the application
    failing at start.
    """
    try:
        judge = build_judge(
            settings.judge,
            model=settings.judge_model,
            correctness_mode=settings.correctness_mode,
            label_map=settings.judge_label_map,
            threads=settings.judge_threads,
            device=settings.judge_device,
            escalate=settings.cascade_escalate,
            band=settings.cascade_band,
            processes=settings.concurrency,
            nice=settings.judge_nice,
        )
    except JudgeUnavailable as exc:
        _guard.warning("judge %s cannot run: %s", settings.judge, exc)
        return UnavailableJudge(settings.judge, str(exc))
    for note in judge_notes(judge):
        # Logged once; the judge keeps judging on the providers it has.
        _guard.warning("judge %s: %s", settings.judge, note)
    return judge
