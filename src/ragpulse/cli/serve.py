"""``ragpulse serve``'s command line: its options and the judge they name."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from ragpulse.cli._judge_options import add_judge_options, local_judge_options
from ragpulse.cli._metric_options import add_metric_module_option, load_metric_modules
from ragpulse.judges.base import Judge
from ragpulse.metrics import METRICS
from ragpulse.metrics._registry import known
from ragpulse.serve._policy import compile_patterns, install_policy
from ragpulse.serve._security import (
    SecurityConfigError,
    load_security,
    port_number,
    self_target,
)
from ragpulse.settings import DEFAULT_EVALUATION_TIMEOUT, Settings, variable_of

EXIT_USAGE = 2


class ServeUsageError(Exception):
    """A bad option; reported in one line, exit code 2."""


def _default(name: str) -> str:
    """The ``Settings`` default of ``name``, as help text shows it (defaults live there only)."""
    value = {f.name: f.default for f in dataclasses.fields(Settings)}[name]
    return ", ".join(value) if isinstance(value, tuple) else str(value)


def _address(text: str) -> str | None:
    return None if text.strip().lower() in {"off", "none", ""} else text.strip()


_WILDCARDS = frozenset({"0.0.0.0", "::", "*", ""})


def same_port(first: str, second: str) -> bool:
    """Whether two ``HOST:PORT`` listen addresses would take the same port: the same port on
    the same host, or on a host and the wildcard that covers it. Unreadable addresses are
    left to the receivers, which say what is wrong with them."""
    host_a, _, port_a = first.rpartition(":")
    host_b, _, port_b = second.rpartition(":")
    if port_number(port_a) is None or port_a != port_b:
        return False
    host_a, host_b = host_a.strip("[]").lower(), host_b.strip("[]").lower()
    return host_a == host_b or host_a in _WILDCARDS or host_b in _WILDCARDS


def add_parser(subparsers: Any) -> None:
    """Mount ``serve`` on the ``ragpulse`` command line."""
    parser = subparsers.add_parser(
        "serve",
        help="receive OTLP traces, evaluate RAG requests on them, forward every span",
        description="An OTLP receiver (HTTP and gRPC) that evaluates the RAG requests in the "
        "traces it receives and forwards every span, the evaluated ones with their "
        "ragpulse.eval.* scores, to OTEL_EXPORTER_OTLP_ENDPOINT or to --output-file.",
    )
    parser.add_argument(
        "--http",
        type=_address,
        default="127.0.0.1:4318",
        help="HOST:PORT of the OTLP/HTTP receiver and /healthz, /readyz, or 'off' "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--grpc",
        type=_address,
        default="127.0.0.1:4317",
        help="HOST:PORT of the OTLP/gRPC receiver, or 'off' (default: %(default)s)",
    )
    add_judge_options(
        parser,
        choices=None,
        judge_help="lexical, openai, nli, tokens, cascade, or MODULE:NAME of a Judge (or a "
        "factory of one) (default: %(default)s)",
    )
    parser.add_argument("--no-evaluate", action="store_true", help="forward spans only")
    parser.add_argument(
        "--output-file",
        type=Path,
        help="write OTLP-JSON lines here (with -logs and -metrics siblings) instead of "
        "exporting to OTEL_EXPORTER_OTLP_ENDPOINT",
    )
    parser.add_argument(
        "--buffer-bytes",
        type=int,
        help="memory held between receiving and exporting (spans as held, not as received) "
        "before requests are refused with 429/RESOURCE_EXHAUSTED; resident memory stays "
        "under the base plus twice this (128 MiB; RAGPULSE_SERVE_BUFFER_BYTES)",
    )
    privacy = parser.add_argument_group(
        "privacy", "What serve writes (scores, claims, explanations, log events) obeys these."
    )
    privacy.add_argument(
        "--no-content",
        action="store_true",
        help="write no text, only lengths and offsets (as RAGPULSE_CAPTURE_CONTENT=false)",
    )
    privacy.add_argument(
        "--redact-pattern",
        action="append",
        default=[],
        metavar="REGEX",
        help="replace every match in written texts with [REDACTED] (repeatable)",
    )
    security = parser.add_argument_group("security (default from RAGPULSE_SERVE_* variables)")
    security.add_argument(
        "--auth-token-file",
        type=Path,
        help="file holding the bearer token every OTLP request must carry "
        "(authorization: Bearer TOKEN; 401 / UNAUTHENTICATED without it)",
    )
    security.add_argument("--tls-cert", type=Path, help="PEM certificate chain for both receivers")
    security.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        help="seconds an idle connection stays open (30; RAGPULSE_SERVE_IDLE_TIMEOUT)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        help="seconds a client may take to send one request before its connection is closed "
        "(60; RAGPULSE_SERVE_REQUEST_TIMEOUT)",
    )
    parser.add_argument(
        "--assembly-timeout",
        type=float,
        help="seconds a unit span waits for the children its record needs "
        f"({_default('serve_assembly_timeout')}; RAGPULSE_SERVE_ASSEMBLY_TIMEOUT)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        help="seconds SIGTERM waits for evaluations before forwarding them "
        f"({_default('serve_drain_timeout')}; RAGPULSE_SERVE_DRAIN_TIMEOUT)",
    )
    # The pipeline's settings: unset options fall back to RAGPULSE_* / OTEL_* variables and
    # then to configure()'s defaults, exactly as in-process.
    pipeline = parser.add_argument_group(
        "pipeline settings",
        "As configure(): an option left out is read from its RAGPULSE_* variable, else it "
        "takes the default shown.",
    )
    pipeline.add_argument(
        "--sample-rate",
        type=float,
        help=f"share of traces evaluated (default: {_default('sample_rate')})",
    )
    pipeline.add_argument(
        "--metrics",
        help=f"comma-separated subset of: {', '.join(METRICS)}, or your own "
        f"(default: {_default('metrics_to_compute')})",
    )
    add_metric_module_option(pipeline)
    pipeline.add_argument(
        "--hold-timeout",
        type=float,
        help=f"seconds a span waits for its result (default: {_default('hold_timeout')})",
    )
    pipeline.add_argument(
        "--evaluation-timeout",
        type=float,
        help="seconds one evaluation may take (default: by judge: "
        f"{DEFAULT_EVALUATION_TIMEOUT:g}, or what a local model's estimated cost needs)",
    )
    pipeline.add_argument(
        "--concurrency",
        type=int,
        help=(
            f"evaluations in flight (default: {_default('concurrency')}); a CPU-bound judge's "
            "processes, at most one per CPU serve may use"
        ),
    )
    pipeline.add_argument(
        "--max-queue-size",
        type=int,
        help="evaluations queued; past it units go 'skipped' "
        f"(default: {_default('max_queue_size')})",
    )
    pipeline.add_argument(
        "--prometheus-port", type=int, help="serve /metrics on this port (default: no /metrics)"
    )
    pipeline.add_argument(
        "--prometheus-host", help=f"address of /metrics (default: {_default('prometheus_host')})"
    )
    pipeline.add_argument(
        "--metric-export-interval",
        type=float,
        help="seconds between metric exports (default: OTEL_METRIC_EXPORT_INTERVAL, else 60)",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("RAGPULSE_LOG_LEVEL", "info"),
        help="debug, info, warning or error (default: RAGPULSE_LOG_LEVEL, else info)",
    )
    pipeline.add_argument(
        "--max-export-batch-bytes",
        type=int,
        help="largest encoded OTLP request forwarded, below the destination's limit "
        "(3.5 MiB; a Collector's gRPC receiver takes 4 MiB)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the service until SIGTERM; returns the exit code (2 for a bad option)."""
    try:
        return _run(args)
    except ServeUsageError as exc:
        print(f"ragpulse serve: {exc}", file=sys.stderr)
        return EXIT_USAGE


