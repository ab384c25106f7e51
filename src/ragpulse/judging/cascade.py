"""``CascadeJudge``: a cheap judge screens every record; a stronger one decides the unsure.

The screen (the offline ``LexicalJudge`` by default) judges each record. Its
result stands when it is sure; the record goes to the escalation judge (an LLM
``OpenAIJudge``, or a local ``NLIJudge``/``TokenJudge``) when the screen is unsure:

- some claim's confidence lies inside ``band`` (both ends included), or a claim
  has no confidence (the screen does not say);
- some claim is ``NOT_FOUND`` or ``CONTRADICTED``: a flagged answer is worth a
  second reading before it pages someone;
- the screen failed.

An escalation judge that reads each claim against selected evidence (the local model
judges, ``ReadsContradictions``) is handed what the screen found contradicting the
answer (``contradictions_in``): it reads each such passage range with the claim it
contradicted, whatever its own first stage selects, in its own process too.

The result is the deciding judge's, under its name and annotator kind, with
``Evaluation.escalated`` saying whether the screen escalated (written as
``ragpulse.eval.cascade.escalated`` on the span and the log events). When the
escalation judge fails, the screen's result stands and its explanation says so.
Usage adds up both judges' calls and tokens.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import replace

from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import AnnotatorKind, Evaluation, RagRecord, Verdict
from ragpulse.judges._kinds import DEFAULT_BAND
from ragpulse.judges.base import Judge, call_judge, contradictions_in
from ragpulse.judging.process import DEFAULT_NICE, ProcessJudge, isolate

__all__ = ["DEFAULT_BAND", "CascadeJudge", "uncertain"]
_FLAGGED = (Verdict.NOT_FOUND, Verdict.CONTRADICTED)


def uncertain(evaluation: Evaluation, band: tuple[float, float]) -> bool:
    """Whether a screen's ``evaluation`` should go to the escalation judge (see the module doc)."""
    if evaluation.status is EvalStatus.ERROR:
        return True
    low, high = band
    for claim in evaluation.claims:
        if claim.verdict in _FLAGGED or claim.confidence is None:
            return True
        if low <= claim.confidence <= high:
            return True
    return False


class CascadeJudge:
    """Screen every record with ``screen``; let ``escalate`` decide where it is unsure.

    A CPU-bound screen or escalation judge runs in its own judge processes (as the
    worker runs any CPU-bound judge) at ``nice``, unless ``isolate_cpu_bound`` is False.
    """

    annotator_kind: AnnotatorKind
    label_kind = "cascade"
    """Whose label policy its scores are read by (``ragpulse.judges._labels``)."""

    def __init__(
        self,
        screen: Judge,
        escalate: Judge,
        *,
        band: tuple[float, float] = DEFAULT_BAND,
        name: str | None = None,
        isolate_cpu_bound: bool = True,
        processes: int = 1,
        nice: int = DEFAULT_NICE,
    ) -> None:
        low, high = band
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"band must be (low, high) with 0 <= low <= high <= 1, got {band!r}")
        self.screen = screen
        self.escalate = escalate
        self.band = (float(low), float(high))
        self.name = name or f"cascade({screen.name}>{escalate.name})"
        self.annotator_kind = screen.annotator_kind
        self._run_screen = (
            isolate(screen, processes=processes, nice=nice) if isolate_cpu_bound else screen
        )
        self._run_escalate = (
            isolate(escalate, processes=processes, nice=nice) if isolate_cpu_bound else escalate
        )

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """The screen's evaluation, or the escalation judge's where the screen is unsure."""
        started = time.perf_counter()
        screened = await call_judge(self._run_screen, record, metrics)
        if not uncertain(screened, self.band):
            return replace(screened, escalated=False)
        decided = await call_judge(
            self._run_escalate, record, metrics, contradicting=contradictions_in(screened)
        )
        usage = screened.usage + decided.usage
        duration = (time.perf_counter() - started) * 1000.0
        if decided.status is EvalStatus.ERROR and screened.status is not EvalStatus.ERROR:
            why = (
                f"{decided.error_type}: {decided.explanation}"
                if decided.explanation
                else decided.error_type
            )
            note = f"escalation to {decided.judge} failed ({why}); the screen decided"
            explanation = f"{screened.explanation}; {note}" if screened.explanation else note
            return replace(
                screened, usage=usage, duration_ms=duration, escalated=True, explanation=explanation
            )
        return replace(decided, usage=usage, duration_ms=duration, escalated=True)

    def close(self) -> None:
        """End the judge processes this cascade started."""
        for judge in (self._run_screen, self._run_escalate):
            if isinstance(judge, ProcessJudge) and judge not in (self.screen, self.escalate):
                judge.close()
