"""``ragpulse serve``'s command line: its options and the judge they name."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from ragpulse.cli._judge_options import add_judge_options, local_judge_options
from ragpulse.cli._metric_options import add_metric_module_option, load_metric_modules
from ragpulse.cli._setting_flags import add_setting_flags, checked_setting_flags
from ragpulse.judges.base import Judge
from ragpulse.serve._policy import compile_patterns, install_policy
from ragpulse.serve._security import (
    SecurityConfigError,
    load_security,
    port_number,
    self_target,
)
from ragpulse.settings import Settings, variable_of

EXIT_USAGE = 2


class ServeUsageError(Exception):
    """A bad option; reported in one line, exit code 2."""


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
    parser.add_argument(
        "--output-file",
        type=Path,
        help="write OTLP-JSON lines here (with -logs and -metrics siblings) instead of "
        "exporting to OTEL_EXPORTER_OTLP_ENDPOINT",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("RAGPULSE_LOG_LEVEL", "info"),
        help="debug, info, warning or error (default: RAGPULSE_LOG_LEVEL, else info)",
    )
    parser.add_argument(
        "--redact-pattern",
        action="append",
        default=[],
        metavar="REGEX",
        help="replace every match in written texts with [REDACTED] (repeatable); what serve "
        "writes (scores, claims, explanations, log events) obeys it and --no-content",
    )
    # Every other option is a setting: made from its row of the settings table, read from
    # its RAGPULSE_* / OTEL_* variable when left out, exactly as in-process.
    service = parser.add_argument_group(
        "service",
        "How serve receives, holds and forwards; an option left out is read from "
        "its RAGPULSE_SERVE_* variable, else it takes the default shown.",
    )
    pipeline = parser.add_argument_group(
        "pipeline settings",
        "As configure(): an option left out is read from its variable, else it takes the "
        "default shown.",
    )
    add_metric_module_option(pipeline)
    add_setting_flags(pipeline, service)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the service until SIGTERM; returns the exit code (2 for a bad option)."""
    try:
        return _run(args)
    except ServeUsageError as exc:
        print(f"ragpulse serve: {exc}", file=sys.stderr)
        return EXIT_USAGE


def build_judge(args: argparse.Namespace, settings: Settings) -> Judge:
    """The judge ``--judge`` names: a built-in one, or ``MODULE:NAME`` imported."""
    spec: str = args.judge
    if ":" not in spec:
        from ragpulse._secrets import register_secret
        from ragpulse.judging._factory import (
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
                processes=settings.concurrency,
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
        given = checked_setting_flags(args)
    except ValueError as exc:
        raise ServeUsageError(str(exc)) from None
    if args.http is None and args.grpc is None:
        raise ServeUsageError("--http and --grpc are both off: nothing would receive spans")
    if args.http is not None and args.grpc is not None and same_port(args.http, args.grpc):
        raise ServeUsageError(
            f"--http {args.http} and --grpc {args.grpc} are the same port: "
            "each receiver needs its own"
        )
    setup_logging(args.log_level)
    settings = Settings.load({"metric_modules": args.metric_module or None, **given})
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
    judge = build_judge(args, settings) if settings.evaluate else None
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