def build_judge(args: argparse.Namespace) -> Judge:
    """The judge ``--judge`` names: a built-in one, or ``MODULE:NAME`` imported."""
    spec: str = args.judge
    if ":" not in spec:
        from ragpulse._secrets import register_secret
        from ragpulse.judges._factory import (
            JUDGE_KINDS,
            JudgeUnavailable,
            build_judge,
            judge_notes,
        )

        if spec not in JUDGE_KINDS:
            raise ServeUsageError(
                f"--judge: unknown {spec!r}; use {', '.join(JUDGE_KINDS)} or MODULE:NAME"
            )
        register_secret(args.api_key)
        try:
            # The processor wraps it in a ResilientJudge bounded by the serve settings.
            built = build_judge(
                spec,
                model=args.model,
                base_url=args.base_url,
                api_key=args.api_key,
                # A local model's threads share the CPUs among the judge processes.
                processes=getattr(args, "concurrency", None) or Settings.concurrency,
                **local_judge_options(args),
            )
        except JudgeUnavailable as exc:
            raise ServeUsageError(f"--judge {spec}: {exc}") from None
        for note in judge_notes(built):
            print(f"ragpulse serve: --device {args.device}: {note}", file=sys.stderr)
        return built
    module_name, _, name = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ServeUsageError(f"--judge {spec}: {exc}") from None
    judge = found() if isinstance(found, type) or not hasattr(found, "evaluate") else found
    if not hasattr(judge, "evaluate"):
        raise ServeUsageError(f"--judge {spec} is not a Judge (it has no evaluate())")
    return judge  # type: ignore[no-any-return]


