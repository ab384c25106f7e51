"""``ragpulse serve``'s command line: its options and the judge they name."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from ragpulse.evaluation.types import ALL_METRICS
from ragpulse.judges.base import Judge

EXIT_USAGE = 2


class ServeUsageError(Exception):
    """A bad option; reported in one line, exit code 2."""


def _address(text: str) -> str | None:
    return None if text.strip().lower() in {"off", "none", ""} else text.strip()


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
        help="HOST:PORT of the OTLP/HTTP receiver and /healthz, /readyz ('off')",
    )
    parser.add_argument(
        "--grpc",
        type=_address,
        default="127.0.0.1:4317",
        help="HOST:PORT of the OTLP/gRPC receiver ('off')",
    )
    parser.add_argument(
        "--judge",
        default="lexical",
        help="lexical, openai, or MODULE:NAME of a Judge (or a factory of one)",
    )
    parser.add_argument("--model", help="model name for --judge openai")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for --judge openai")
    parser.add_argument("--api-key", help="API key for --judge openai (else OPENAI_API_KEY)")
    parser.add_argument("--sample-rate", type=float, help="share of traces to evaluate (0..1)")
    parser.add_argument("--no-evaluate", action="store_true", help="forward spans only")
    parser.add_argument(
        "--metrics",
        default=",".join(ALL_METRICS),
        help="comma-separated subset of: " + ", ".join(ALL_METRICS),
    )
    parser.add_argument(
        "--output-file",
        type=Path,
        help="write OTLP-JSON lines here (with -logs and -metrics siblings) "
        "instead of exporting to OTEL_EXPORTER_OTLP_ENDPOINT",
    )
    parser.add_argument("--prometheus-port", type=int, help="serve /metrics on this port")
    parser.add_argument("--prometheus-host", default="127.0.0.1")
    parser.add_argument(
        "--buffer-bytes",
        type=int,
        default=256 * 1024 * 1024,
        help="bytes held before requests are refused with 429/RESOURCE_EXHAUSTED",
    )
    parser.add_argument(
        "--assembly-timeout",
        type=float,
        default=2.0,
        help="seconds a unit span waits for the children its record needs",
    )
    parser.add_argument(
        "--hold-timeout",
        type=float,
        default=30.0,
        help="seconds a span waits for its evaluation before going on 'pending'",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="evaluations in flight")
    parser.add_argument(
        "--max-queue-size",
        type=int,
        default=1000,
        help="evaluations queued; past it units are forwarded 'skipped'",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="seconds SIGTERM waits for evaluations before forwarding them",
    )
    parser.add_argument("--metric-export-interval", type=float, default=10.0)
    parser.add_argument("--log-level", default=os.environ.get("RAGPULSE_LOG_LEVEL", "info"))
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
        from ragpulse.cli import _build_judge

        if spec not in {"lexical", "openai"}:
            raise ServeUsageError(f"--judge: unknown {spec!r}; use lexical, openai or MODULE:NAME")
        return _build_judge(args)
    module_name, _, name = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ServeUsageError(f"--judge {spec}: {exc}") from None
    judge = found() if isinstance(found, type) or not hasattr(found, "evaluate") else found
    if not hasattr(judge, "evaluate"):
        raise ServeUsageError(f"--judge {spec} is not a Judge (it has no evaluate())")
    return judge  # type: ignore[no-any-return]


def _run(args: argparse.Namespace) -> int:
    from ragpulse.serve._logging import setup_logging
    from ragpulse.serve._service import ServeOptions, run_service

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    unknown = [m for m in metrics if m not in ALL_METRICS]
    if unknown or not metrics:
        raise ServeUsageError(f"--metrics: unknown {', '.join(unknown) or '(empty)'}")
    if args.http is None and args.grpc is None:
        raise ServeUsageError("--http and --grpc are both off: nothing would receive spans")
    if args.sample_rate is not None and not 0.0 <= args.sample_rate <= 1.0:
        raise ServeUsageError("--sample-rate must be between 0 and 1")
    setup_logging(args.log_level)
    judge = None if args.no_evaluate else build_judge(args)
    options = ServeOptions(
        http=args.http,
        grpc=args.grpc,
        output_file=args.output_file,
        sample_rate=args.sample_rate,
        evaluate=not args.no_evaluate,
        metrics=metrics,
        buffer_bytes=args.buffer_bytes,
        assembly_timeout=args.assembly_timeout,
        hold_timeout=args.hold_timeout,
        concurrency=args.concurrency,
        max_queue_size=args.max_queue_size,
        drain_timeout=args.drain_timeout,
        prometheus_host=args.prometheus_host,
        prometheus_port=args.prometheus_port,
        metric_export_interval=args.metric_export_interval,
    )
    try:
        return run_service(options, judge)
    except OSError as exc:
        raise ServeUsageError(str(exc)) from None
