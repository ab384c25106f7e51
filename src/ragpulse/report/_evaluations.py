"""Builds a run from evaluations in memory (an ``on_evaluation`` hook, the demo)."""

from __future__ import annotations

from collections.abc import Iterable

from ragpulse.evaluation.types import ClaimVerdict, Evaluation, RagRecord
from ragpulse.report._model import ReportClaim, ReportContext, ReportRequest, Run


def _claim(verdict: ClaimVerdict) -> ReportClaim:
    evidence = verdict.evidence
    return ReportClaim(
        text=verdict.claim.text,
        verdict=verdict.verdict.value,
        answer_start=verdict.claim.answer_start,
        answer_end=verdict.claim.answer_end,
        context_index=None if evidence is None else evidence.context_index,
        start=None if evidence is None else evidence.start,
        end=None if evidence is None else evidence.end,
        evidence_text=None if evidence is None else evidence.text,
        reason=verdict.reason,
    )


def request_from_evaluation(
    request_id: str, record: RagRecord, evaluation: Evaluation
) -> ReportRequest:
    """One request of a report from the record a judge saw and what it said."""
    explanations = {
        name: result.explanation
        for name, result in evaluation.metrics.items()
        if result.explanation
    }
    if evaluation.explanation:
        explanations.setdefault("evaluation", evaluation.explanation)
    # The same cuts a trace file offers: the evaluation's slices and the @rag unit's name.
    slices = {name: str(value).lower() for name, value in evaluation.slices.items()}
    if record.name:
        slices.setdefault("rag", record.name)
    if evaluation.diagnosis:
        slices["diagnosis"] = evaluation.diagnosis
    if evaluation.diagnosis_reason:
        explanations["diagnosis"] = evaluation.diagnosis_reason
    return ReportRequest(
        id=request_id,
        status=evaluation.status.value,
        scores={name: result.score for name, result in evaluation.metrics.items()},
        explanations=explanations,
        claims=tuple(_claim(c) for c in evaluation.claims),
        question=record.question,
        answer=record.answer,
        contexts=tuple(ReportContext(c.text, c.id, c.tool) for c in record.contexts),
        judge=evaluation.judge or None,
        error_type=evaluation.error_type,
        slices=slices,
        abstained=evaluation.abstained,
        answerable=evaluation.answerable,
        conversation_id=record.conversation_id,
        failed_tools=record.failed_tools,
    )


def run_from_evaluations(name: str, items: Iterable[tuple[str, RagRecord, Evaluation]]) -> Run:
    """A run of ``(request id, record, evaluation)`` triples, in their order.

    The records hold the raw texts the judge saw, and the page embeds them as they are:
    redact them first if the page will leave where the texts may be read.
    """
    return Run(
        name=name,
        source="evaluations",
        requests=[request_from_evaluation(i, record, e) for i, record, e in items],
    )