def _refuse_self_export(settings: Settings, listens: list[str]) -> None:
    """``ServeUsageError`` when any signal's export endpoint reaches serve's own listener:
    every record sent would come back in, without end."""
    generic = variable_of("endpoint")
    for signal, name in (
        ("span", "traces_endpoint"),
        ("log record", "logs_endpoint"),
        ("metric", "metrics_endpoint"),
    ):
        own: str | None = getattr(settings, name)
        endpoint = own or settings.endpoint
        looped = self_target(endpoint, listens)
        if looped is not None:
            variable = variable_of(name) if own else generic
            raise ServeUsageError(
                f"{variable} {endpoint} is this service's own listen address ({looped}): "
                f"every {signal} would be sent back to itself; point it at the backend"
            )


def _run(args: argparse.Namespace) -> int:
    from ragpulse.serve._logging import setup_logging

    try:
        from ragpulse.serve._service import ServeOptions, run_service
    except ImportError as exc:
        raise ServeUsageError(
            f"the serve extra is not installed ({exc}); install it with "
            "`pip install '.[serve]'` in a checkout"
        ) from None

    try:
        load_metric_modules(args.metric_module)
    except ValueError as exc:
        raise ServeUsageError(str(exc)) from None
    metrics = None
    if args.metrics is not None:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        unknown = [m for m in metrics if m not in known()]
        if unknown or not metrics:
            raise ServeUsageError(f"--metrics: unknown {', '.join(unknown) or '(empty)'}")
    if args.http is None and args.grpc is None:
        raise ServeUsageError("--http and --grpc are both off: nothing would receive spans")
    if args.http is not None and args.grpc is not None and same_port(args.http, args.grpc):
        raise ServeUsageError(
            f"--http {args.http} and --grpc {args.grpc} are the same port: "
            "each receiver needs its own"
        )
    if args.sample_rate is not None and not 0.0 <= args.sample_rate <= 1.0:
        raise ServeUsageError("--sample-rate must be between 0 and 1")
    setup_logging(args.log_level)
    settings = Settings.load(
        {
            "evaluate": False if args.no_evaluate else None,
            "sample_rate": args.sample_rate,
            "metric_modules": args.metric_module or None,
            "metrics_to_compute": metrics,
            "hold_timeout": args.hold_timeout,
            "evaluation_timeout": args.evaluation_timeout,
            "concurrency": args.concurrency,
            "max_queue_size": args.max_queue_size,
            "prometheus_port": args.prometheus_port,
            "prometheus_host": args.prometheus_host,
            "metric_export_interval": args.metric_export_interval,
            "export_max_batch_bytes": args.max_export_batch_bytes,
            "capture_content": False if args.no_content else None,
            "serve_buffer_bytes": args.buffer_bytes,
            "serve_idle_timeout": args.idle_timeout,
            "serve_request_timeout": args.request_timeout,
            "serve_assembly_timeout": args.assembly_timeout,
            "serve_drain_timeout": args.drain_timeout,
            "serve_auth_token_file": args.auth_token_file,
            "serve_tls_cert": args.tls_cert,
            "serve_tls_key": args.tls_key,
        }
    )
    try:
        security = load_security(
            settings.serve_auth_token_file, settings.serve_tls_cert, settings.serve_tls_key
        )
    except SecurityConfigError as exc:
        raise ServeUsageError(str(exc)) from None
    try:
        patterns = compile_patterns(args.redact_pattern)
    except ValueError as exc:
        raise ServeUsageError(str(exc)) from None
    install_policy(settings, patterns)
    if not args.output_file:
        _refuse_self_export(settings, [a for a in (args.http, args.grpc) if a])
    judge = build_judge(args) if settings.evaluate else None
    options = ServeOptions(
        http=args.http,
        grpc=args.grpc,
        settings=settings,
        output_file=args.output_file,
        security=security,
    )
    try:
        return run_service(options, judge)
    except OSError as exc:
        raise ServeUsageError(str(exc)) from None
