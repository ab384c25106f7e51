"""The ``OTEL_*`` variables the SDK reads are settings rows: checked once, a bad one replaced
by its default, and handed to the SDK's constructors, so the SDK reads none of them."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, InMemoryLogRecordExporter
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from ragpulse import settings as settings_module
from ragpulse.outputs.sdk import batch_options, exemplar_filter, log_record_limits, sampler
from ragpulse.outputs.sdk import span_limits as limits_of
from ragpulse.settings import SOURCES, Settings

OTEL_VARIABLES = sorted(s.env for s in SOURCES.values() if s.env and s.env.startswith("OTEL_"))
BAD_VALUES = ["0", "-3", "1" * 21, "abc", "1e400", "nan"]


def build_every_sdk_part(settings: Settings) -> None:
    """What configure() builds from the SDK with these settings, in its order: the meter
    provider first, given to the rest (so none asks the API for the global one)."""
    meters = MeterProvider(exemplar_filter=exemplar_filter(settings), shutdown_on_exit=False)
    spans = BatchSpanProcessor(
        InMemorySpanExporter(), meter_provider=meters, **batch_options(settings, "bsp")
    )
    logs = BatchLogRecordProcessor(
        InMemoryLogRecordExporter(), meter_provider=meters, **batch_options(settings, "blrp")
    )
    tracer_provider = TracerProvider(
        sampler=sampler(settings),
        span_limits=limits_of(settings),
        shutdown_on_exit=False,
        meter_provider=meters,
    )
    logger_provider = LoggerProvider(
        log_record_limits=log_record_limits(settings), shutdown_on_exit=False, meter_provider=meters
    )
    for part in (spans, logs, tracer_provider, logger_provider, meters):
        part.shutdown()


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("variable", OTEL_VARIABLES)
def test_a_bad_otel_value_falls_back_and_the_sdk_parts_build_whatever_the_sdk_would_say(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)  # where the SDK would read it
    settings = Settings.load()
    name = next(n for n, s in SOURCES.items() if s.env == variable)
    if variable in settings.rejected:
        assert getattr(settings, name) == getattr(Settings(), name)
    build_every_sdk_part(settings)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
        ("OTEL_BLRP_MAX_QUEUE_SIZE", "-3"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "1" * 21),
    ],
)
def test_a_queue_size_the_sdk_would_raise_on_is_one_warning_naming_it_and_its_default(
    variable: str, value: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings_module, "_reported", set())  # as in a fresh process
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        settings = Settings.load(environ={variable: value})
    warnings = [r.getMessage() for r in caplog.records if variable in r.getMessage()]
    assert len(warnings) == 1
    assert f"{variable}='{value}'" in warnings[0]
    assert "using the default (65536)" in warnings[0]
    assert batch_options(settings, variable.split("_")[1].lower())["max_queue_size"] == 65_536


def test_valid_batch_processor_variables_reach_the_processors() -> None:
    settings = Settings.load(
        environ={
            "OTEL_BSP_MAX_QUEUE_SIZE": "100",
            "OTEL_BSP_SCHEDULE_DELAY": "250",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1000",  # larger than the queue: the queue's
            "OTEL_BLRP_EXPORT_TIMEOUT": "2000",
        }
    )
    assert batch_options(settings, "bsp") == {
        "max_queue_size": 100,
        "schedule_delay_millis": 250.0,
        "max_export_batch_size": 100,
        "export_timeout_millis": 30_000.0,
    }
    assert batch_options(settings, "blrp")["export_timeout_millis"] == 2000.0


def test_specific_limits_win_over_the_general_ones_and_unset_means_no_limit() -> None:
    settings = Settings.load(
        environ={
            "OTEL_ATTRIBUTE_COUNT_LIMIT": "7",
            "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "3",
            "OTEL_SPAN_EVENT_COUNT_LIMIT": "5",
            "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "unset",
            "OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT": "64",
        }
    )
    span = limits_of(settings)
    assert (span.max_span_attributes, span.max_event_attributes, span.max_link_attributes) == (
        7,
        3,
        7,
    )
    assert (span.max_events, span.max_links) == (5, 128)
    assert span.max_span_attribute_length is None
    logs = log_record_limits(settings)
    assert (logs.max_log_record_attributes, logs.max_log_record_attribute_length) == (7, 64)


def test_the_sampler_and_exemplar_filter_variables_name_the_sdk_parts() -> None:
    settings = Settings.load(
        environ={
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_METRICS_EXEMPLAR_FILTER": "always_off",
        }
    )
    chosen = sampler(settings)
    assert isinstance(chosen, ParentBased)
    assert isinstance(chosen._root, TraceIdRatioBased)
    assert chosen._root.rate == 0.25
    assert isinstance(exemplar_filter(settings), AlwaysOffExemplarFilter)


def test_a_sampler_ratio_outside_zero_to_one_is_refused_and_the_default_used() -> None:
    settings = Settings.load(environ={"OTEL_TRACES_SAMPLER_ARG": "1.5"})
    assert settings.traces_sampler_arg == 1.0
    assert "OTEL_TRACES_SAMPLER_ARG" in settings.rejected
