"""The whole vector: relevancy, completeness, citation, answerability, strict mode, slices.

The arithmetic is tested on plain verdicts; each rule of the definitions is then a
test of the offline judge (the LLM judge's are in tests/integration/test_openai_vector.py).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.cases import worked_example
from tests.unit.test_emit import Signals

import ragpulse
from ragpulse import semconv
from ragpulse.capture._content import ContentPolicy
from ragpulse.evaluation.findings import Findings
from ragpulse.evaluation.types import (
    CITATION,
    COMPLETENESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    RELEVANCY,
    Claim,
    ClaimVerdict,
    Context,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Verdict,
)
from ragpulse.evaluation.vector import citation_markers, question_parts
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.metrics import METRICS
from ragpulse.metrics._assemble import apply_strict, assemble
from ragpulse.metrics.faithfulness import strict_faithfulness
from ragpulse.processor.span_processor import EvaluatingSpanProcessor
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.settings.options import EvaluationOptions
from ragpulse.signals.privacy import export_evaluation

LEAFLET = worked_example.CONTEXTS


def _judge(record: RagRecord) -> Evaluation:
    return LexicalJudge().evaluate_sync(record, METRICS)


def _verdict(verdict: Verdict, **fields: Any) -> ClaimVerdict:
    return ClaimVerdict(Claim("a claim"), verdict, **fields)


def _scored(
    metric: str,
    found: Findings,
    claims: Collection[ClaimVerdict] = (),
    **record: Any,
) -> float | None:
    """The score ``metric``'s module gives what a judge found."""
    rag = RagRecord(record.pop("question", "Q?"), (Context("a passage"),), "an answer", **record)
    evaluation = assemble(rag, (metric,), tuple(claims), found, judge="j", annotator_kind="CODE")
    return evaluation.score(metric)


# --- arithmetic --------------------------------------------------------------------------


def test_citation_markers_are_one_based_and_may_cite_several_passages() -> None:
    answer = "A [1]. B [1][3]. C [1, 3]."
    cited = [numbers for _, numbers in citation_markers(answer)]
    assert cited == [(0,), (0,), (2,), (0, 2)]
    assert [answer[at] for at, _ in citation_markers(answer)] == ["["] * 4


def test_a_question_asking_two_things_has_two_parts_and_a_list_stays_one() -> None:
    assert question_parts("What are the side effects of X, and what dose should I take?") == (
        "What are the side effects of X",
        "what dose should I take?",
    )
    assert question_parts("Does it cause nausea, headache and dizziness?") == (
        "Does it cause nausea, headache and dizziness?",
    )
    assert question_parts(None) == ()


def test_completeness_counts_rubric_points_else_reference_claims_else_is_undefined() -> None:
    points = (_verdict(Verdict.SUPPORTED), _verdict(Verdict.SUPPORTED), _verdict(Verdict.NOT_FOUND))
    rubric = ("a", "b", "c")
    found = Findings(required_points=points)
    assert _scored(COMPLETENESS, found, rubric=rubric) == pytest.approx(2 / 3)
    assert _scored(COMPLETENESS, Findings(recall_hits=(True, False)), reference="R.") == 0.5
    assert _scored(COMPLETENESS, Findings()) is None


def test_citation_is_undefined_when_nothing_is_cited() -> None:
    assert _scored(CITATION, Findings(), [_verdict(Verdict.SUPPORTED)]) is None
    cited = [
        _verdict(Verdict.SUPPORTED, cited=(0,), citation_holds=True),
        _verdict(Verdict.SUPPORTED, cited=(1,), citation_holds=False),
        _verdict(Verdict.SUPPORTED),
    ]
    assert _scored(CITATION, Findings(), cited) == 0.5


def test_strict_mode_counts_inferred_claims_as_unfaithful() -> None:
    claims = (_verdict(Verdict.SUPPORTED), _verdict(Verdict.INFERRED))
    assert strict_faithfulness(claims) == 0.5
    lenient = Evaluation(
        EvalStatus.OK, {FAITHFULNESS: MetricResult(FAITHFULNESS, 1.0, "2 of 2")}, claims=claims
    )
    strict = apply_strict(lenient)
    assert strict.score(FAITHFULNESS) == 0.5
    assert apply_strict(strict).score(FAITHFULNESS) == 0.5


