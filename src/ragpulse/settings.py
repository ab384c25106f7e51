"""``Settings``: every value ``configure()`` reads, parsed once, in one place.

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
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from ragpulse.adapters._tools import ToolPolicy
from ragpulse.capture._content import (
    CONVENTIONS,
    DEFAULT_CONVENTIONS,
    DEFAULT_MAX_DOCUMENTS,
    DEFAULT_MAX_DOCUMENTS_BYTES,
    DEFAULT_MAX_RECORD_CHARS,
    DEFAULT_MAX_SPAN_BYTES,
    DEFAULT_MAX_TEXT_BYTES,
    ContentPolicy,
    Redactor,
)
from ragpulse.judges._kinds import DEFAULT_BAND, ESCALATION_KINDS, JUDGE_KINDS, parse_band
from ragpulse.metrics import ALL_METRICS
from ragpulse.metrics.correctness import CORRECTNESS_MODES, DEFAULT_CORRECTNESS_MODE

__all__ = ["DEFAULT_EVALUATION_TIMEOUT", "LOCAL_TIMEOUT_HEADROOM", "Settings"]

_logger = logging.getLogger("ragpulse.settings")

MiB: Final = 1024 * 1024

PROTOCOLS: Final = ("http/protobuf", "grpc")

DEFAULT_EVALUATION_TIMEOUT: Final = 20.0
"""Seconds one evaluation may take when ``evaluation_timeout`` is not set and the judge
has no cost estimate (the offline and LLM judges)."""
LOCAL_TIMEOUT_HEADROOM: Final = 4.0
"""A local model's default timeout: this many typical records' estimated cost (a record
longer than typical, a core busier than assumed), never under the default."""


class _Invalid(ValueError):
    """A value that cannot be used; the message says why."""


# --- parsers: text (from the environment) or a keyword's value -> a checked value -------------


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise _Invalid("not a boolean (true/false)")


def _number(kind: Callable[[Any], Any], minimum: float, *, strict: bool) -> Callable[[object], Any]:
    def parse(value: object) -> Any:
        if isinstance(value, bool):
            raise _Invalid("not a number")
        try:
            number = kind(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError, OverflowError):
            raise _Invalid("not a number") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise _Invalid("not a finite number")
        if number < minimum or (strict and number == minimum):
            raise _Invalid(f"must be {'above' if strict else 'at least'} {minimum:g}")
        return number

    return parse


def _as_int(value: object) -> int:
    if isinstance(value, float) and not value.is_integer():
        raise _Invalid("not a whole number")
    return int(value) if isinstance(value, int | float) else int(str(value).strip())


_positive = _number(float, 0.0, strict=True)
_count = _number(_as_int, 1, strict=False)
_size = _number(_as_int, 0, strict=False)


def _port(value: object) -> int:
    port = int(_number(_as_int, 0, strict=False)(value))
    if port > 65535:
        raise _Invalid("not a TCP port (0-65535)")
    return port


def _nice(value: object) -> int:
    nice = int(_number(_as_int, 0, strict=False)(value))
    if nice > 19:
        raise _Invalid("not a nice value (0-19)")
    return nice


def _rate(value: object) -> float:
    rate = float(_number(float, 0.0, strict=False)(value))
    if rate > 1.0:
        raise _Invalid("not a rate in [0, 1]")
    return rate


def _text(value: object) -> str:
    text = str(value).strip()
    if not text:
        raise _Invalid("empty")
    return text


def _url(value: object) -> str:
    text = _text(value)
    if not text.startswith(("http://", "https://")):
        raise _Invalid("not an http:// or https:// URL")
    return text


def _protocol(value: object) -> str:
    text = _text(value).lower()
    if text not in PROTOCOLS:
        raise _Invalid(f"not one of {', '.join(PROTOCOLS)}")
    return text


def _compression(value: object) -> str:
    text = _text(value).lower()
    if text not in ("gzip", "none"):
        raise _Invalid("not gzip or none")
    return text


def _millis_as_seconds(value: object) -> float:
    return float(_positive(value)) / 1000.0


def _seconds(value: object) -> float:
    return float(_positive(value))


def _names(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise _Invalid("a collection of names, not one string")
    if not isinstance(value, Collection) or not all(isinstance(v, str) for v in value):
        raise _Invalid("not a collection of names")
    return tuple(value)


def _globs(value: object) -> tuple[str, ...]:
    """Tool-name patterns: ``"search_*,lookup"`` or a collection of them."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return tuple(name.strip() for name in _names(value) if name.strip())


