"""The attributes a user names for the score and label metrics: read from the unit, bounded in
combinations, overflowing as the OpenTelemetry SDK does while the alerts' own attributes stay.
Recorded through the real SDK (``MeterProvider`` with an in-memory reader)."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from ragpulse import semconv
from ragpulse.evaluation.types import Context, EvalStatus, Evaluation, MetricResult, RagRecord
from ragpulse.settings import Settings
from ragpulse.signals.dimensions import with_unit_attributes
from ragpulse.signals.emit import EmitOptions, Emitter, PipelineMetrics

NAMES = (semconv.GEN_AI_REQUEST_MODEL, "service.version")


def _emit(reader: InMemoryMetricReader, options: EmitOptions, models: list[str]) -> None:
    emitter = Emitter(options, PipelineMetrics(MeterProvider(metric_readers=[reader])))
    for model in models:
        record = RagRecord(
            question="q?",
            contexts=(Context("c."),),
            answer="a.",
            name="handle",
            attributes={semconv.GEN_AI_REQUEST_MODEL: model, "service.version": "2.1"},
        )
        evaluation = Evaluation(
            status=EvalStatus.OK,
            metrics={"faithfulness": MetricResult("faithfulness", 0.2, "")},
            judge="lexical",
        )
        emitter.emit(record, evaluation, None)


def _points(reader: InMemoryMetricReader, name: str) -> list[dict[str, Any]]:
    data = reader.get_metrics_data()
    return [
        dict(point.attributes or {})
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def test_named_attributes_reach_the_label_counter_and_the_score_histogram() -> None:
    reader = InMemoryMetricReader()
    _emit(reader, EmitOptions(service_name="bot", metric_attributes=NAMES), ["m-1"])
    for name in (semconv.EVALUATION_LABELS_METRIC, semconv.EVALUATION_SCORE_METRIC):
        points = _points(reader, name)
        assert points, name
        for point in points:
            assert point[semconv.GEN_AI_REQUEST_MODEL] == "m-1"
            assert point["service.version"] == "2.1"
            assert point[semconv.GEN_AI_EVALUATION_NAME] == "faithfulness"


def test_without_named_attributes_the_points_carry_none_of_them() -> None:
    reader = InMemoryMetricReader()
    _emit(reader, EmitOptions(service_name="bot"), ["m-1"])
    for point in _points(reader, semconv.EVALUATION_LABELS_METRIC):
        assert semconv.GEN_AI_REQUEST_MODEL not in point


def test_combinations_past_the_limit_overflow_and_keep_the_alerts_attributes() -> None:
    reader = InMemoryMetricReader()
    options = EmitOptions(service_name="bot", metric_attributes=NAMES, metric_attributes_limit=2)
    _emit(reader, options, ["m-1", "m-2", "m-3", "m-4", "m-1"])
    fails = [
        p
        for p in _points(reader, semconv.EVALUATION_LABELS_METRIC)
        if p[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == semconv.LABEL_FAIL
    ]
    models = {p.get(semconv.GEN_AI_REQUEST_MODEL) for p in fails}
    assert models == {"m-1", "m-2", None}
    (overflow,) = [p for p in fails if semconv.OTEL_METRIC_OVERFLOW in p]
    assert overflow[semconv.OTEL_METRIC_OVERFLOW] is True
    assert "service.version" not in overflow
    # What the alerts group by is still there: the service, the metric, the label.
    assert overflow[semconv.ATTR_SERVICE_NAME] == "bot"
    assert overflow[semconv.GEN_AI_EVALUATION_NAME] == "faithfulness"


def test_the_unit_span_and_its_resource_supply_the_attributes_the_record_lacks() -> None:
    context = SpanContext(1, 2, is_remote=False, trace_flags=TraceFlags(1))
    span = ReadableSpan(
        name="handle",
        context=context,
        resource=Resource({"service.version": "2.1", "service.name": "bot"}),
        attributes={"app.tenant.tier": "gold"},
        start_time=time.time_ns(),
        end_time=time.time_ns(),
    )
    record = RagRecord(question="q?", contexts=(), answer="a.", attributes={"x": 1})
    names = ("service.version", "app.tenant.tier", "absent")
    read = with_unit_attributes(record, span, names)
    assert read.attributes == {"x": 1, "service.version": "2.1", "app.tenant.tier": "gold"}


def test_the_settings_read_the_attributes_and_their_limit_from_the_environment() -> None:
    settings = Settings.load(
        environ={
            "RAGPULSE_METRIC_ATTRIBUTES": "service.version, gen_ai.request.model",
            "RAGPULSE_METRIC_ATTRIBUTES_LIMIT": "20",
        }
    )
    assert settings.metric_attributes == ("service.version", "gen_ai.request.model")
    assert settings.metric_attributes_limit == 20