# --- the offline judge, rule by rule ----------------------------------------------------


def test_worked_example_gives_the_five_scores_of_the_definitions() -> None:
    evaluation = _judge(worked_example.record())
    for metric, expected in worked_example.EXPECTED.items():
        assert evaluation.score(metric) == pytest.approx(expected), metric
    assert evaluation.status is EvalStatus.OK


def test_worked_example_names_the_omitted_part_and_the_invented_claim() -> None:
    evaluation = _judge(worked_example.record())
    missing = evaluation.metrics[COMPLETENESS].explanation or ""
    assert "frequency: once daily" in missing
    assert "Hair loss" in (evaluation.metrics[GROUNDEDNESS].explanation or "")


def test_an_answer_faithful_to_the_context_but_about_something_else_is_not_relevant() -> None:
    record = RagRecord(
        "What dose of Lumarex should I take?",
        LEAFLET,
        "Lumarex can cause nausea, headache and dizziness.",
    )
    evaluation = _judge(record)
    assert evaluation.score(FAITHFULNESS) == 1.0
    assert evaluation.score(RELEVANCY) == 0.0


def test_an_answer_to_one_part_of_a_two_part_question_is_half_relevant() -> None:
    record = RagRecord(worked_example.QUESTION, LEAFLET, "The recommended dose is 200 mg.")
    assert _judge(record).score(RELEVANCY) == 0.5


def test_an_omitted_required_point_lowers_completeness() -> None:
    record = RagRecord(
        worked_example.QUESTION,
        LEAFLET,
        "Lumarex can cause nausea, headache and dizziness. The recommended dose is 200 mg, "
        "taken once daily.",
        rubric=worked_example.RUBRIC,
    )
    assert _judge(record).score(COMPLETENESS) == 1.0
    omitted = RagRecord(
        worked_example.QUESTION,
        LEAFLET,
        "Lumarex can cause nausea, headache and dizziness.",
        rubric=worked_example.RUBRIC,
    )
    assert _judge(omitted).score(COMPLETENESS) == pytest.approx(1 / 3)


def test_completeness_without_rubric_uses_the_reference_claims() -> None:
    record = RagRecord(
        worked_example.QUESTION,
        LEAFLET,
        "The recommended dose is 200 mg.",
        reference="The recommended dose is 200 mg. Lumarex can cause dizziness.",
    )
    assert _judge(record).score(COMPLETENESS) == 0.5


def test_completeness_asked_alone_names_the_missing_reference_claim_as_exported() -> None:
    record = RagRecord(
        worked_example.QUESTION,
        LEAFLET,
        "The recommended dose is 200 mg.",
        reference="The recommended dose is 200 mg. Lumarex can cause dizziness.",
    )
    evaluation = LexicalJudge().evaluate_sync(record, (COMPLETENESS,))
    withheld = export_evaluation(evaluation, ContentPolicy(capture_content=False))
    assert withheld.metrics[COMPLETENESS].explanation == (
        "1 of 2 reference claims covered (no rubric); failing claims: "
        "#2 NOT_FOUND (reference chars 32-60)"
    )


def test_completeness_without_rubric_or_reference_is_undefined() -> None:
    evaluation = _judge(RagRecord(worked_example.QUESTION, LEAFLET, "The dose is 200 mg."))
    assert evaluation.score(COMPLETENESS) is None
    assert evaluation.metrics[COMPLETENESS].status is EvalStatus.NO_CLAIMS


def test_a_citation_to_a_passage_that_does_not_state_the_claim_does_not_hold() -> None:
    # Plain groundedness sees the claim supported by passage 1 and cannot see the [2].
    record = RagRecord(
        worked_example.QUESTION, LEAFLET, "Lumarex can cause dizziness [2]. The dose is 200 mg [2]."
    )
    evaluation = _judge(record)
    assert evaluation.score(GROUNDEDNESS) == 1.0
    assert evaluation.score(CITATION) == 0.5
    wrong, right = evaluation.claims
    assert (wrong.cited, wrong.citation_holds) == ((1,), False)
    assert (right.cited, right.citation_holds) == ((1,), True)


