"""The sink writes signals a judge's process made for it as they are, and never loses a span.

Signals made for this sink go onto the span unchanged (the duration brought up to
date when a fallback added the failed primary's time); signals made for another
sink cannot be written here (the claims they came from stayed in the judge's
process), so the span goes out with status ``error`` rather than wrong scores.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragpulse import errors, semconv
from ragpulse.evaluation.types import (
    FAITHFULNESS,
    Claim,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    MetricResult,
    RagRecord,
    Verdict,
)
from ragpulse.processor.held import Held
from ragpulse.processor.settle import EvaluationSink
from ragpulse.sampling.sampler import EvalSampler
from ragpulse.signals.emit import EmitOptions, Emitter, PipelineMetrics
from ragpulse.signals.make import PreparedEvaluation, make_signals


class Sink:
    """An ``EvaluationSink`` over in-memory span and log exporters, and a unit span to write."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        metrics = PipelineMetrics(MeterProvider(metric_readers=[InMemoryMetricReader()]))
        self.sink = EvaluationSink(
            SimpleSpanProcessor(self.spans),
            Emitter(EmitOptions(), metrics, logger_provider),
            EvalSampler(rate=1.0),
        )
        with TracerProvider().get_tracer("app").start_as_current_span("unit") as span:
            pass
        self.unit: ReadableSpan = span  # type: ignore[assignment]
        self.record = RagRecord(
            question="q", contexts=(), answer="a", name="bot", span_context=span.get_span_context()
        )

    def write(self, evaluation: Evaluation) -> ReadableSpan:
        held = Held(self.unit, time.monotonic(), time.monotonic() + 60, 0)
        self.sink.write(self.record, evaluation, held)
        (written,) = self.spans.get_finished_spans()
        return written


@pytest.fixture
def sink() -> Sink:
    return Sink()


def prepared(spec: int) -> PreparedEvaluation:
    claim = ClaimVerdict(Claim("a", 0, 1), Verdict.NOT_FOUND)
    evaluation = Evaluation(
        status=EvalStatus.OK,
        metrics={FAITHFULNESS: MetricResult(FAITHFULNESS, 0.0, "none supported")},
        claims=(claim,),
        judge="lexical",
        duration_ms=2.0,
    )
    exported, signals = make_signals(
        evaluation, name="bot", service=None, options=EmitOptions(), spec=spec
    )
    fields = {name: getattr(exported, name) for name in Evaluation.__dataclass_fields__}
    return PreparedEvaluation(**{**fields, "claims": ()}, signals=signals)


def test_signals_made_for_this_sink_go_onto_the_span_as_they_are(sink: Sink) -> None:
    evaluation = prepared(sink.sink.spec.serial)
    written = sink.write(evaluation)
    assert evaluation.signals is not None
    for key, value in evaluation.signals.span.items():
        assert written.attributes is not None and written.attributes[key] == value
    assert len(sink.logs.get_finished_logs()) == 1


def test_a_fallback_s_added_time_reaches_the_span_duration(sink: Sink) -> None:
    evaluation = replace(prepared(sink.sink.spec.serial), duration_ms=1502.0)
    written = sink.write(evaluation)
    assert written.attributes is not None
    assert written.attributes[semconv.EVAL_DURATION_MS] == 1502.0


def test_signals_made_for_another_sink_give_an_error_status_and_the_span_still_goes_out(
    sink: Sink,
) -> None:
    written = sink.write(prepared(sink.sink.spec.serial + 1000))
    assert written.attributes is not None
    assert written.attributes[semconv.EVAL_STATUS] == EvalStatus.ERROR.value
    assert written.attributes[semconv.EVAL_ERROR_TYPE] == errors.INVALID_RESULT
    assert written.context == sink.unit.context
