"""The table of settings: one row each, saying where a setting is read from and what it means.

A row names the setting's parser, its environment variable (if any), where a user sets it in
Python (``place``: a ``configure()`` keyword, or the options object of a group such as
``bounds``), its ``ragpulse serve`` flag (if any) and its meaning. ``ragpulse serve`` builds its
flags from this table and ``docs/settings.md`` is rendered from it
(``ragpulse.settings.reference``).

A setting lives in three places, each kept equal to the others by a test rather than built
from one: its default is a field of ``Settings`` (``ragpulse.settings``), its row is here, and
its field in an option class (``ragpulse.settings.options``) is written out so that type
checkers and editors see it. ``tests/unit/test_settings_reference.py`` fails when a row has no
field or default, or a field or default no row. Adding a setting: a row, a ``Settings`` field,
and an option-class field when its place is a group.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ragpulse.settings._parse import (
    _as_bool,
    _attribute_names,
    _band,
    _compression,
    _conventions,
    _correctness_mode,
    _count,
    _device,
    _entry_point,
    _escalation_kind,
    _exemplar_filter,
    _globs,
    _hash_key,
    _headers,
    _judge_kind,
    _limit,
    _metric_modules,
    _metrics,
    _millis_as_seconds,
    _names,
    _nice,
    _path,
    _port,
    _positive,
    _protocol,
    _rate,
    _sampler,
    _seconds,
    _size,
    _text,
    _thresholds,
    _url,
)

__all__ = ["GROUPS", "RETIRED", "SIGNALS", "SOURCES", "Source"]

SIGNALS: Final = ("traces", "metrics", "logs")
"""The OTLP signals, as the per-signal settings and variables name them."""

GROUPS: Final = ("export", "judging", "sampling", "bounds", "content", "evaluation")
"""The option groups of ``configure()``, each an options object (``ExportOptions``, ...)."""

RETIRED: Final = {"RAGPULSE_MAX_TEXT_LENGTH": "RAGPULSE_MAX_TEXT_BYTES"}
"""Variables no longer read, and what replaced them: one warning each when still set."""


@dataclass(frozen=True)
class Source:
    """Where one setting comes from, how its value is checked, and what it means."""

    parse: Callable[[object], Any]
    env: str | None = None
    place: str | None = None
    """Where Python code sets it: ``"configure"`` (a keyword of its own), a group of
    ``GROUPS`` (a field of that group's options object), or ``None`` (its variable only, or
    a default of code that builds the part)."""
    option: str | None = None
    """Its field name in the group's options object, when not the setting's own name."""
    flag: str | None = None
    """Its ``ragpulse serve`` option; a boolean's ``--no-...`` flag sets it false."""
    secret: bool = False
    """A credential: a rejected value is never logged or listed, only its name."""
    help: str = ""
    """What it means, in Markdown (``docs/settings.md``; plain text in ``--help``)."""

    @property
    def plain_help(self) -> str:
        """``help`` as plain text: links become their text, code loses its backticks."""
        return re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", self.help).replace("`", "")

    @property
    def settable(self) -> bool:
        """Whether code (a keyword, an options object, a serve flag) may set it."""
        return self.place is not None or self.flag is not None


# Every setting in the order of ``Settings``; the field defaults of ``Settings`` are the
# defaults, and this table is the only place a variable name or a meaning is written.
SOURCES: Final[Mapping[str, Source]] = {
    "service_name": Source(
        _text,
        place="configure",
        help=(
            "`service.name` of the resource; `None`: `OTEL_SERVICE_NAME` (read by the SDK) or the "
            "SDK's default"
        ),
    ),
    "endpoint": Source(
        _url,
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        place="configure",
        help=(
            "OTLP base endpoint for traces, metrics and logs; `None` (and no per-signal endpoint):"
            " OTLP-JSON files"
        ),
    ),
    "traces_endpoint": Source(
        _url,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        help="the spans' own URL, used as it is; wins over `endpoint`",
    ),
    "metrics_endpoint": Source(
        _url,
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        help="the metrics' own URL, used as it is; wins over `endpoint`",
    ),
    "logs_endpoint": Source(
        _url,
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        help="the log events' own URL, used as it is; wins over `endpoint`",
    ),
    "protocol": Source(
        _protocol,
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        place="export",
        help="`http/protobuf` or `grpc` (port 4317)",
    ),
    "headers": Source(
        _headers,
        place="export",
        help="extra OTLP headers; `None`: `OTEL_EXPORTER_OTLP_HEADERS`, read by the exporters",
    ),
    "export_timeout": Source(
        _seconds,
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        place="export",
        option="timeout",
        help="seconds one OTLP request may take, the exporter's own retries included",
    ),
    "compression": Source(
        _compression,
        "OTEL_EXPORTER_OTLP_COMPRESSION",
        place="export",
        help="OTLP compression: `gzip` or `none`",
    ),
    "traces_protocol": Source(
        _protocol,
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        help="the traces' own protocol; `None`: `protocol`",
    ),
    "traces_timeout": Source(
        _seconds,
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        help="seconds one OTLP request of traces may take; `None`: `export_timeout`",
    ),
    "traces_compression": Source(
        _compression,
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        help="the traces' own compression; `None`: `compression`",
    ),
    "metrics_protocol": Source(
        _protocol,
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        help="the metrics' own protocol; `None`: `protocol`",
    ),
    "metrics_timeout": Source(
        _seconds,
        "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
        help="seconds one OTLP request of metrics may take; `None`: `export_timeout`",
    ),
    "metrics_compression": Source(
        _compression,
        "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
        help="the metrics' own compression; `None`: `compression`",
    ),
    "logs_protocol": Source(
        _protocol,
        "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
        help="the logs' own protocol; `None`: `protocol`",
    ),
    "logs_timeout": Source(
        _seconds,
        "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT",
        help="seconds one OTLP request of logs may take; `None`: `export_timeout`",
    ),
    "logs_compression": Source(
        _compression,
        "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION",
        help="the logs' own compression; `None`: `compression`",
    ),
    "metric_export_interval": Source(
        _seconds,
        place="export",
        flag="--metric-export-interval",
        help="seconds between metric exports; `None`: the variable below, else 60 s",
    ),
    "metric_export_interval_env": Source(
        _millis_as_seconds,
        "OTEL_METRIC_EXPORT_INTERVAL",
        help="the same interval from the variable, in milliseconds there",
    ),
    "evaluate": Source(
        _as_bool,
        "RAGPULSE_EVALUATE",
        place="configure",
        flag="--no-evaluate",
        help=(
            "`False`: record and export spans without evaluating them (capture-only, for `ragpulse"
            " serve`)"
        ),
    ),
    "output_file": Source(
        _path,
        "RAGPULSE_OUTPUT_FILE",
        place="configure",
        help=(
            "where OTLP-JSON lines go when no endpoint is set (with `-logs` and `-metrics` "
            "siblings)"
        ),
    ),
    "prometheus_port": Source(
        _port,
        "RAGPULSE_PROMETHEUS_PORT",
        place="configure",
        flag="--prometheus-port",
        help=(
            "serve `/metrics` on this port; `None`: off. A port that is taken gives one warning "
            "and no `/metrics`"
        ),
    ),
    "prometheus_host": Source(
        _text,
        "RAGPULSE_PROMETHEUS_HOST",
        place="export",
        flag="--prometheus-host",
        help="the address `/metrics` listens on",
    ),
    "sample_rate": Source(
        _rate,
        "RAGPULSE_SAMPLE_RATE",
        place="configure",
        flag="--sample-rate",
        help="share of traces evaluated, chosen by trace id ([sampling](sampling.md))",
    ),
    "max_evaluations_per_minute": Source(
        _positive,
        "RAGPULSE_MAX_EVALUATIONS_PER_MINUTE",
        place="sampling",
        help="cap on evaluations, forced ones included; `None`: no cap (past it: `over_budget`)",
    ),
    "max_judge_tokens_per_hour": Source(
        _positive,
        "RAGPULSE_MAX_JUDGE_TOKENS_PER_HOUR",
        place="sampling",
        help="cap on LLM judge tokens; `None`: no cap",
    ),
    "always_evaluate": Source(
        _names,
        place="sampling",
        help="globs on `@rag` names or `http.route` that are always evaluated",
    ),
    "metric_modules": Source(
        _metric_modules,
        "RAGPULSE_METRIC_MODULES",
        place="evaluation",
        help=(
            "files (`mymetrics.py`) or module names of your own metrics, imported before "
            "`metrics` is read (the variable is comma-separated; [custom "
            "metrics](metrics.md#your-own-metrics))"
        ),
    ),
    "metrics": Source(
        _metrics,
        "RAGPULSE_METRICS",
        place="configure",
        flag="--metrics",
        help=(
            "the metrics the judge is asked for (the variable is comma-separated); also "
            "`relevancy`, `completeness`, `citation`, the context metrics `context_relevance`, "
            "`context_precision`, `context_recall`, `context_utilisation`, and your own by name "
            "(`metrics=` also takes a `RubricMetric`) ([metrics](metrics.md))"
        ),
    ),
    "strict": Source(
        _as_bool,
        "RAGPULSE_STRICT",
        place="evaluation",
        help="count INFERRED claims as unfaithful (DeepEval's `penalize_ambiguous_claims`)",
    ),
    "correctness_mode": Source(
        _correctness_mode,
        "RAGPULSE_CORRECTNESS_MODE",
        place="judging",
        help=(
            "how the default judge scores correctness: `agreement`, or Ragas' `f1`, `precision`, "
            "`recall`; a `judge=` given keeps its own"
        ),
    ),
    "judge": Source(
        _judge_kind,
        "RAGPULSE_JUDGE",
        place="configure",
        help=(
            "the judge: a `Judge` object (wrapped in a `ResilientJudge` unless it is one), or the "
            "name of a built-in one, `lexical`, `openai`, `nli`, `tokens` (a local ONNX model) or "
            "`cascade` ([judges](judges.md), [local judges](local-judges.md))"
        ),
    ),
    "judge_model": Source(
        _text,
        "RAGPULSE_JUDGE_MODEL",
        place="judging",
        option="model",
        help=(
            "the model directory of `nli`/`tokens`, or the model name of `openai`; for `cascade`, "
            "of its escalation judge"
        ),
    ),
    "judge_label_map": Source(
        _text,
        "RAGPULSE_JUDGE_LABEL_MAP",
        place="judging",
        option="label_map",
        help="names of a local model's classes, `1=supported`; `None`: its `config.json`'s",
    ),
    "judge_threads": Source(
        _count,
        "RAGPULSE_JUDGE_THREADS",
        place="judging",
        option="threads",
        help=(
            "inference threads per judge process of a local model; `None`: each process's share of"
            " the CPUs ragpulse may use (affinity, the container's CPU limit)"
        ),
    ),
    "judge_device": Source(
        _device,
        "RAGPULSE_JUDGE_DEVICE",
        place="judging",
        option="device",
        help=(
            "where a local model runs: `cpu`, `cuda` (with `onnxruntime-gpu`) or onnxruntime "
            "providers in order, comma-separated; a provider onnxruntime lacks is logged once and "
            "the CPU used ([local judges](local-judges.md#accelerators-and-quantized-models))"
        ),
    ),
    "cascade_escalate": Source(
        _escalation_kind,
        "RAGPULSE_CASCADE_ESCALATE",
        place="judging",
        help="the judge a cascade hands unsure requests to: `openai`, `nli` or `tokens`",
    ),
    "cascade_band": Source(
        _band,
        "RAGPULSE_CASCADE_BAND",
        place="judging",
        help=(
            "claim confidences the cascade's offline screen is unsure of (`0.35,0.85`; both ends "
            "included)"
        ),
    ),
    "thresholds": Source(
        _thresholds,
        place="configure",
        help=(
            "pass/fail threshold per metric, over a `calibration=` file's, the judge's "
            "declaration and the metric's own "
            "([metrics](metrics.md#the-ten-metrics-and-their-thresholds)); one given labels a "
            "metric the judge scores unlabelled; `None`: the declared ones"
        ),
    ),
    "metric_attributes": Source(
        _attribute_names,
        "RAGPULSE_METRIC_ATTRIBUTES",
        place="evaluation",
        flag="--metric-attributes",
        help=(
            "attributes of the evaluated span or its resource (`service.version`, "
            "`gen_ai.request.model`, a tenant tier) added to the score histogram and the "
            "label counter, so a drop is seen per deploy or model (the variable is "
            "comma-separated; [operations](operations.md#where-did-it-drop))"
        ),
    ),
    "metric_attributes_limit": Source(
        _count,
        "RAGPULSE_METRIC_ATTRIBUTES_LIMIT",
        place="evaluation",
        help=(
            "most combinations of `metric_attributes` values kept; later ones are counted "
            "under `otel.metric.overflow=true` instead"
        ),
    ),
    "inline_annotations": Source(
        _as_bool,
        place="evaluation",
        help="also write OpenInference `annotations.N.annotation.*` on the span",
    ),
    "capture_content": Source(
        _as_bool,
        "RAGPULSE_CAPTURE_CONTENT",
        place="configure",
        flag="--no-content",
        help=(
            "`False`: export lengths (and, with `RAGPULSE_HASH_KEY`, keyed hashes) instead of "
            "texts ([capture](capture.md#content-capture-and-redaction))"
        ),
    ),
    "hash_key": Source(
        _hash_key,
        "RAGPULSE_HASH_KEY",
        place="content",
        secret=True,
        help=(
            "a per-deployment secret: with `capture_content=False`, texts also get an HMAC-SHA256 "
            "keyed by it (`ragpulse.<name>.hmac_sha256`); at least 16 bytes (a shorter key can "
            "be guessed, and is refused); `None`: lengths only, no hash. Never logged or exported "
            "([privacy and lifecycle](privacy-and-lifecycle.md))"
        ),
    ),
    "max_text_bytes": Source(
        _size,
        "RAGPULSE_MAX_TEXT_BYTES",
        place="content",
        help="UTF-8 bytes of each exported text (8 KiB) before it is cut with a marker",
    ),
    "max_documents_bytes": Source(
        _size,
        "RAGPULSE_MAX_DOCUMENTS_BYTES",
        place="content",
        help="bytes of a span's retrieved documents (or a generation's messages) together (64 KiB)",
    ),
    "max_span_bytes": Source(
        _size,
        "RAGPULSE_MAX_SPAN_BYTES",
        place="content",
        help="bytes of all texts one span captures (1 MiB)",
    ),
    "max_documents": Source(
        _size,
        "RAGPULSE_MAX_DOCUMENTS",
        place="content",
        help="documents written onto a span as OpenInference keys",
    ),
    "capture_conventions": Source(
        _conventions,
        "RAGPULSE_CAPTURE_CONVENTIONS",
        place="content",
        option="conventions",
        help=(
            "attribute conventions of captured content: `genai`, `openinference`, or both "
            "(comma-separated in the variable)"
        ),
    ),
    "max_record_chars": Source(
        _size,
        "RAGPULSE_MAX_RECORD_CHARS",
        place="content",
        help=(
            "characters of one request's texts held for evaluation (1 Mi); past it: `skipped`, "
            "`too_large`"
        ),
    ),
    "evidence_tools": Source(
        _globs,
        "RAGPULSE_EVIDENCE_TOOLS",
        place="evaluation",
        help=(
            "globs on tool names whose results are an agent's evidence (comma-separated in the "
            "variable); default every tool: an agent's tool call before answering is usually a "
            "lookup ([agents](agents.md))"
        ),
    ),
    "action_tools": Source(
        _globs,
        "RAGPULSE_ACTION_TOOLS",
        place="evaluation",
        help=(
            "globs on tool names that act rather than fetch evidence (`calculator`, `book_*`): "
            "their results are never evidence and their failures never `tool_failure`, whatever "
            "`evidence_tools` says"
        ),
    ),
    "trust_history": Source(
        _as_bool,
        "RAGPULSE_TRUST_HISTORY",
        place="evaluation",
        help=(
            "`True`: a tool result in the chat history counts as evidence even when no tool "
            "span ragpulse saw vouches for it; for an application whose clients cannot write "
            "their own history ([agents](agents.md#history-and-its-provenance))"
        ),
    ),
    "hold_timeout": Source(
        _seconds,
        "RAGPULSE_HOLD_TIMEOUT",
        place="bounds",
        flag="--hold-timeout",
        help="seconds a sampled span waits for its evaluation before it goes out `pending`",
    ),
    "evaluation_timeout": Source(
        _seconds,
        "RAGPULSE_EVAL_TIMEOUT",
        place="judging",
        flag="--evaluation-timeout",
        help=(
            "seconds one whole evaluation may take, a resilient judge's retries and backoff "
            "included; `None`: by judge, 20, or for a local model four times its estimated cost of"
            " a typical record when that is more; a configured value below a local model's "
            "estimate is warned about once at start ([local "
            "judges](local-judges.md#what-they-cost))"
        ),
    ),
    "concurrency": Source(
        _count,
        "RAGPULSE_EVAL_CONCURRENCY",
        place="judging",
        flag="--concurrency",
        help=(
            "evaluations in flight at once; for a judge in its own processes, the processes, each "
            "taking a batch of records (about 50 ms of judging) at a time (`ragpulse serve`: no "
            "more than the CPUs it may use, its affinity within a container's CPU limit)"
        ),
    ),
    "judge_nice": Source(
        _nice,
        "RAGPULSE_JUDGE_NICE",
        place="judging",
        option="nice",
        help=(
            "`nice` (0-19) of a CPU-bound judge's processes; higher lets a busy host starve the "
            "judge (see [sampling: coverage](sampling.md#coverage))"
        ),
    ),
    "max_queue_size": Source(
        _count,
        "RAGPULSE_MAX_QUEUE_SIZE",
        place="bounds",
        flag="--max-queue-size",
        help="records waiting for the judge; past it: `queue_full`",
    ),
    "max_queue_bytes": Source(
        _count,
        "RAGPULSE_MAX_QUEUE_BYTES",
        place="bounds",
        help="bytes of the records accepted and not yet evaluated (64 MiB); past it: `queue_full`",
    ),
    "max_input_chars": Source(
        _count,
        "RAGPULSE_MAX_INPUT_CHARS",
        place="bounds",
        help=(
            "characters of answer, contexts and reference a judge is given; past it: `skipped`, "
            "`too_large`"
        ),
    ),
    "max_held_spans": Source(
        _size,
        "RAGPULSE_MAX_HELD_SPANS",
        place="bounds",
        help=(
            "sampled spans held for their scores at once (units and their retrieval spans; "
            "retrieval spans only within half of it, [per "
            "document](metrics.md#per-document-on-the-retrieval-span)); past it they go out "
            "`pending`"
        ),
    ),
    "max_held_bytes": Source(
        _size,
        "RAGPULSE_MAX_HELD_BYTES",
        place="bounds",
        help=(
            "estimated bytes of the held spans (64 MiB; retrieval spans only within half of it); "
            "past it they go out `pending`"
        ),
    ),
    "shutdown_timeout": Source(
        _seconds,
        "RAGPULSE_SHUTDOWN_TIMEOUT",
        place="bounds",
        help="seconds `shutdown()`, the exit hook and the SIGTERM handler may take in all",
    ),
    "handle_sigterm": Source(
        _as_bool,
        "RAGPULSE_HANDLE_SIGTERM",
        place="export",
        help=(
            "on SIGTERM flush within `shutdown_timeout`, then run the app's own handler (or "
            "SIGTERM's default action, exit 143); `False` opts out ([privacy and "
            "lifecycle](privacy-and-lifecycle.md))"
        ),
    ),
    "export_buffer_bytes": Source(
        _count,
        "RAGPULSE_EXPORT_BUFFER_BYTES",
        place="export",
        option="buffer_bytes",
        help=(
            "bytes of each signal's exports kept for retry while the backend is unreachable (64 "
            "MiB)"
        ),
    ),
    "export_buffer_seconds": Source(
        _seconds,
        "RAGPULSE_EXPORT_BUFFER_SECONDS",
        place="export",
        option="buffer_seconds",
        help="seconds an export is retried before it is dropped and counted",
    ),
    "export_max_batch_bytes": Source(
        _count,
        "RAGPULSE_EXPORT_MAX_BATCH_BYTES",
        place="export",
        option="max_batch_bytes",
        flag="--max-export-batch-bytes",
        help="largest encoded OTLP request (3.5 MiB, under gRPC's 4 MiB); bigger batches are split",
    ),
    # --- read by the OpenTelemetry SDK too: checked here, then given to it -----------------
    "bsp_schedule_delay": Source(
        _millis_as_seconds,
        "OTEL_BSP_SCHEDULE_DELAY",
        help=(
            "seconds between two exports of ragpulse's batch processor of spans (5 s; "
            "milliseconds in the variable)"
        ),
    ),
    "bsp_max_queue_size": Source(
        _count,
        "OTEL_BSP_MAX_QUEUE_SIZE",
        help=(
            "spans that batch processor queues before its exporter takes them (65,536, not the "
            "SDK's 2,048: that exporter never blocks, so this only absorbs a burst)"
        ),
    ),
    "bsp_max_export_batch_size": Source(
        _count,
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        help=("spans in one export of that batch processor (512; at most its queue)"),
    ),
    "bsp_export_timeout": Source(
        _millis_as_seconds,
        "OTEL_BSP_EXPORT_TIMEOUT",
        help=(
            "seconds that batch processor gives one export of spans (30; milliseconds in the "
            "variable)"
        ),
    ),
    "blrp_schedule_delay": Source(
        _millis_as_seconds,
        "OTEL_BLRP_SCHEDULE_DELAY",
        help=(
            "seconds between two exports of ragpulse's batch processor of log records (1 s; "
            "milliseconds in the variable)"
        ),
    ),
    "blrp_max_queue_size": Source(
        _count,
        "OTEL_BLRP_MAX_QUEUE_SIZE",
        help=("log records that batch processor queues before its exporter takes them (65,536)"),
    ),
    "blrp_max_export_batch_size": Source(
        _count,
        "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE",
        help=("log records in one export of that batch processor (512; at most its queue)"),
    ),
    "blrp_export_timeout": Source(
        _millis_as_seconds,
        "OTEL_BLRP_EXPORT_TIMEOUT",
        help=(
            "seconds that batch processor gives one export of log records (30; milliseconds in "
            "the variable)"
        ),
    ),
    "metric_export_timeout": Source(
        _millis_as_seconds,
        "OTEL_METRIC_EXPORT_TIMEOUT",
        help=("seconds one metric export may take (30; milliseconds in the variable)"),
    ),
    "metrics_exemplar_filter": Source(
        _exemplar_filter,
        "OTEL_METRICS_EXEMPLAR_FILTER",
        help=("which measurements keep exemplars: `trace_based`, `always_on` or `always_off`"),
    ),
    "traces_sampler": Source(
        _sampler,
        "OTEL_TRACES_SAMPLER",
        help=(
            "the sampler of the tracer provider ragpulse makes: `parentbased_always_on`, "
            "`always_on`, `always_off`, `traceidratio`, `parentbased_always_off` or "
            "`parentbased_traceidratio`"
        ),
    ),
    "traces_sampler_arg": Source(
        _rate,
        "OTEL_TRACES_SAMPLER_ARG",
        help=("the ratio of the `traceidratio` samplers, in [0, 1]"),
    ),
    "attribute_count_limit": Source(
        _limit,
        "OTEL_ATTRIBUTE_COUNT_LIMIT",
        help=("attributes of a span, event, link or log record (128); `unset`: no limit"),
    ),
    "attribute_value_length_limit": Source(
        _limit,
        "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
        help=("characters of an attribute value (no limit); `unset`: no limit"),
    ),
    "span_attribute_count_limit": Source(
        _limit,
        "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
        help=("attributes of a span; `None`: `attribute_count_limit`; `unset`: no limit"),
    ),
    "span_attribute_value_length_limit": Source(
        _limit,
        "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
        help=(
            "characters of a span's attribute value; `None`: `attribute_value_length_limit`; "
            "`unset`: no limit"
        ),
    ),
    "event_attribute_count_limit": Source(
        _limit,
        "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT",
        help=("attributes of a span event; `None`: `attribute_count_limit`; `unset`: no limit"),
    ),
    "link_attribute_count_limit": Source(
        _limit,
        "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT",
        help=("attributes of a span link; `None`: `attribute_count_limit`; `unset`: no limit"),
    ),
    "span_event_count_limit": Source(
        _limit,
        "OTEL_SPAN_EVENT_COUNT_LIMIT",
        help=("events of a span (128); `unset`: no limit"),
    ),
    "span_link_count_limit": Source(
        _limit,
        "OTEL_SPAN_LINK_COUNT_LIMIT",
        help=("links of a span (128); `unset`: no limit"),
    ),
    "logrecord_attribute_count_limit": Source(
        _limit,
        "OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT",
        help=("attributes of a log record; `None`: `attribute_count_limit`; `unset`: no limit"),
    ),
    "logrecord_attribute_value_length_limit": Source(
        _limit,
        "OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT",
        help=(
            "characters of a log record's attribute value; `None`: "
            "`attribute_value_length_limit`; `unset`: no limit"
        ),
    ),
    "python_tracer_provider": Source(
        _entry_point("opentelemetry_tracer_provider"),
        "OTEL_PYTHON_TRACER_PROVIDER",
        help=(
            "the tracer provider the OpenTelemetry API loads when none is set; one that is not "
            "installed is refused and ragpulse sets its own"
        ),
    ),
    "python_meter_provider": Source(
        _entry_point("opentelemetry_meter_provider"),
        "OTEL_PYTHON_METER_PROVIDER",
        help=(
            "the meter provider the OpenTelemetry API loads when none is set; one that is not "
            "installed is refused and ragpulse sets its own"
        ),
    ),
    "python_logger_provider": Source(
        _entry_point("opentelemetry_logger_provider"),
        "OTEL_PYTHON_LOGGER_PROVIDER",
        help=(
            "the logger provider the OpenTelemetry API loads when none is set; one that is not "
            "installed is refused and ragpulse sets its own"
        ),
    ),
    "relay_max_batch_items": Source(
        _count,
        help=(
            "items `ragpulse serve` merges into one forwarded request at most (spans, or received "
            "requests)"
        ),
    ),
    "relay_linger": Source(
        _seconds,
        help="seconds a small forwarded request waits for others to join it",
    ),
    "phoenix_max_queue_size": Source(
        _count,
        help=(
            "annotations `PhoenixAnnotations` keeps waiting (its `max_queue_size`); past it the "
            "oldest are dropped and counted"
        ),
    ),
    "phoenix_batch_size": Source(
        _count,
        help="annotations per request to Phoenix at most (its `batch_size`)",
    ),
    "phoenix_timeout": Source(
        _seconds,
        help="seconds one request to Phoenix may take (its `timeout`)",
    ),
    "phoenix_flush_timeout": Source(
        _seconds,
        help="seconds `PhoenixAnnotations.flush` and `shutdown` wait when given no timeout",
    ),
    "serve_buffer_bytes": Source(
        _count,
        "RAGPULSE_SERVE_BUFFER_BYTES",
        flag="--buffer-bytes",
        help=(
            "bytes `ragpulse serve` holds between receiving and exporting (128 MiB), spans counted"
            " as held in memory, not as received; past it requests get 429 / `RESOURCE_EXHAUSTED`"
        ),
    ),
    "serve_dedupe_window": Source(
        _seconds,
        "RAGPULSE_SERVE_DEDUPE_WINDOW",
        flag="--dedupe-window",
        help=(
            "seconds a unit's (trace id, span id) is remembered: a copy received again within it "
            "is neither forwarded nor judged again"
        ),
    ),
    "serve_dedupe_units": Source(
        _count,
        "RAGPULSE_SERVE_DEDUPE_UNITS",
        flag="--dedupe-units",
        help="units remembered for deduplication at most (the oldest are forgotten first)",
    ),
    "serve_idle_timeout": Source(
        _seconds,
        "RAGPULSE_SERVE_IDLE_TIMEOUT",
        flag="--idle-timeout",
        help="seconds an idle connection (HTTP keep-alive, gRPC) stays open",
    ),
    "serve_request_timeout": Source(
        _seconds,
        "RAGPULSE_SERVE_REQUEST_TIMEOUT",
        flag="--request-timeout",
        help="seconds a client may take to send one request; a slower one is cut off with 408",
    ),
    "serve_auth_token_file": Source(
        _path,
        "RAGPULSE_SERVE_AUTH_TOKEN_FILE",
        flag="--auth-token-file",
        help=(
            "file holding the bearer token every OTLP request must carry (401 / `UNAUTHENTICATED` "
            "without it); `None`: no token"
        ),
    ),
    "serve_tls_cert": Source(
        _path,
        "RAGPULSE_SERVE_TLS_CERT",
        flag="--tls-cert",
        help="PEM certificate chain both receivers serve TLS with; `None`: plain text",
    ),
    "serve_tls_key": Source(
        _path,
        "RAGPULSE_SERVE_TLS_KEY",
        flag="--tls-key",
        help="PEM private key of `serve_tls_cert`",
    ),
    "serve_max_request_bytes": Source(
        _count,
        "RAGPULSE_SERVE_MAX_REQUEST_BYTES",
        flag="--max-request-bytes",
        help=(
            "largest request body (after gzip) or gRPC message `ragpulse serve` takes (32 MiB); "
            "larger ones get 413 / `RESOURCE_EXHAUSTED`"
        ),
    ),
    "serve_assembly_timeout": Source(
        _seconds,
        "RAGPULSE_SERVE_ASSEMBLY_TIMEOUT",
        flag="--assembly-timeout",
        help="seconds a unit waits for the spans its record needs",
    ),
    "serve_assembly_traces": Source(
        _count,
        "RAGPULSE_SERVE_ASSEMBLY_TRACES",
        flag="--assembly-traces",
        help="traces held in assembly at once; past it the oldest goes on (counted `evicted`)",
    ),
    "serve_assembly_bytes": Source(
        _count,
        "RAGPULSE_SERVE_ASSEMBLY_BYTES",
        flag="--assembly-bytes",
        help="estimated bytes held in assembly (64 MiB); past it the oldest trace goes on",
    ),
    "serve_drain_timeout": Source(
        _seconds,
        "RAGPULSE_SERVE_DRAIN_TIMEOUT",
        flag="--drain-timeout",
        help="seconds SIGTERM waits for evaluations and exports before serve exits",
    ),
    "serve_retry_after": Source(
        _seconds,
        "RAGPULSE_SERVE_RETRY_AFTER",
        flag="--retry-after",
        help=(
            "seconds a sender refused while the buffer is full or serve drains is told to wait "
            "(`Retry-After`, `RetryInfo`)"
        ),
    ),
}