def _conventions(value: object) -> tuple[str, ...]:
    names = (
        tuple(part.strip().lower() for part in value.split(",") if part.strip())
        if isinstance(value, str)
        else _names(value)
    )
    if not names or any(name not in CONVENTIONS for name in names):
        raise _Invalid(f"not a comma-separated subset of {', '.join(CONVENTIONS)}")
    return names


def _metric_modules(value: object) -> tuple[str, ...]:
    """Files or module names of the user's metrics, imported as they are read."""
    from ragpulse.metrics._registry import load_metric_module

    modules = (
        tuple(part.strip() for part in value.split(",") if part.strip())
        if isinstance(value, str)
        else _names(value)
    )
    for module in modules:
        try:
            load_metric_module(module)
        except ImportError as exc:
            raise _Invalid(str(exc)) from None
    return modules


def _metrics(value: object) -> tuple[str, ...]:
    from ragpulse.metrics._registry import known

    if isinstance(value, str):
        names = tuple(part.strip() for part in value.split(",") if part.strip())
    elif isinstance(value, Collection):
        # A metric object (RubricMetric) stands for its name; it registered itself.
        given = [getattr(getattr(v, "spec", None), "name", v) for v in value]
        if not all(isinstance(n, str) for n in given):
            raise _Invalid("not a list of metric names")
        names = tuple(str(n) for n in given)
    else:
        raise _Invalid("not a list of metric names")
    names = tuple(n if n in known() else n.lower() for n in names)
    unknown = sorted(set(names) - set(known()))
    if unknown or not names:
        raise _Invalid(f"unknown metrics {unknown}; known: {list(known())}")
    return names


def _one_of(names: Collection[str]) -> Callable[[object], str]:
    def parse(value: object) -> str:
        text = _text(value).lower()
        if text not in names:
            raise _Invalid(f"not one of {', '.join(names)}")
        return text

    return parse


_correctness_mode = _one_of(CORRECTNESS_MODES)
_judge_kind = _one_of(JUDGE_KINDS)
_escalation_kind = _one_of(ESCALATION_KINDS)


def _device(value: object) -> str:
    from ragpulse.judges.local._device import requested_providers

    text = ",".join(value) if isinstance(value, list | tuple) else _text(value)
    try:
        requested_providers(text)
    except ValueError as exc:
        raise _Invalid(str(exc)) from None
    return text


def _band(value: object) -> tuple[float, float]:
    if not isinstance(value, str | tuple | list):
        raise _Invalid("not LOW,HIGH")
    try:
        return parse_band(value if isinstance(value, str) else (value[0], value[1]))
    except (ValueError, IndexError, TypeError) as exc:
        raise _Invalid(str(exc)) from None


def _thresholds(value: object) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise _Invalid("not a mapping of metric to threshold")
    checked: dict[str, float] = {}
    for name, threshold in value.items():
        if not isinstance(name, str):
            raise _Invalid("metric names must be strings")
        checked[name] = _rate(threshold)
    return checked


