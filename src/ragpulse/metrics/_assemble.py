"""From what a judge found to its ``Evaluation``: each asked metric scored by its own module.

A judge finds the claims and what the asked metrics declare they read (``Findings``;
``findings_for`` says which), then calls ``assemble``. Here only what concerns the whole
request is settled: its status and overall explanation (an abstention, when a metric
reads answerability), the passages the answer used, the slices and the diagnosis. Every
score, explanation and abstention rule of a metric is its module's. The metrics are
never averaged into one number.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Sequence

from ragpulse.evaluation.diagnosis import diagnose
from ragpulse.evaluation.findings import ANSWERABILITY, Findings
from ragpulse.evaluation.provenance import without_unvouched
from ragpulse.evaluation.types import (
    AnnotatorKind,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Usage,
    Verdict,
)
from ragpulse.evaluation.vector import slices, used_contexts
from ragpulse.metrics import _registry
from ragpulse.metrics._shares import NO_CLAIMS_TEXT
from ragpulse.metrics._spec import ScoreInputs
from ragpulse.metrics.correctness import DEFAULT_CORRECTNESS_MODE

__all__ = ["apply_strict", "assemble"]

_NO_USAGE = Usage()


def _summary(claims: Sequence[ClaimVerdict]) -> str:
    counts = Counter(c.verdict for c in claims)
    summary = ", ".join(
        f"{counts[v]} {v.value.lower().replace('_', ' ')}" for v in Verdict if counts[v]
    )
    return f"{len(claims)} claim{'' if len(claims) == 1 else 's'}: {summary}"


def assemble(
    record: RagRecord,
    metrics: Collection[str],
    claims: Sequence[ClaimVerdict],
    found: Findings,
    *,
    judge: str,
    annotator_kind: AnnotatorKind,
    usage: Usage = _NO_USAGE,
    duration_ms: float = 0.0,
    correctness_mode: str = DEFAULT_CORRECTNESS_MODE,
    beta: float = 1.0,
) -> Evaluation:
    """The ``Evaluation`` of ``record``: the judged claims, the findings, each asked metric.

    A claim whose only evidence is history no tool span vouches for is read as NOT_FOUND
    (``ragpulse.evaluation.provenance``). Without claims the status is ``no_claims``; an
    abstention the contexts could answer is ``ok`` when a metric that reads answerability
    (groundedness) is asked. A metric whose module scores nothing for the record
    (correctness without a reference) is absent, never 0.
    """
    claims = without_unvouched(claims, record)
    abstained = bool(found.abstained) and not claims
    status = EvalStatus.OK if claims else EvalStatus.NO_CLAIMS
    explanation = _summary(claims) if claims else NO_CLAIMS_TEXT
    if abstained and ANSWERABILITY in _registry.findings_for(metrics):
        if found.answerable:
            status = EvalStatus.OK
            explanation = "the answer abstains though the contexts could answer"
        else:
            explanation = "the answer abstains and the contexts cannot answer"
    evaluation = Evaluation(
        status=status,
        metrics={},
        claims=claims,
        judge=judge,
        annotator_kind=annotator_kind,
        usage=usage,
        duration_ms=duration_ms,
        explanation=explanation,
        reference_claims=found.reference_verdicts,
        abstained=abstained,
        answerable=found.answerable,
        question_parts=found.question_parts,
        required_points=found.required_points,
        reference_support=found.reference_support or (),
    )
    found = dataclasses.replace(found, contexts=used_contexts(evaluation, record, found))
    evaluation = dataclasses.replace(evaluation, contexts=found.contexts)
    scored = ScoreInputs(evaluation, record, found, correctness_mode, beta)
    results: dict[str, MetricResult] = {}
    for name in metrics:
        metric = _registry.get(name)
        if metric is None or metric.score is None:
            continue  # a user's metric measures itself, after the judge
        result = metric.score(scored)
        if result is not None:
            results[name] = result
    evaluation = dataclasses.replace(evaluation, metrics=results)
    evaluation = dataclasses.replace(evaluation, slices=slices(evaluation, record))
    return diagnose(evaluation, record)


def apply_strict(evaluation: Evaluation) -> Evaluation:
    """``evaluation`` read in strict mode: each metric with a stricter reading re-scored.

    Faithfulness counts INFERRED claims as unfaithful; an evaluation with nothing to
    re-score comes back as it is.
    """
    results = dict(evaluation.metrics)
    changed = False
    for name, result in evaluation.metrics.items():
        metric = _registry.get(name)
        if metric is None or metric.strict is None:
            continue
        strict = metric.strict(result, evaluation)
        if strict is not result:
            results[name] = strict
            changed = True
    return dataclasses.replace(evaluation, metrics=results) if changed else evaluation
