"""Model families by name: a judge of the generator's own family is told apart."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragpulse import semconv
from ragpulse.adapters._common import generator_models
from ragpulse.evaluation.families import model_family, same_family
from ragpulse.evaluation.types import Context, Evaluation, RagRecord
from ragpulse.judges.base import with_judge_model


@pytest.mark.parametrize(
    ("judge", "generator"),
    [
        ("gpt-4o", "gpt-4o-mini"),
        ("openai/gpt-4.1", "gpt-4o-2024-08-06"),
        ("o3-mini", "gpt-4o"),
        ("meta-llama/Llama-3.1-70B-Instruct", "llama3:8b"),
        ("meta.llama3-70b-instruct-v1:0", "Llama-3-8B"),
        ("claude-3-5-sonnet-20240620", "us.anthropic.claude-3-haiku-20240307-v1:0"),
        ("models/gemini-1.5-pro", "gemini-2.0-flash"),
        ("mistral-large-latest", "mixtral-8x7b"),
        ("ft:gpt-4o-mini:acme::abc123", "gpt-4o"),
    ],
)
def test_two_models_of_one_family_are_the_same_family(judge: str, generator: str) -> None:
    assert same_family(judge, generator) is True


@pytest.mark.parametrize(
    ("judge", "generator"),
    [("gpt-4o", "claude-3-5-sonnet"), ("Llama-3-70B", "qwen2.5-72b"), ("gemma-2-9b", "gemini-pro")],
)
def test_models_of_two_families_are_not(judge: str, generator: str) -> None:
    assert same_family(judge, generator) is False


def test_an_unknown_or_missing_model_has_no_family() -> None:
    assert model_family("cross-encoder/nli-deberta-v3-base") is None
    assert model_family("") is None and model_family(None) is None
    assert same_family("cross-encoder/nli-deberta-v3-base", "gpt-4o") is None
    assert same_family("gpt-4o", None) is None


class Judging:
    name = "openai:gpt-4o"
    model_name = "gpt-4o"


def test_an_evaluation_names_the_judge_model_and_marks_the_generators_family() -> None:
    record = RagRecord(
        "Q?", (Context("x"),), "y", attributes={semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini"}
    )
    marked = with_judge_model(
        Evaluation.failed("x", judge="openai:gpt-4o", annotator_kind="LLM"), Judging(), record
    )
    assert (marked.judge_model, marked.same_family) == ("gpt-4o", True)
    # The response's model (what answered) wins over the request's.
    answered = RagRecord(
        "Q?",
        (Context("x"),),
        "y",
        attributes={
            semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
            semconv.GEN_AI_RESPONSE_MODEL: "claude-3-haiku",
        },
    )
    other = with_judge_model(
        Evaluation.failed("x", judge="openai:gpt-4o", annotator_kind="LLM"), Judging(), answered
    )
    assert other.same_family is False
    # A fallback judge's evaluation is not given the primary's model.
    fallback = with_judge_model(
        Evaluation.failed("x", judge="lexical", annotator_kind="CODE"), Judging(), record
    )
    assert (fallback.judge_model, fallback.same_family) == (None, None)


def test_the_adapters_read_the_generators_model_from_the_last_llm_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("plan") as first:
        first.set_attribute(semconv.GEN_AI_REQUEST_MODEL, "gpt-4o-mini")
    with tracer.start_as_current_span("answer") as last:
        last.set_attribute(semconv.OI_LLM_MODEL_NAME, "claude-3-5-sonnet")
    spans = exporter.get_finished_spans()
    assert generator_models(spans) == {semconv.GEN_AI_REQUEST_MODEL: "claude-3-5-sonnet"}
    assert generator_models([spans[0]]) == {semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini"}
    assert generator_models([]) == {}