def test_a_citation_past_the_last_passage_does_not_hold() -> None:
    evaluation = _judge(RagRecord(None, LEAFLET, "Lumarex can cause dizziness [7]."))
    assert evaluation.claims[0].cited == (6,)
    assert evaluation.claims[0].citation_holds is False


def test_a_claim_citing_two_passages_holds_when_one_of_them_states_it() -> None:
    evaluation = _judge(RagRecord(None, LEAFLET, "Lumarex can cause dizziness [1, 2]."))
    assert evaluation.claims[0].cited == (0, 1)
    assert evaluation.score(CITATION) == 1.0


def test_an_answer_without_markers_has_undefined_citation() -> None:
    evaluation = _judge(RagRecord(None, LEAFLET, "Lumarex can cause dizziness."))
    assert evaluation.score(CITATION) is None
    assert evaluation.claims[0].citation_holds is None


def test_an_abstention_the_contexts_could_have_answered_scores_groundedness_zero() -> None:
    evaluation = _judge(RagRecord("What dose of Lumarex should I take?", LEAFLET, "I don't know."))
    assert evaluation.score(GROUNDEDNESS) == 0.0
    assert evaluation.abstained is True
    assert evaluation.answerable is True
    assert evaluation.score(FAITHFULNESS) is None


def test_an_abstention_the_contexts_could_not_answer_is_no_claim_at_all() -> None:
    contexts = (Context("Lumarex is made in Spain and sold in blue boxes."),)
    evaluation = _judge(
        RagRecord("Is Lumarex safe for children under twelve?", contexts, "I'm not sure.")
    )
    assert evaluation.score(GROUNDEDNESS) is None
    assert evaluation.metrics[GROUNDEDNESS].status is EvalStatus.NO_CLAIMS
    assert evaluation.status is EvalStatus.NO_CLAIMS
    assert (evaluation.abstained, evaluation.answerable) == (True, False)


def test_an_answer_with_a_claim_is_not_an_abstention() -> None:
    evaluation = _judge(
        RagRecord(
            worked_example.QUESTION,
            LEAFLET,
            "The recommended dose is 200 mg. I don't know the side effects.",
        )
    )
    assert evaluation.abstained is False
    assert evaluation.score(GROUNDEDNESS) == 1.0


def test_slices_say_multi_source_multi_part_and_cited() -> None:
    evaluation = _judge(worked_example.record())
    assert evaluation.slices == {
        "sources": "multi",
        "question": "multi_part",
        "abstained": "false",
        "cited": "true",
    }
    single = _judge(RagRecord("What dose should I take?", LEAFLET, "The dose is 200 mg."))
    assert single.slices["sources"] == "single"
    assert single.slices["question"] == "single_part"
    assert single.slices["cited"] == "false"


def test_metrics_not_asked_are_not_computed() -> None:
    evaluation = LexicalJudge().evaluate_sync(worked_example.record(), (FAITHFULNESS,))
    assert set(evaluation.metrics) == {FAITHFULNESS}


# --- the user surface -------------------------------------------------------------------


def _points(question: str | None) -> list[str]:
    return list(worked_example.RUBRIC)


@ragpulse.retrieval
def _search(question: str) -> list[Context]:
    return list(worked_example.CONTEXTS)


@ragpulse.rag(name="leaflet-bot", rubric=_points)
def _handle(question: str) -> str:
    _search(question)
    return worked_example.ANSWER


@ragpulse.rag(name="leaflet-bot-recorded")
def _handle_recorded(question: str) -> str:
    _search(question)
    ragpulse.record_rubric(["dose: 200 mg"])
    return worked_example.ANSWER


class _InferringJudge:
    """A judge that finds one claim stated and one only inferred."""

    name = "inferring"
    annotator_kind = "CODE"

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        claims = [
            ClaimVerdict(Claim("The store opens at 9am."), Verdict.SUPPORTED),
            ClaimVerdict(Claim("It is open for eight hours."), Verdict.INFERRED),
        ]
        return assemble(record, metrics, claims, Findings(), judge=self.name, annotator_kind="CODE")


def _pipeline(
    route_spans: Any, signals: Signals, *, strict: bool = False, judge: Any = None
) -> tuple[EvaluatingSpanProcessor, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(memory),
        judge=judge or LexicalJudge(),
        sampler=EvalSampler(rate=1.0),
        metrics=METRICS,
        meter_provider=signals.meter_provider,
        logger_provider=signals.logger_provider,
        evaluation=EvaluationOptions(strict=strict),
    )
    route_spans(processor)
    return processor, memory


