"""``Settings``: every value ``configure()`` reads, parsed once, in one place.

The table (``ragpulse.settings._table``) has a row per setting: its variable, its parser,
where code sets it and what it means; ``Settings`` holds the defaults. Users set values in
groups (``ragpulse.settings.options``: ``ExportOptions``, ``BoundsOptions``, ...), each a
section of that table, or by a handful of ``configure()`` keywords of their own.

Keyword arguments come first, ``RAGPULSE_*`` variables second, and the
OpenTelemetry ``OTEL_*`` variables ragpulse reads are checked the same way. The
parser never raises: a value that cannot be used (``RAGPULSE_PROMETHEUS_PORT=9464x``,
``sample_rate=2``) is logged once, with its name and value, and replaced by the
default, because a bad setting must never stop the application it observes.

After parsing, the relations between settings are checked: a held span must be
able to wait for one whole evaluation (``evaluation_timeout`` bounds all of it,
a resilient judge's retries and backoff included), else scores arrive late as
carrier spans and a warning says so.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from ragpulse.adapters._tools import ToolPolicy
from ragpulse.capture._content import (
    DEFAULT_CONVENTIONS,
    DEFAULT_MAX_DOCUMENTS,
    DEFAULT_MAX_DOCUMENTS_BYTES,
    DEFAULT_MAX_RECORD_CHARS,
    DEFAULT_MAX_SPAN_BYTES,
    DEFAULT_MAX_TEXT_BYTES,
    ContentPolicy,
    Redactor,
)
from ragpulse.judges._kinds import DEFAULT_BAND
from ragpulse.metrics import ALL_METRICS
from ragpulse.metrics.correctness import DEFAULT_CORRECTNESS_MODE
from ragpulse.settings._parse import PROTOCOLS, Invalid
from ragpulse.settings._table import GROUPS, RETIRED, SIGNALS, SOURCES

__all__ = [
    "DEFAULT_EVALUATION_TIMEOUT",
    "GROUPS",
    "LOCAL_TIMEOUT_HEADROOM",
    "PROTOCOLS",
    "SIGNALS",
    "SOURCES",
    "Invalid",
    "Settings",
    "variable_of",
]

_logger = logging.getLogger("ragpulse.settings")

MiB: Final = 1024 * 1024

DEFAULT_EVALUATION_TIMEOUT: Final = 20.0
"""Seconds one evaluation may take when ``evaluation_timeout`` is not set and the judge
has no cost estimate (the offline and LLM judges)."""
LOCAL_TIMEOUT_HEADROOM: Final = 4.0
"""A local model's default timeout: this many typical records' estimated cost (a record
longer than typical, a core busier than assumed), never under the default."""


_HIDDEN = "<hidden>"
"""What is logged in place of a rejected secret value."""

# Each (name, value) rejected is logged once per process, however often configure() runs.
_reported: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Settings:
    """Every value ``configure()`` uses, checked; see ``Settings.load``.

    Durations are in seconds and sizes in bytes. Each field's meaning is its row's ``help``
    in the table (rendered as ``docs/settings.md``); ``rejected`` lists the values that
    were replaced by their default, by source name (``RAGPULSE_PROMETHEUS_PORT`` or
    ``sample_rate``).
    """

    service_name: str | None = None
    endpoint: str | None = None
    traces_endpoint: str | None = None
    metrics_endpoint: str | None = None
    logs_endpoint: str | None = None
    protocol: str = "http/protobuf"
    headers: Mapping[str, str] | None = None
    export_timeout: float = 10.0
    compression: str = "none"
    traces_protocol: str | None = None
    metrics_protocol: str | None = None
    logs_protocol: str | None = None
    traces_timeout: float | None = None
    metrics_timeout: float | None = None
    logs_timeout: float | None = None
    traces_compression: str | None = None
    metrics_compression: str | None = None
    logs_compression: str | None = None
    metric_export_interval: float | None = None
    metric_export_interval_env: float | None = None
    evaluate: bool = True
    output_file: Path = Path("ragpulse-traces.jsonl")
    prometheus_port: int | None = None
    prometheus_host: str = "127.0.0.1"
    sample_rate: float = 1.0
    max_evaluations_per_minute: float | None = None
    max_judge_tokens_per_hour: float | None = None
    always_evaluate: tuple[str, ...] = ()
    metric_modules: tuple[str, ...] = ()
    metrics: tuple[str, ...] = tuple(ALL_METRICS)
    strict: bool = False
    correctness_mode: str = DEFAULT_CORRECTNESS_MODE
    judge: str = "lexical"
    judge_model: str | None = None
    judge_label_map: str | None = None
    judge_threads: int | None = None
    judge_device: str = "cpu"
    cascade_escalate: str = "openai"
    cascade_band: tuple[float, float] = DEFAULT_BAND
    thresholds: Mapping[str, float] | None = None
    metric_attributes: tuple[str, ...] = ()
    metric_attributes_limit: int = 100
    inline_annotations: bool = False
    capture_content: bool = True
    hash_key: str | None = field(default=None, repr=False)
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    max_documents_bytes: int = DEFAULT_MAX_DOCUMENTS_BYTES
    max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES
    max_documents: int = DEFAULT_MAX_DOCUMENTS
    capture_conventions: tuple[str, ...] = DEFAULT_CONVENTIONS
    max_record_chars: int = DEFAULT_MAX_RECORD_CHARS
    evidence_tools: tuple[str, ...] = ("*",)
    action_tools: tuple[str, ...] = ()
    trust_history: bool = False
    hold_timeout: float = 30.0
    evaluation_timeout: float | None = None
    concurrency: int = 4
    judge_nice: int = 0
    max_queue_size: int = 1000
    max_queue_bytes: int = 64 * 1024 * 1024
    max_input_chars: int = 500_000
    max_held_spans: int = 2048
    max_held_bytes: int = 64 * 1024 * 1024
    shutdown_timeout: float = 5.0
    handle_sigterm: bool = True
    export_buffer_bytes: int = 64 * MiB
    export_buffer_seconds: float = 120.0
    export_max_batch_bytes: int = 3 * MiB + MiB // 2
    # --- read by the OpenTelemetry SDK too: checked here, then given to it ---------------------
    bsp_schedule_delay: float = 5.0
    # ragpulse's exporters never block, so their batch processors' queue only absorbs a burst
    # while the processor's thread waits for the interpreter lock: the SDK's 2,048 lost 6 %
    # of 20,000 spans ended by four threads at once.
    bsp_max_queue_size: int = 65_536
    bsp_max_export_batch_size: int = 512
    bsp_export_timeout: float = 30.0
    blrp_schedule_delay: float = 1.0
    blrp_max_queue_size: int = 65_536
    blrp_max_export_batch_size: int = 512
    blrp_export_timeout: float = 30.0
    metric_export_timeout: float = 30.0
    metrics_exemplar_filter: str = "trace_based"
    traces_sampler: str = "parentbased_always_on"
    traces_sampler_arg: float = 1.0
    attribute_count_limit: int | None = None
    attribute_value_length_limit: int | None = None
    span_attribute_count_limit: int | None = None
    span_attribute_value_length_limit: int | None = None
    event_attribute_count_limit: int | None = None
    link_attribute_count_limit: int | None = None
    span_event_count_limit: int | None = None
    span_link_count_limit: int | None = None
    logrecord_attribute_count_limit: int | None = None
    logrecord_attribute_value_length_limit: int | None = None
    python_tracer_provider: str | None = None
    python_meter_provider: str | None = None
    python_logger_provider: str | None = None
    relay_max_batch_items: int = 512
    relay_linger: float = 0.1
    phoenix_max_queue_size: int = 10_000
    phoenix_batch_size: int = 100
    phoenix_timeout: float = 5.0
    phoenix_flush_timeout: float = 10.0
    # --- ragpulse serve ---------------------------------------------------------------------
    serve_buffer_bytes: int = 128 * MiB
    serve_dedupe_window: float = 600.0
    serve_dedupe_units: int = 100_000
    serve_idle_timeout: float = 30.0
    serve_request_timeout: float = 60.0
    serve_auth_token_file: Path | None = None
    serve_tls_cert: Path | None = None
    serve_tls_key: Path | None = None
    serve_max_request_bytes: int = 32 * MiB
    serve_assembly_timeout: float = 2.0
    serve_assembly_traces: int = 10_000
    serve_assembly_bytes: int = 64 * MiB
    serve_drain_timeout: float = 30.0
    serve_retry_after: float = 1.0
    rejected: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(
        cls, keywords: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Settings from ``keywords`` (``None`` values skipped), then ``environ``, then defaults.

        Never raises: an unusable value is logged once and its default used.
        """
        keywords = {k: v for k, v in (keywords or {}).items() if v is not None}
        unknown = set(keywords) - {n for n, s in SOURCES.items() if s.settable}
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        environ = os.environ if environ is None else environ
        _warn_retired(environ)
        values: dict[str, Any] = {}
        rejected: dict[str, str] = {}
        for name, source in SOURCES.items():
            candidates: list[tuple[str, object]] = []
            if name in keywords:
                candidates.append((name, keywords[name]))
            raw = environ.get(source.env) if source.env is not None else None
            if source.env is not None and raw is not None and raw.strip():
                candidates.append((source.env, raw))
            for given_as, value in candidates:
                try:
                    values[name] = source.parse(value)
                    break
                except Invalid as why:
                    shown = _HIDDEN if source.secret else value
                    rejected[given_as] = repr(shown)
                    _report(given_as, shown, str(why))
        settings = cls(**values, rejected=rejected)
        settings.check_relations()
        return settings

    def signal_endpoint(self, signal: str) -> tuple[str | None, bool]:
        """Where ``signal`` (``traces``, ``metrics``, ``logs``) is exported, and whether that
        URL is the signal's own (used as it is) rather than the generic base endpoint (to
        which an HTTP exporter appends ``/v1/<signal>``); ``(None, False)``: neither is set."""
        own: str | None = getattr(self, f"{signal}_endpoint")
        return (own, True) if own else (self.endpoint, False)

    def signal_protocol(self, signal: str) -> str:
        """``signal``'s OTLP protocol: its own variable's, else ``protocol``."""
        own: str | None = getattr(self, f"{signal}_protocol")
        return own or self.protocol

    def signal_timeout(self, signal: str) -> float:
        """Seconds one OTLP request of ``signal`` may take: its own variable's, else
        ``export_timeout``."""
        own: float | None = getattr(self, f"{signal}_timeout")
        return self.export_timeout if own is None else own

    def signal_compression(self, signal: str) -> str:
        """``signal``'s OTLP compression: its own variable's, else ``compression``."""
        own: str | None = getattr(self, f"{signal}_compression")
        return own or self.compression

    @property
    def tool_policy(self) -> ToolPolicy:
        """Which tools' results are evidence, from ``evidence_tools`` and ``action_tools``, and
        whether the history's are trusted (``trust_history``)."""
        return ToolPolicy(
            evidence=self.evidence_tools,
            action=self.action_tools,
            trust_history=self.trust_history,
        )

    @property
    def metric_interval(self) -> float:
        """Seconds between metric exports, from the keyword, the variable or 60."""
        return self.metric_export_interval or self.metric_export_interval_env or 60.0

    def content_policy(self, redact: Redactor | None = None) -> ContentPolicy:
        """The ``ContentPolicy`` these settings describe, with ``redact`` as its hook."""
        return ContentPolicy(
            capture_content=self.capture_content,
            redact=redact,
            max_text_bytes=self.max_text_bytes,
            max_documents_bytes=self.max_documents_bytes,
            max_span_bytes=self.max_span_bytes,
            max_documents=self.max_documents,
            conventions=self.capture_conventions,
            max_record_chars=self.max_record_chars,
            hash_key=self.hash_key,
        )

    def evaluation_timeout_for(self, judge: object) -> float:
        """Seconds one evaluation by ``judge`` may take: ``evaluation_timeout`` when set,
        else what the judge kind needs (``LOCAL_TIMEOUT_HEADROOM`` times a local model's
        estimated cost of a typical record, at least ``DEFAULT_EVALUATION_TIMEOUT``)."""
        if self.evaluation_timeout is not None:
            return self.evaluation_timeout
        from ragpulse.judges.local._cost import estimated_seconds

        estimate = estimated_seconds(judge)
        if estimate is None:
            return DEFAULT_EVALUATION_TIMEOUT
        return max(DEFAULT_EVALUATION_TIMEOUT, math.ceil(LOCAL_TIMEOUT_HEADROOM * estimate))

    def check_judge_cost(self, judge: object) -> str | None:
        """Warn once when ``judge``'s estimated cost of a typical record exceeds the
        configured ``evaluation_timeout``; the warning, or None."""
        from ragpulse.judges.local._cost import estimated_seconds

        estimate = estimated_seconds(judge)
        timeout = self.evaluation_timeout_for(judge)
        if estimate is None or estimate <= timeout:
            return None
        warning = (
            f"the {getattr(judge, 'name', 'local')} judge's model needs about {estimate:.0f}s "
            f"for a typical record on this CPU (estimated from its size), more than "
            f"evaluation_timeout={timeout:g}s: most evaluations will time out. Raise "
            "RAGPULSE_EVAL_TIMEOUT (or leave it unset to follow the judge), use a smaller "
            "or int8-quantized model, more judge threads, or a GPU (judge_device)"
        )
        if ("cost", warning) not in _reported:
            _reported.add(("cost", warning))
            _logger.warning("ragpulse: %s", warning)
        return warning

    def check_relations(self) -> list[str]:
        """Warn (once each) where settings contradict each other; return the warnings."""
        warnings: list[str] = []
        timeout = (
            DEFAULT_EVALUATION_TIMEOUT
            if self.evaluation_timeout is None
            else self.evaluation_timeout
        )
        if self.evaluate and self.hold_timeout < timeout:
            warnings.append(
                f"hold_timeout={self.hold_timeout:g}s is shorter than one evaluation may take "
                f"(evaluation_timeout={timeout:g}s, retries included); slow "
                "results will arrive as carrier spans after their span went out 'pending'"
            )
        if self.export_buffer_seconds < 60.0:
            warnings.append(
                f"export_buffer_seconds={self.export_buffer_seconds:g}s does not cover a 60s "
                "backend outage; exports older than that are dropped"
            )
        for processor in ("bsp", "blrp"):  # the SDK refuses a batch larger than the queue
            queue = getattr(self, f"{processor}_max_queue_size")
            batch = getattr(self, f"{processor}_max_export_batch_size")
            if batch > queue:
                warnings.append(
                    f"{variable_of(f'{processor}_max_export_batch_size')}={batch} is larger than "
                    f"the queue ({queue}); batches of {queue} are exported"
                )
        for warning in warnings:
            if ("relation", warning) not in _reported:
                _reported.add(("relation", warning))
                _logger.warning("ragpulse: %s", warning)
        return warnings


def variable_of(name: str) -> str | None:
    """The environment variable the setting ``name`` is read from; ``None``: none."""
    source = SOURCES.get(name)
    return None if source is None else source.env


def _warn_retired(environ: Mapping[str, str]) -> None:
    """One warning per retired variable still set: it is not read any more."""
    for old, new in RETIRED.items():
        if environ.get(old, "").strip() and ("retired", old) not in _reported:
            _reported.add(("retired", old))
            _logger.warning("ragpulse: %s is no longer read; set %s instead", old, new)


def _report(name: str, value: object, why: str) -> None:
    text = repr(value)
    if (name, text) in _reported:
        return
    _reported.add((name, text))
    default = next(f.default for f in fields(Settings) if f.name == _field_of(name))
    _logger.warning(
        "ragpulse: ignoring %s=%s (%s); using the default (%r)", name, text[:200], why, default
    )


def _field_of(name: str) -> str:
    if name in SOURCES:
        return name
    return next(n for n, s in SOURCES.items() if name == s.env)
