"""``Settings``: every value read once, checked, and never raised into the application."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from ragpulse.capture import ContentPolicy
from ragpulse.settings import Settings


def test_bad_prometheus_port_is_logged_with_name_and_value_and_replaced_by_the_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        settings = Settings.load(environ={"RAGPULSE_PROMETHEUS_PORT": "9464x"})
    assert settings.prometheus_port is None
    assert "RAGPULSE_PROMETHEUS_PORT" in settings.rejected
    assert "RAGPULSE_PROMETHEUS_PORT='9464x'" in caplog.text


def test_correctness_mode_defaults_to_agreement_and_a_bad_one_is_logged_and_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert Settings.load(environ={}).correctness_mode == "agreement"
    assert Settings.load({"correctness_mode": "recall"}, environ={}).correctness_mode == "recall"
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        from_env = Settings.load(environ={"RAGPULSE_CORRECTNESS_MODE": "accuracy"})
        from_keyword = Settings.load({"correctness_mode": "fuzzy"}, environ={})
    assert from_env.correctness_mode == from_keyword.correctness_mode == "agreement"
    assert "RAGPULSE_CORRECTNESS_MODE='accuracy'" in caplog.text
    assert "correctness_mode='fuzzy'" in caplog.text
    assert "agreement, precision, recall, f1" in caplog.text


def test_a_bad_value_is_logged_once_however_often_settings_are_loaded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        for _ in range(3):
            Settings.load(environ={"RAGPULSE_EVAL_CONCURRENCY": "many-once"})
    assert caplog.text.count("RAGPULSE_EVAL_CONCURRENCY") == 1


@pytest.mark.parametrize(
    ("variable", "text", "name", "value"),
    [
        ("RAGPULSE_EVALUATE", "false", "evaluate", False),
        ("RAGPULSE_OUTPUT_FILE", "out/spans.jsonl", "output_file", Path("out/spans.jsonl")),
        ("RAGPULSE_PROMETHEUS_PORT", "9464", "prometheus_port", 9464),
        ("RAGPULSE_PROMETHEUS_HOST", "0.0.0.0", "prometheus_host", "0.0.0.0"),
        ("RAGPULSE_SAMPLE_RATE", "0.25", "sample_rate", 0.25),
        ("RAGPULSE_MAX_EVALUATIONS_PER_MINUTE", "120", "max_evaluations_per_minute", 120.0),
        ("RAGPULSE_MAX_JUDGE_TOKENS_PER_HOUR", "5e5", "max_judge_tokens_per_hour", 500000.0),
        ("RAGPULSE_CAPTURE_CONTENT", "off", "capture_content", False),
        ("RAGPULSE_MAX_TEXT_BYTES", "4096", "max_text_bytes", 4096),
        ("RAGPULSE_MAX_DOCUMENTS_BYTES", "1000", "max_documents_bytes", 1000),
        ("RAGPULSE_MAX_SPAN_BYTES", "65536", "max_span_bytes", 65536),
        ("RAGPULSE_MAX_DOCUMENTS", "5", "max_documents", 5),
        (
            "RAGPULSE_CAPTURE_CONVENTIONS",
            "genai, OpenInference",
            "capture_conventions",
            ("genai", "openinference"),
        ),
        ("RAGPULSE_MAX_RECORD_CHARS", "100000", "max_record_chars", 100000),
        ("RAGPULSE_HOLD_TIMEOUT", "90", "hold_timeout", 90.0),
        ("RAGPULSE_EVAL_TIMEOUT", "2.5", "evaluation_timeout", 2.5),
        ("RAGPULSE_EVAL_CONCURRENCY", "8", "concurrency", 8),
        ("RAGPULSE_JUDGE_NICE", "5", "judge_nice", 5),
        ("RAGPULSE_MAX_QUEUE_SIZE", "50", "max_queue_size", 50),
        ("RAGPULSE_SHUTDOWN_TIMEOUT", "3", "shutdown_timeout", 3.0),
        ("RAGPULSE_HANDLE_SIGTERM", "1", "handle_sigterm", True),
        ("RAGPULSE_CORRECTNESS_MODE", " F1 ", "correctness_mode", "f1"),
        ("RAGPULSE_JUDGE", " NLI ", "judge", "nli"),
        ("RAGPULSE_JUDGE_MODEL", "models/nli", "judge_model", "models/nli"),
        ("RAGPULSE_JUDGE_LABEL_MAP", "1=supported", "judge_label_map", "1=supported"),
        ("RAGPULSE_JUDGE_THREADS", "2", "judge_threads", 2),
        ("RAGPULSE_CASCADE_ESCALATE", "tokens", "cascade_escalate", "tokens"),
        ("RAGPULSE_CASCADE_BAND", "0.2, 0.9", "cascade_band", (0.2, 0.9)),
        ("RAGPULSE_EXPORT_BUFFER_BYTES", "1048576", "export_buffer_bytes", 1048576),
        ("RAGPULSE_EXPORT_BUFFER_SECONDS", "300", "export_buffer_seconds", 300.0),
        ("RAGPULSE_EXPORT_MAX_BATCH_BYTES", "65536", "export_max_batch_bytes", 65536),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://collector:4318",
            "endpoint",
            "http://collector:4318",
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "GRPC", "protocol", "grpc"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "3", "export_timeout", 3.0),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "GZIP", "compression", "gzip"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "15000", "metric_interval", 15.0),
    ],
)
def test_every_documented_variable_reaches_settings(
    variable: str, text: str, name: str, value: object
) -> None:
    settings = Settings.load(environ={variable: text})
    assert getattr(settings, name) == value
    assert not settings.rejected


@pytest.mark.parametrize(
    ("variable", "text", "name"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "protocol"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "ten", "export_timeout"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "zip", "compression"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", "endpoint"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "-5", "metric_export_interval_env"),
        ("RAGPULSE_SAMPLE_RATE", "1.5", "sample_rate"),
        ("RAGPULSE_MAX_QUEUE_SIZE", "0", "max_queue_size"),
        ("RAGPULSE_EVAL_TIMEOUT", "nan", "evaluation_timeout"),
        ("RAGPULSE_EVALUATE", "maybe", "evaluate"),
        ("RAGPULSE_PROMETHEUS_PORT", "70000", "prometheus_port"),
        ("RAGPULSE_CAPTURE_CONVENTIONS", "otel", "capture_conventions"),
        ("RAGPULSE_MAX_SPAN_BYTES", "1MB", "max_span_bytes"),
        ("RAGPULSE_JUDGE", "gpt", "judge"),
        ("RAGPULSE_CASCADE_ESCALATE", "lexical", "cascade_escalate"),
        ("RAGPULSE_CASCADE_BAND", "0.9,0.2", "cascade_band"),
        ("RAGPULSE_CASCADE_BAND", "0.5", "cascade_band"),
        ("RAGPULSE_JUDGE_THREADS", "0", "judge_threads"),
    ],
)
def test_unusable_values_fall_back_to_their_default(variable: str, text: str, name: str) -> None:
    settings = Settings.load(environ={variable: text})
    assert getattr(settings, name) == getattr(Settings(), name)
    assert variable in settings.rejected


def test_a_keyword_wins_over_the_environment() -> None:
    settings = Settings.load({"sample_rate": 0.5}, environ={"RAGPULSE_SAMPLE_RATE": "0.1"})
    assert settings.sample_rate == 0.5


def test_a_bad_keyword_falls_back_to_the_environment_then_the_default() -> None:
    settings = Settings.load({"sample_rate": 2.0}, environ={"RAGPULSE_SAMPLE_RATE": "0.1"})
    assert settings.sample_rate == 0.1
    assert settings.rejected == {"sample_rate": "2.0"}
    assert Settings.load({"concurrency": -1}, environ={}).concurrency == Settings().concurrency


def test_default_hold_timeout_covers_one_whole_evaluation() -> None:
    defaults = Settings()
    assert defaults.hold_timeout >= defaults.evaluation_timeout_for(None)
    assert defaults.check_relations() == []


def test_a_hold_timeout_shorter_than_an_evaluation_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        settings = Settings.load({"hold_timeout": 30.0, "evaluation_timeout": 60.0}, environ={})
    assert settings.hold_timeout == 30.0  # the user's choice stands, and is explained
    assert "hold_timeout=30s is shorter than one evaluation may take" in caplog.text


def test_export_buffer_defaults_cover_a_sixty_second_outage() -> None:
    assert Settings().export_buffer_seconds >= 60.0
    assert Settings().export_max_batch_bytes < 4 * 1024 * 1024  # gRPC's default receive limit


def test_hash_key_comes_from_the_environment_and_is_never_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings.load(environ={"RAGPULSE_HASH_KEY": "k3y-of-this-deployment"})
    assert settings.hash_key == "k3y-of-this-deployment"
    assert "k3y-of-this-deployment" not in repr(settings)
    assert "k3y-of-this-deployment" not in repr(ContentPolicy(hash_key=settings.hash_key))
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        rejected = Settings.load({"hash_key": " "}, environ={})
    assert rejected.hash_key is None
    assert rejected.rejected == {"hash_key": "'<hidden>'"}


def test_a_judge_nice_beyond_19_is_refused_and_the_default_used() -> None:
    settings = Settings.load(environ={"RAGPULSE_JUDGE_NICE": "25"})
    assert settings.judge_nice == Settings().judge_nice
    assert "RAGPULSE_JUDGE_NICE" in settings.rejected


# Parameters named for the setting they take, or after what they bound in the part.
_RELAY = {
    "max_retry_seconds": "export_buffer_seconds",
    "max_batch_bytes": "export_max_batch_bytes",
    "max_batch_items": "relay_max_batch_items",
    "linger": "relay_linger",
}
_PARTS: dict[str, dict[str, str]] = {
    "ragpulse.outputs.relay:Relay": _RELAY,
    "ragpulse.outputs.phoenix:PhoenixAnnotations": {
        "max_queue_size": "phoenix_max_queue_size",
        "batch_size": "phoenix_batch_size",
        "timeout": "phoenix_timeout",
        "retry_seconds": "export_buffer_seconds",
    },
    "ragpulse.serve._assembly:TraceAssembler": {
        "timeout": "serve_assembly_timeout",
        "max_traces": "serve_assembly_traces",
        "max_bytes": "serve_assembly_bytes",
    },
}


@pytest.mark.parametrize("component", sorted(_PARTS))
def test_parts_built_without_settings_take_the_settings_defaults(component: str) -> None:
    # A part built directly (EvaluatingSpanProcessor(downstream)) behaves as configure() does
    # with nothing set: its defaults are Settings', not numbers of its own.
    import importlib
    import inspect

    module, name = component.split(":")
    parameters = inspect.signature(getattr(importlib.import_module(module), name)).parameters
    renamed = _PARTS[component]
    checked = 0
    for parameter in parameters.values():
        field = renamed.get(parameter.name, parameter.name)
        # None says "the default one" (a judge, thresholds): built from Settings elsewhere.
        if hasattr(Settings, field) and parameter.default not in (inspect.Parameter.empty, None):
            assert parameter.default == getattr(Settings, field), parameter.name
            checked += 1
    assert checked >= 3


def test_serve_options_hold_no_bound_of_their_own() -> None:
    # serve's bounds are settings rows (serve_buffer_bytes, serve_assembly_timeout, ...),
    # read from ServeOptions.settings: a second copy of them could only drift.
    import dataclasses

    from ragpulse.serve._service import ServeOptions

    own = {f.name for f in dataclasses.fields(ServeOptions)}
    assert own == {"http", "grpc", "settings", "output_file", "security"}
    options = ServeOptions(settings=Settings.load({"serve_drain_timeout": 7.5}, environ={}))
    assert options.settings.serve_drain_timeout == 7.5


def test_a_retired_variable_is_not_read_and_says_what_replaced_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ragpulse.settings import _table

    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        settings = Settings.load(environ={"RAGPULSE_MAX_TEXT_LENGTH": "4096"})
    assert settings.max_text_bytes == Settings.max_text_bytes
    assert _table.RETIRED["RAGPULSE_MAX_TEXT_LENGTH"] == "RAGPULSE_MAX_TEXT_BYTES"
    assert "RAGPULSE_MAX_TEXT_LENGTH is no longer read; set RAGPULSE_MAX_TEXT_BYTES" in caplog.text


def test_a_processor_built_directly_reads_its_groups_then_the_variables_then_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragpulse import BoundsOptions, EvaluatingSpanProcessor, EvaluationOptions
    from ragpulse.judges import LexicalJudge

    monkeypatch.setenv("RAGPULSE_MAX_HELD_SPANS", "17")
    monkeypatch.setenv("RAGPULSE_HOLD_TIMEOUT", "99")
    processor = EvaluatingSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()),
        judge=LexicalJudge(),
        bounds=BoundsOptions(hold_timeout=3.0, shutdown_timeout=1.0),
        evaluation=EvaluationOptions(action_tools="calculator"),
    )
    try:
        held = processor._held  # the bounds its spans are held within
        assert held._hold_timeout == 3.0  # the group wins over RAGPULSE_HOLD_TIMEOUT
        assert held._max_spans == 17  # not in the group: its variable
        assert held._max_bytes == Settings.max_held_bytes  # neither: the default
        assert processor._tools.action == ("calculator",)
    finally:
        processor.shutdown()


def test_a_processor_has_no_loose_bound_of_its_own() -> None:
    # Its bounds come in the groups (bounds=, judging=, ...), read as configure() reads them.
    import inspect

    from ragpulse import EvaluatingSpanProcessor

    parameters = set(inspect.signature(EvaluatingSpanProcessor).parameters)
    own_settings = parameters & {f.name for f in dataclasses.fields(Settings)}
    assert own_settings == {"judge", "metrics", "thresholds", "service_name"}
    assert {"judging", "sampling", "bounds", "evaluation"} <= parameters


def test_a_worker_reads_its_groups_then_the_variables_then_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ragpulse import BoundsOptions, JudgeOptions
    from ragpulse.judges import LexicalJudge
    from ragpulse.worker import EvalWorker

    monkeypatch.setenv("RAGPULSE_MAX_QUEUE_SIZE", "7")
    monkeypatch.setenv("RAGPULSE_EVAL_CONCURRENCY", "9")
    worker = EvalWorker(
        LexicalJudge(),
        judging=JudgeOptions(concurrency=2, evaluation_timeout=3.0),
        bounds=BoundsOptions(max_input_chars=50),
        isolate_cpu_bound=False,
    )
    try:
        assert worker._concurrency == 2  # the group wins over RAGPULSE_EVAL_CONCURRENCY
        assert worker._timeout == 3.0
        assert worker._max_input_chars == 50
        assert worker._max_queue_size == 7  # not in a group: its variable
        assert worker._max_queue_bytes == Settings.max_queue_bytes  # neither: the default
        with pytest.raises(TypeError, match="settings= or"):
            EvalWorker(LexicalJudge(), settings=Settings(), bounds=BoundsOptions(max_input_chars=5))
    finally:
        worker.shutdown(timeout=1.0)


@pytest.mark.parametrize("suffix", ["", ".py"])
def test_a_metric_module_longer_than_a_file_name_may_be_is_one_warning_and_the_default(
    suffix: str, caplog: pytest.LogCaptureFixture
) -> None:
    import os

    name = "m" * (os.pathconf(".", "PC_NAME_MAX") + 1) + suffix
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        settings = Settings.load(environ={"RAGPULSE_METRIC_MODULES": name})
    assert settings.metric_modules == Settings().metric_modules
    assert "RAGPULSE_METRIC_MODULES" in settings.rejected
    assert caplog.text.count("RAGPULSE_METRIC_MODULES") == 1