def _unit(memory: InMemorySpanExporter, name: str) -> dict[str, Any]:
    (unit,) = [s for s in memory.get_finished_spans() if s.name == name]
    return dict(unit.attributes or {})


def test_rag_rubric_scores_completeness_and_writes_the_vector_on_the_span(
    route_spans: Any,
) -> None:
    processor, memory = _pipeline(route_spans, Signals())
    _handle(worked_example.QUESTION)
    assert processor.force_flush(20_000)
    attributes = _unit(memory, "leaflet-bot")
    assert attributes[semconv.eval_score(RELEVANCY)] == 1.0
    assert attributes[semconv.eval_score(COMPLETENESS)] == pytest.approx(2 / 3)
    assert attributes[semconv.eval_score(CITATION)] == 0.75
    assert attributes[semconv.EVAL_ABSTAINED] is False
    assert attributes[semconv.EVAL_ANSWERABLE] is True
    assert attributes[semconv.EVAL_SLICE_SOURCES] == "multi"
    assert attributes[semconv.EVAL_SLICE_QUESTION] == "multi_part"
    claims = json.loads(str(attributes[semconv.EVAL_CLAIMS]))
    assert [c["cited"] for c in claims] == [[0], [0], [1], [1]]
    assert [c["citation_holds"] for c in claims] == [True, True, False, True]


def test_no_score_averages_the_metrics(route_spans: Any) -> None:
    processor, memory = _pipeline(route_spans, Signals())
    _handle(worked_example.QUESTION)
    assert processor.force_flush(20_000)
    scores = {k for k in _unit(memory, "leaflet-bot") if k.endswith(".score")}
    # One score per metric of the vector, and nothing that combines them.
    # No reference here: correctness and context recall are undefined, so absent.
    undefined = ("correctness", "context_recall")
    assert scores == {semconv.eval_score(m) for m in METRICS if m not in undefined}


def test_histogram_points_and_log_events_carry_the_slices(route_spans: Any) -> None:
    signals = Signals()
    processor, _ = _pipeline(route_spans, signals)
    _handle(worked_example.QUESTION)
    assert processor.force_flush(20_000)
    points = {str(p.attributes[semconv.GEN_AI_EVALUATION_NAME]): p for p in signals.score_points()}
    assert {RELEVANCY, COMPLETENESS, CITATION} <= set(points)
    for point in points.values():
        assert point.attributes[semconv.EVAL_SLICE_CITED] == "true"
        assert point.attributes[semconv.EVAL_SLICE_SOURCES] == "multi"
    events = signals.events()
    names = {str(e.log_record.attributes[semconv.GEN_AI_EVALUATION_NAME]) for e in events}
    assert {RELEVANCY, COMPLETENESS, CITATION} <= names
    assert all(e.log_record.attributes[semconv.EVAL_ABSTAINED] is False for e in events)


def test_record_rubric_sets_the_required_points(route_spans: Any) -> None:
    processor, memory = _pipeline(route_spans, Signals())
    _handle_recorded(worked_example.QUESTION)
    assert processor.force_flush(20_000)
    assert _unit(memory, "leaflet-bot-recorded")[semconv.eval_score(COMPLETENESS)] == 1.0


def test_strict_mode_on_the_pipeline_counts_inferred_claims_as_unfaithful(
    route_spans: Any,
) -> None:
    processor, memory = _pipeline(route_spans, Signals(), strict=True, judge=_InferringJudge())
    _handle(worked_example.QUESTION)
    assert processor.force_flush(20_000)
    attributes = _unit(memory, "leaflet-bot")
    assert attributes[semconv.eval_score(FAITHFULNESS)] == 0.5
    assert "strict" in str(attributes[semconv.eval_explanation(FAITHFULNESS)])