def _headers(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _Invalid("not a mapping of header names to strings")
    return dict(value)


def _path(value: object) -> Path:
    if isinstance(value, os.PathLike):
        return Path(value)
    return Path(_text(value))


@dataclass(frozen=True)
class _Source:
    """Where one setting comes from and how its value is checked."""

    parse: Callable[[object], Any]
    env: str | None = None
    keyword: bool = True
    older_env: str | None = None
    """An older name of the variable, read when the current one is not set."""
    secret: bool = False
    """A credential: a rejected value is never logged or listed, only its name."""


SIGNALS: Final = ("traces", "metrics", "logs")
"""The OTLP signals, as the per-signal settings and variables name them."""

# Every setting, its environment variable (if any) and its parser. The field defaults of
# ``Settings`` are the defaults; this table is the only place a variable name is spelled.
_SOURCES: Final[Mapping[str, _Source]] = {
    "service_name": _Source(_text),
    "endpoint": _Source(_url, "OTEL_EXPORTER_OTLP_ENDPOINT"),
    "traces_endpoint": _Source(_url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", keyword=False),
    "metrics_endpoint": _Source(_url, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", keyword=False),
    "logs_endpoint": _Source(_url, "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", keyword=False),
    "protocol": _Source(_protocol, "OTEL_EXPORTER_OTLP_PROTOCOL"),
    "headers": _Source(_headers),
    "export_timeout": _Source(_seconds, "OTEL_EXPORTER_OTLP_TIMEOUT"),
    "compression": _Source(_compression, "OTEL_EXPORTER_OTLP_COMPRESSION", keyword=False),
    # Each signal's own variable wins over the generic one, as the OTLP exporter
    # specification says; the SDK's exporters read the per-signal headers, certificate,
    # client key and certificate, and insecure flag themselves.
    **{
        f"{signal}_{name}": _Source(parse, f"OTEL_EXPORTER_OTLP_{signal.upper()}_{var}", False)
        for signal in SIGNALS
        for name, var, parse in (
            ("protocol", "PROTOCOL", _protocol),
            ("timeout", "TIMEOUT", _seconds),
            ("compression", "COMPRESSION", _compression),
        )
    },
    "metric_export_interval": _Source(_seconds),
    "metric_export_interval_env": _Source(
        _millis_as_seconds, "OTEL_METRIC_EXPORT_INTERVAL", keyword=False
    ),
    "evaluate": _Source(_as_bool, "RAGPULSE_EVALUATE"),
    "output_file": _Source(_path, "RAGPULSE_OUTPUT_FILE"),
    "prometheus_port": _Source(_port, "RAGPULSE_PROMETHEUS_PORT"),
    "prometheus_host": _Source(_text, "RAGPULSE_PROMETHEUS_HOST"),
    "sample_rate": _Source(_rate, "RAGPULSE_SAMPLE_RATE"),
    "max_evaluations_per_minute": _Source(_positive, "RAGPULSE_MAX_EVALUATIONS_PER_MINUTE"),
    "max_judge_tokens_per_hour": _Source(_positive, "RAGPULSE_MAX_JUDGE_TOKENS_PER_HOUR"),
    "always_evaluate": _Source(_names),
    "metric_modules": _Source(_metric_modules, "RAGPULSE_METRIC_MODULES"),
    "metrics_to_compute": _Source(_metrics, "RAGPULSE_METRICS"),
    "strict": _Source(_as_bool, "RAGPULSE_STRICT"),
    "correctness_mode": _Source(_correctness_mode, "RAGPULSE_CORRECTNESS_MODE"),
    "judge": _Source(_judge_kind, "RAGPULSE_JUDGE"),
    "judge_model": _Source(_text, "RAGPULSE_JUDGE_MODEL"),
    "judge_label_map": _Source(_text, "RAGPULSE_JUDGE_LABEL_MAP"),
    "judge_threads": _Source(_count, "RAGPULSE_JUDGE_THREADS"),
    "judge_device": _Source(_device, "RAGPULSE_JUDGE_DEVICE"),
    "cascade_escalate": _Source(_escalation_kind, "RAGPULSE_CASCADE_ESCALATE"),
    "cascade_band": _Source(_band, "RAGPULSE_CASCADE_BAND"),
    "thresholds": _Source(_thresholds),
    "inline_annotations": _Source(_as_bool),
    "capture_content": _Source(_as_bool, "RAGPULSE_CAPTURE_CONTENT"),
    "hash_key": _Source(_text, "RAGPULSE_HASH_KEY", secret=True),
    "max_text_bytes": _Source(
        _size, "RAGPULSE_MAX_TEXT_BYTES", older_env="RAGPULSE_MAX_TEXT_LENGTH"
    ),
    "max_documents_bytes": _Source(_size, "RAGPULSE_MAX_DOCUMENTS_BYTES"),
    "max_span_bytes": _Source(_size, "RAGPULSE_MAX_SPAN_BYTES"),
    "max_documents": _Source(_size, "RAGPULSE_MAX_DOCUMENTS"),
    "capture_conventions": _Source(_conventions, "RAGPULSE_CAPTURE_CONVENTIONS"),
    "max_record_chars": _Source(_size, "RAGPULSE_MAX_RECORD_CHARS"),
    "evidence_tools": _Source(_globs, "RAGPULSE_EVIDENCE_TOOLS"),
    "action_tools": _Source(_globs, "RAGPULSE_ACTION_TOOLS"),
    "hold_timeout": _Source(_seconds, "RAGPULSE_HOLD_TIMEOUT"),
    "evaluation_timeout": _Source(_seconds, "RAGPULSE_EVAL_TIMEOUT"),
    "concurrency": _Source(_count, "RAGPULSE_EVAL_CONCURRENCY"),
    "judge_nice": _Source(_nice, "RAGPULSE_JUDGE_NICE"),
    "max_queue_size": _Source(_count, "RAGPULSE_MAX_QUEUE_SIZE"),
    "max_queue_bytes": _Source(_count, "RAGPULSE_MAX_QUEUE_BYTES"),
    "max_input_chars": _Source(_count, "RAGPULSE_MAX_INPUT_CHARS"),
    "max_held_spans": _Source(_count, "RAGPULSE_MAX_HELD_SPANS"),
    "max_held_bytes": _Source(_count, "RAGPULSE_MAX_HELD_BYTES"),
    "shutdown_timeout": _Source(_seconds, "RAGPULSE_SHUTDOWN_TIMEOUT"),
    "handle_sigterm": _Source(_as_bool, "RAGPULSE_HANDLE_SIGTERM"),
    "export_buffer_bytes": _Source(_count, "RAGPULSE_EXPORT_BUFFER_BYTES"),
    "export_buffer_seconds": _Source(_seconds, "RAGPULSE_EXPORT_BUFFER_SECONDS"),
    "export_max_batch_bytes": _Source(_count, "RAGPULSE_EXPORT_MAX_BATCH_BYTES"),
    # Defaults of parts built in code: no keyword, no variable of their own.
    "export_queue_size": _Source(_count, keyword=False),
    "relay_max_batch_items": _Source(_count, keyword=False),
    "relay_linger": _Source(_seconds, keyword=False),
    "phoenix_max_queue_size": _Source(_count, keyword=False),
    "phoenix_batch_size": _Source(_count, keyword=False),
    "phoenix_timeout": _Source(_seconds, keyword=False),
    "phoenix_flush_timeout": _Source(_seconds, keyword=False),
    # ragpulse serve
    "serve_buffer_bytes": _Source(_count, "RAGPULSE_SERVE_BUFFER_BYTES"),
    "serve_dedupe_window": _Source(_seconds, "RAGPULSE_SERVE_DEDUPE_WINDOW"),
    "serve_dedupe_units": _Source(_count, "RAGPULSE_SERVE_DEDUPE_UNITS"),
    "serve_idle_timeout": _Source(_seconds, "RAGPULSE_SERVE_IDLE_TIMEOUT"),
    "serve_request_timeout": _Source(_seconds, "RAGPULSE_SERVE_REQUEST_TIMEOUT"),
    "serve_auth_token_file": _Source(_path, "RAGPULSE_SERVE_AUTH_TOKEN_FILE"),
    "serve_tls_cert": _Source(_path, "RAGPULSE_SERVE_TLS_CERT"),
    "serve_tls_key": _Source(_path, "RAGPULSE_SERVE_TLS_KEY"),
    "serve_max_request_bytes": _Source(_count, "RAGPULSE_SERVE_MAX_REQUEST_BYTES"),
    "serve_assembly_timeout": _Source(_seconds, "RAGPULSE_SERVE_ASSEMBLY_TIMEOUT"),
    "serve_assembly_traces": _Source(_count, "RAGPULSE_SERVE_ASSEMBLY_TRACES"),
    "serve_assembly_bytes": _Source(_count, "RAGPULSE_SERVE_ASSEMBLY_BYTES"),
    "serve_drain_timeout": _Source(_seconds, "RAGPULSE_SERVE_DRAIN_TIMEOUT"),
    "serve_retry_after": _Source(_seconds, "RAGPULSE_SERVE_RETRY_AFTER"),
}

_HIDDEN = "<hidden>"
"""What is logged in place of a rejected secret value."""

# Each (name, value) rejected is logged once per process, however often configure() runs.
_reported: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Settings:
    """Every value ``configure()`` uses, checked; see ``Settings.load``.

    Durations are in seconds and sizes in bytes. The defaults are the ones
    documented in the README; ``rejected`` lists the values that were replaced by
    their default, by source name (``RAGPULSE_PROMETHEUS_PORT`` or ``sample_rate``).
    """

    service_name: str | None = None
    """``service.name``; ``None``: ``OTEL_SERVICE_NAME`` or the SDK's default."""
    endpoint: str | None = None
    """OTLP base endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``); ``None``: per-signal or files."""
    traces_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: the span exporter reads it itself."""
    metrics_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``."""
    logs_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``."""
    protocol: str = "http/protobuf"
    """``http/protobuf`` or ``grpc`` (``OTEL_EXPORTER_OTLP_PROTOCOL``)."""
    headers: Mapping[str, str] | None = None
    """Extra OTLP headers; ``None``: ``OTEL_EXPORTER_OTLP_HEADERS``."""
    export_timeout: float = 10.0
    """Seconds one OTLP request may take, its exporter's own retries included."""
    compression: str = "none"
    """OTLP compression, ``gzip`` or ``none`` (``OTEL_EXPORTER_OTLP_COMPRESSION``)."""
    traces_protocol: str | None = None
    """``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``: the spans' own protocol; None: ``protocol``."""
    metrics_protocol: str | None = None
    """``OTEL_EXPORTER_OTLP_METRICS_PROTOCOL``."""
    logs_protocol: str | None = None
    """``OTEL_EXPORTER_OTLP_LOGS_PROTOCOL``."""
    traces_timeout: float | None = None
    """``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` (seconds, as the Python SDK reads it)."""
    metrics_timeout: float | None = None
    """``OTEL_EXPORTER_OTLP_METRICS_TIMEOUT``."""
    logs_timeout: float | None = None
    """``OTEL_EXPORTER_OTLP_LOGS_TIMEOUT``."""
    traces_compression: str | None = None
    """``OTEL_EXPORTER_OTLP_TRACES_COMPRESSION``."""
    metrics_compression: str | None = None
    """``OTEL_EXPORTER_OTLP_METRICS_COMPRESSION``."""
    logs_compression: str | None = None
    """``OTEL_EXPORTER_OTLP_LOGS_COMPRESSION``."""
    metric_export_interval: float | None = None
    """Seconds between metric exports; ``None``: ``OTEL_METRIC_EXPORT_INTERVAL`` or 60."""
    metric_export_interval_env: float | None = None
    """``OTEL_METRIC_EXPORT_INTERVAL`` (milliseconds there), in seconds."""
    evaluate: bool = True
    """``False``: record and export spans without evaluating them."""
    output_file: Path = Path("ragpulse-traces.jsonl")
    """Where OTLP-JSON lines go when no endpoint is configured."""
    prometheus_port: int | None = None
    """Serve ``/metrics`` on this port; ``None``: no Prometheus endpoint."""
    prometheus_host: str = "127.0.0.1"
    """The address the Prometheus endpoint listens on."""
    sample_rate: float = 1.0
    """Share of traces evaluated, chosen by trace id."""
    max_evaluations_per_minute: float | None = None
    """Token bucket on evaluations; ``None``: no limit."""
    max_judge_tokens_per_hour: float | None = None
    """Token bucket on judge tokens; ``None``: no limit."""
    always_evaluate: tuple[str, ...] = ()
    """Globs on unit names or ``http.route`` always evaluated."""
    metric_modules: tuple[str, ...] = ()
    """Files or modules of the user's metrics, imported first (``RAGPULSE_METRIC_MODULES``,
    ``--metric-module``), so ``metrics_to_compute`` may name them."""
    metrics_to_compute: tuple[str, ...] = tuple(ALL_METRICS)
    """The metrics the judge is asked for (``configure(metrics=...)``, ``RAGPULSE_METRICS``)."""
    strict: bool = False
    """Count INFERRED claims as unfaithful (DeepEval's ``penalize_ambiguous_claims``)."""
    correctness_mode: str = DEFAULT_CORRECTNESS_MODE
    """How the default judge scores correctness: ``agreement``, or Ragas' ``precision``,
    ``recall``, ``f1`` (a judge passed to ``configure()`` keeps its own mode)."""
    judge: str = "lexical"
    """The judge built when ``configure()`` is given none (``RAGPULSE_JUDGE``): ``lexical``,
    ``openai``, ``nli``, ``tokens`` (local ONNX models) or ``cascade``."""
    judge_model: str | None = None
    """The model name (``openai``) or the model directory (``nli``, ``tokens``) of that judge,
    or of a cascade's escalation judge (``RAGPULSE_JUDGE_MODEL``)."""
    judge_label_map: str | None = None
    """Names of a local model's classes, ``1=supported`` (``RAGPULSE_JUDGE_LABEL_MAP``)."""
    judge_threads: int | None = None
    """Inference threads per judge process of a local model (``RAGPULSE_JUDGE_THREADS``);
    ``None``: each process's share of the CPUs ragpulse may use (affinity, cgroup quota)."""
    judge_device: str = "cpu"
    """Where a local model runs (``RAGPULSE_JUDGE_DEVICE``): ``cpu``, ``cuda`` (with
    ``onnxruntime-gpu``) or onnxruntime providers in order, comma-separated; a provider
    onnxruntime lacks is logged once and the CPU used."""
    cascade_escalate: str = "openai"
    """The judge a cascade escalates to: ``openai``, ``nli`` or ``tokens``."""
    cascade_band: tuple[float, float] = DEFAULT_BAND
    """Claim confidences a cascade's screen is unsure of (``RAGPULSE_CASCADE_BAND=0.35,0.85``)."""
    thresholds: Mapping[str, float] | None = None
    """Per-metric pass/fail thresholds; ``None``: the defaults."""
    inline_annotations: bool = False
    """Also write OpenInference ``annotations.N.annotation.*``."""
    capture_content: bool = True
    """``False``: export lengths (and keyed hashes, with ``hash_key``) instead of texts."""
    hash_key: str | None = field(default=None, repr=False)
    """Secret keying the HMAC-SHA256 of texts exported without content; ``None``: no hash.
    Never logged, never exported (``RAGPULSE_HASH_KEY``)."""
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    """Bytes of each exported text before it is cut with a marker."""
    max_documents_bytes: int = DEFAULT_MAX_DOCUMENTS_BYTES
    """Bytes of a span's retrieved-documents attribute."""
    max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES
    """Bytes all captured texts of one span may take together."""
    max_documents: int = DEFAULT_MAX_DOCUMENTS
    """Retrieved documents written onto a span."""
    capture_conventions: tuple[str, ...] = DEFAULT_CONVENTIONS
    """Attribute conventions written on capture spans: ``genai``, ``openinference``."""
    max_record_chars: int = DEFAULT_MAX_RECORD_CHARS
    """Characters of a record's texts the evaluator reads."""
    evidence_tools: tuple[str, ...] = ("*",)
    """Globs on tool names whose results are an agent's evidence (``RAGPULSE_EVIDENCE_TOOLS``,
    comma-separated); default every tool."""
    action_tools: tuple[str, ...] = ()
    """Globs on tool names that act rather than fetch evidence (a calculator, a booking):
    their results are never evidence, even where ``evidence_tools`` matches
    (``RAGPULSE_ACTION_TOOLS``)."""
    hold_timeout: float = 30.0
    """Seconds a sampled span may wait for its evaluation before it goes out ``pending``."""
    evaluation_timeout: float | None = None
    """Seconds one evaluation may take, a resilient judge's retries and backoff included;
    ``None``: by judge (``evaluation_timeout_for``): 20, or for a local model four times its
    estimated cost of a typical record if that is more."""
    concurrency: int = 4
    """Judge calls in flight at once; for a judge in its own processes, the processes, each
    taking a batch of records (about 50 ms of judging) at a time (``ragpulse serve``: no
    more than the CPUs it may use, its affinity within a container's CPU limit)."""
    judge_nice: int = 0
    """How much lower than the application a CPU-bound judge's processes are scheduled
    (``nice`` 0-19). 0: the same priority; a higher value lets a busy host starve the judge,
    and evaluations are then dropped (watch ``ragpulse.evaluator.coverage``)."""
    max_queue_size: int = 1000
    """Records waiting for the judge before new ones are counted ``queue_full``."""
    max_queue_bytes: int = 64 * 1024 * 1024
    """Bytes the records accepted and not yet evaluated may hold (then ``queue_full``)."""
    max_input_chars: int = 500_000
    """Characters of answer, contexts and reference a judge is given; past it ``too_large``."""
    max_held_spans: int = 2048
    """Sampled spans held for their scores at once (units and their retrieval spans, which
    wait only within half of it); past it they go out ``pending``."""
    max_held_bytes: int = 64 * 1024 * 1024
    """Estimated bytes of the held spans (retrieval spans within half of it); past it they go
    out ``pending``."""
    shutdown_timeout: float = 5.0
    """Seconds ``shutdown()``, the exit hook and the SIGTERM handler may take in all."""
    handle_sigterm: bool = True
    """Flush within ``shutdown_timeout`` on SIGTERM, then run the application's own handler,
    or end the process as SIGTERM does; ``False`` (``RAGPULSE_HANDLE_SIGTERM=0``): leave
    SIGTERM alone."""
    export_buffer_bytes: int = 64 * MiB
    """Bytes of each signal's exports kept for retry while the backend is unreachable."""
    export_buffer_seconds: float = 120.0
    """Seconds an export is retried before it is dropped (and counted)."""
    export_max_batch_bytes: int = 3 * MiB + MiB // 2
    """Largest encoded OTLP request sent; bigger batches are split (gRPC refuses > 4 MiB)."""
    export_queue_size: int = 65_536
    """Items ragpulse's own batch processors queue before their exporter takes them. Those
    exporters never block (delivery queues each batch, bounded by bytes), so this queue only
    absorbs a burst while the processor's thread waits for the interpreter lock: the SDK's
    2,048 lost 6 % of 20,000 spans ended by four threads at once. The standard
    ``OTEL_BSP_MAX_QUEUE_SIZE`` and ``OTEL_BLRP_MAX_QUEUE_SIZE`` still override it."""
    relay_max_batch_items: int = 512
    """Items ``ragpulse serve`` merges into one forwarded request at most (spans, or received
    requests)."""
    relay_linger: float = 0.1
    """Seconds a small forwarded request waits for others to join it: evaluated units finish
    one by one, and one request each would cost more than the spans in it."""
    phoenix_max_queue_size: int = 10_000
    """Annotations ``PhoenixAnnotations`` keeps waiting to be sent; past it the oldest are
    dropped and counted."""
    phoenix_batch_size: int = 100
    """Annotations per request to Phoenix at most."""
    phoenix_timeout: float = 5.0
    """Seconds one request to Phoenix may take."""
    phoenix_flush_timeout: float = 10.0
    """Seconds ``PhoenixAnnotations.flush`` and ``shutdown`` wait when given no timeout."""
    # --- ragpulse serve ---------------------------------------------------------------------
    serve_buffer_bytes: int = 128 * MiB
    """Bytes ``ragpulse serve`` holds between receiving and exporting (spans as held in
    memory, not as received); past it requests are refused with 429/``RESOURCE_EXHAUSTED``."""
    serve_dedupe_window: float = 600.0
    """Seconds a unit's (trace id, span id) is remembered: a copy received again within it
    is not forwarded or judged again."""
    serve_dedupe_units: int = 100_000
    """Units remembered for deduplication at most (the oldest are forgotten first)."""
    serve_idle_timeout: float = 30.0
    """Seconds an idle connection (HTTP keep-alive, gRPC) stays open."""
    serve_request_timeout: float = 60.0
    """Seconds a client may take to send one request; a slower one is cut off (HTTP 408)."""
    serve_auth_token_file: Path | None = None
    """File holding the bearer token every OTLP request must carry; ``None``: no token."""
    serve_tls_cert: Path | None = None
    """PEM certificate (chain) both receivers serve TLS with; ``None``: plain text."""
    serve_tls_key: Path | None = None
    """PEM private key of ``serve_tls_cert``."""
    serve_max_request_bytes: int = 32 * MiB
    """Largest request body (after gzip) or gRPC message ``ragpulse serve`` takes; larger ones
    get 413 / ``RESOURCE_EXHAUSTED``."""
    serve_assembly_timeout: float = 2.0
    """Seconds a unit waits in ``ragpulse serve`` for the spans its record needs."""
    serve_assembly_traces: int = 10_000
    """Traces held in assembly at once; past it the oldest goes on (counted ``evicted``)."""
    serve_assembly_bytes: int = 64 * MiB
    """Estimated bytes held in assembly; past it the oldest trace goes on."""
    serve_drain_timeout: float = 30.0
    """Seconds SIGTERM waits for evaluations and exports before ``ragpulse serve`` exits."""
    serve_retry_after: float = 1.0
    """Seconds a sender refused while the buffer is full or serve drains is told to wait
    (``Retry-After``, ``RetryInfo``)."""
    rejected: Mapping[str, str] = field(default_factory=dict)
    """Values replaced by their default, by the name they were given under."""

    @classmethod
    def load(
        cls, keywords: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Settings from ``keywords`` (``None`` values skipped), then ``environ``, then defaults.

        Never raises: an unusable value is logged once and its default used.
        """
        keywords = {k: v for k, v in (keywords or {}).items() if v is not None}
        unknown = set(keywords) - {n for n, s in _SOURCES.items() if s.keyword}
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        rejected: dict[str, str] = {}
        for name, source in _SOURCES.items():
            candidates: list[tuple[str, object]] = []
            if name in keywords:
                candidates.append((name, keywords[name]))
            for env in (source.env, source.older_env):
                raw = environ.get(env) if env is not None else None
                if env is not None and raw is not None and raw.strip():
                    candidates.append((env, raw))
            for given_as, value in candidates:
                try:
                    values[name] = source.parse(value)
                    break
                except _Invalid as why:
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
        """Which tools' results are evidence, from ``evidence_tools`` and ``action_tools``."""
        return ToolPolicy(evidence=self.evidence_tools, action=self.action_tools)

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
        for warning in warnings:
            if ("relation", warning) not in _reported:
                _reported.add(("relation", warning))
                _logger.warning("ragpulse: %s", warning)
        return warnings


def variable_of(name: str) -> str | None:
    """The environment variable the setting ``name`` is read from; ``None``: none."""
    source = _SOURCES.get(name)
    return None if source is None else source.env


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
    if name in _SOURCES:
        return name
    return next(n for n, s in _SOURCES.items() if name in (s.env, s.older_env))