def test_phoenix_gets_one_annotation_per_metric_of_the_vector_with_its_slices() -> None:
    from opentelemetry.trace import SpanContext, TraceFlags

    from ragpulse.outputs.phoenix import annotations_for
    from ragpulse.signals.emit import DEFAULT_THRESHOLDS
    from ragpulse.signals.privacy import export_evaluation

    context = SpanContext(0x1, 0x2, is_remote=False, trace_flags=TraceFlags(1))
    record = replace(worked_example.record(), span_context=context)
    evaluation = export_evaluation(_judge(record))
    items = {item["name"]: item for item in annotations_for(record, evaluation, DEFAULT_THRESHOLDS)}
    context = {"context_relevance", "context_precision", "context_recall", "context_utilisation"}
    assert set(items) == set(worked_example.EXPECTED) | {CITATION} | context
    assert items[COMPLETENESS]["result"]["label"] == "fail"
    assert "frequency: once daily" in items[COMPLETENESS]["result"]["explanation"]
    assert items[RELEVANCY]["result"]["label"] == "pass"
    assert items[CITATION]["metadata"]["slice.cited"] == "true"
    assert items[CITATION]["metadata"]["abstained"] is False


def test_content_off_exports_no_rubric_or_question_text_in_the_explanations() -> None:
    from ragpulse.capture._content import ContentPolicy
    from ragpulse.signals.privacy import export_evaluation

    evaluation = export_evaluation(
        _judge(worked_example.record()), ContentPolicy(capture_content=False)
    )
    for metric in (RELEVANCY, COMPLETENESS, CITATION):
        text = evaluation.metrics[metric].explanation or ""
        assert "frequency" not in text and "Lumarex" not in text and "Hair" not in text, text
    assert "of 3 required points covered" in (evaluation.metrics[COMPLETENESS].explanation or "")
    assert all(p.claim.text.startswith("[withheld") for p in evaluation.required_points)


def test_settings_take_the_vector_from_keywords_and_environment() -> None:
    from ragpulse.settings import Settings

    settings = Settings.load({"metrics": METRICS, "strict": True}, environ={})
    assert settings.metrics == METRICS
    assert settings.strict is True
    from_env = Settings.load(
        environ={"RAGPULSE_METRICS": "groundedness, relevancy", "RAGPULSE_STRICT": "true"}
    )
    assert from_env.metrics == (GROUNDEDNESS, RELEVANCY)
    assert from_env.strict is True
    rejected = Settings.load(environ={"RAGPULSE_METRICS": "groundedness,average"})
    assert "RAGPULSE_METRICS" in rejected.rejected


def test_a_citation_marker_is_not_a_number_the_claim_states() -> None:
    # "[3]" cites the third passage; the claim does not say "3" (no passage has to).
    contexts = (Context("Refunds take 5 days."), Context("Shipping is free."), LEAFLET[1])
    evaluation = _judge(RagRecord(None, contexts, "The recommended dose is 200 mg [3]."))
    (claim,) = evaluation.claims
    assert claim.verdict is Verdict.SUPPORTED
    assert claim.citation_holds is True


def test_a_rubric_callable_that_raises_never_reaches_the_request(route_spans: Any) -> None:
    def broken(question: str | None) -> list[str]:
        raise RuntimeError("rubric store down")

    @ragpulse.rag(name="broken-rubric", rubric=broken)
    def bot(question: str) -> str:
        ragpulse.record_contexts(list(LEAFLET))
        return "The recommended dose is 200 mg."

    processor, memory = _pipeline(route_spans, Signals())
    assert bot("What dose should I take?") == "The recommended dose is 200 mg."
    assert processor.force_flush(20_000)
    attributes = _unit(memory, "broken-rubric")
    # Scored without a rubric: completeness undefined, the rest as usual.
    assert semconv.eval_score(COMPLETENESS) not in attributes
    assert attributes[semconv.eval_score(GROUNDEDNESS)] == 1.0


def test_record_rubric_takes_one_text_as_one_point(route_spans: Any) -> None:
    @ragpulse.rag(name="one-point")
    def bot(question: str) -> str:
        ragpulse.record_contexts(list(LEAFLET))
        ragpulse.record_rubric("dose: 200 mg")
        return "The recommended dose is 200 mg."

    processor, memory = _pipeline(route_spans, Signals())
    bot("What dose should I take?")
    assert processor.force_flush(20_000)
    assert _unit(memory, "one-point")[semconv.eval_score(COMPLETENESS)] == 1.0


def test_serve_takes_every_metric_of_the_vector() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    assert "relevancy, completeness, citation" in flat
