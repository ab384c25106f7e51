"""``ragpulse eval``: JSONL records in, one JSON result per record out, a summary on stderr."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragpulse._secrets import register_secret
from ragpulse.capture._content import ContentPolicy
from ragpulse.cli._judge_options import (
    add_correctness_mode_option,
    add_judge_options,
    local_judge_options,
)
from ragpulse.cli._metric_options import (
    add_metric_module_option,
    add_threshold_option,
    load_metric_modules,
    threshold_overrides,
)
from ragpulse.cli._shared import (
    _EXIT_CODES,
    EXIT_EVAL_FAILED,
    EXIT_GATE_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    _console,
    _HelpFormatter,
    _print,
    _UsageError,
)
from ragpulse.evaluation.types import EvalStatus, Evaluation
from ragpulse.judges._labels import declined, label_thresholds
from ragpulse.judges.base import Judge
from ragpulse.judging._factory import JudgeUnavailable, build_judge, judge_notes
from ragpulse.judging.custom_metrics import with_custom_metrics
from ragpulse.metrics import ALL_METRICS, METRICS
from ragpulse.metrics import _registry as registry
from ragpulse.metrics._assemble import apply_strict
from ragpulse.offline.evaluate import (
    DEFAULT_MAX_LINE_BYTES,
    BadLine,
    BatchSummary,
    ErrorAllowance,
    InputRecord,
    MetricPlan,
    bad_line_to_json,
    evaluate_stream,
    parse_fail_under,
    parse_max_errors,
    read_records,
    result_to_json,
    summarize,
)
from ragpulse.offline.trace_spans import EvaluatedSpans
from ragpulse.offline.traces import TraceFileReader, TraceFileStats, TraceUnit, looks_like_traces
from ragpulse.outputs.files import json_line
from ragpulse.settings import Settings
from ragpulse.signals.emit import EmitOptions
from ragpulse.signals.privacy import export_evaluation

__all__ = ["add_parser"]


AUTO, RECORDS, TRACES = "auto", "records", "traces"
INPUT_KINDS = (AUTO, RECORDS, TRACES)
_SNIFF_BYTES = 256


class _OutputError(Exception):
    """The results could not be written (a full disk, a closed pipe); exit code 2."""


class _InputError(Exception):
    """The input stopped being readable part-way; exit code 2."""


_EVAL_EXAMPLE = f"""example:
  ragpulse eval answers.jsonl --output results.jsonl \\
      --fail-under groundedness=0.8 --max-errors 1%
  ragpulse eval ragpulse-traces.jsonl --judge openai --write-spans judged.jsonl

  One input line: {{"id": "q1", "question": "...", "contexts": ["..."], "answer": "...",
  "reference": "...", "rubric": ["dose: 200 mg", "..."]}}. One output line per input
  line, in order: id, status, scores, labels, explanations, slices, abstained, answerable,
  claims (with cited and citation_holds), judge, error_type, error. An unreadable line is a
  row with status "error" and error_type "invalid_input" (its id, or its line number).

  labels: each score's pass/fail, as the span carries it; null where the score is
  undefined or the judge writes no label for the metric. The offline judge scores
  groundedness without a label: no threshold keeps a label honest on answers real LLMs
  wrote, which paraphrase (docs/judges.md, Labels); --threshold groundedness=VALUE
  labels it anyway.

  A trace file (OTLP-JSON lines, as configure() and a Collector's file exporter write
  them; told apart by its first line, or --input traces) gives one output line per
  evaluation unit, the units ragpulse serve judges, with its trace_id and span_id.

{_EXIT_CODES}"""


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a JSONL file of RAG records",
        description="Evaluate each JSONL record (id, question, contexts, answer, reference)\n"
        "and write one JSON result per input line, with a summary table on stderr.",
        epilog=_EVAL_EXAMPLE,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "input",
        type=Path,
        metavar="INPUT.jsonl",
        help="records, or a trace file of OTLP-JSON lines, to evaluate; - reads stdin",
    )
    parser.add_argument(
        "--input",
        dest="input_kind",
        choices=INPUT_KINDS,
        default=AUTO,
        help="what INPUT holds; auto: a trace file when its first line is an OTLP-JSON "
        "export request (resourceSpans, resourceLogs), else records (default: %(default)s)",
    )
    parser.add_argument(
        "--write-spans",
        type=Path,
        metavar="FILE",
        help="with a trace file: write each evaluated span, with its ragpulse.eval.* "
        "attributes, to FILE as OTLP-JSON lines, ready to send to a backend",
    )
    parser.add_argument(
        "--logs",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="with a trace file: the log records written apart from it (configure()'s "
        "-logs.jsonl), read in time order beside it so GenAI content events meet their "
        "spans; may be given more than once",
    )
    add_judge_options(parser)
    parser.add_argument(
        "--metrics",
        default=None,
        help=f"comma-separated metrics, any of {', '.join(METRICS)} (default: "
        f"{', '.join(ALL_METRICS)}, and for each record relevancy when it has a question, "
        "completeness when it has a rubric, citation when its answer has [N] markers)",
    )
    add_metric_module_option(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="count INFERRED claims as unfaithful (penalize ambiguous claims)",
    )
    add_correctness_mode_option(parser)
    parser.add_argument(
        "--output", type=Path, metavar="FILE", help="output JSONL file (default: stdout)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, help="evaluations in flight (default: %(default)s)"
    )
    add_threshold_option(
        parser,
        "a metric's pass/fail threshold in the summary, which reports the share of its "
        "scores below it",
    )
    parser.add_argument(
        "--calibration",
        type=Path,
        metavar="FILE",
        help="a file from `ragpulse calibrate`: its threshold replaces the threshold of the "
        "metric it was fitted for, and only of that one",
    )
    parser.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="exit 1 when the metric's mean is below VALUE, in [0, 1] (repeatable; default: "
        "no gate)",
    )
    parser.add_argument(
        "--max-errors",
        default="0",
        metavar="N|FRACTION",
        help="failed records tolerated before exiting 3: a count (3) or a fraction of the "
        "records (0.05 or 5%%) (default: %(default)s)",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=int,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="BYTES",
        help="a longer input line is an invalid_input row (default: %(default)s)",
    )
    privacy = parser.add_argument_group(
        "privacy", "The judge always sees the raw text; these shape what is written out."
    )
    privacy.add_argument(
        "--no-content",
        action="store_true",
        help="write no claim, evidence or error text: lengths and offsets only",
    )
    privacy.add_argument(
        "--redact-pattern",
        action="append",
        default=[],
        metavar="REGEX",
        help="replace every match in written texts with [REDACTED] (repeatable)",
    )
    parser.set_defaults(handler=_run_eval)


def _metric_plan(text: str | None) -> MetricPlan:
    return MetricPlan(None if text is None else tuple(_parse_metrics(text)))


def _parse_metrics(text: str) -> list[str]:
    metrics = [m.strip() for m in text.split(",") if m.strip()]
    known = registry.known()
    unknown = [m for m in metrics if m not in known]
    if unknown or not metrics:
        raise _UsageError(
            f"--metrics: unknown {', '.join(unknown) or '(empty)'}; "
            f"choose from {', '.join(known)} (your own: --metric-module)"
        )
    return metrics


def _parse_gates(specs: Sequence[str]) -> dict[str, float]:
    try:
        # The user's metrics gate too: their modules are imported by now.
        return parse_fail_under(specs, registry.known())
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


def _parse_max_errors(text: str) -> ErrorAllowance:
    try:
        return parse_max_errors(text)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


def _content_policy(args: argparse.Namespace) -> ContentPolicy:
    """The ``--no-content``/``--redact-pattern`` policy, the same one spans are exported under."""
    patterns = []
    for text in args.redact_pattern:
        try:
            patterns.append(re.compile(text))
        except re.error as exc:
            raise _UsageError(
                f"--redact-pattern {text!r} is not a regular expression: {exc}"
            ) from None
    if not patterns:
        return ContentPolicy(capture_content=not args.no_content, max_text_bytes=sys.maxsize)

    def redact(text: str) -> str:
        for pattern in patterns:
            text = pattern.sub("[REDACTED]", text)
        return text

    return ContentPolicy(
        capture_content=not args.no_content, redact=redact, max_text_bytes=sys.maxsize
    )


def _check_options(args: argparse.Namespace) -> None:
    if args.concurrency < 1:
        raise _UsageError("--concurrency must be at least 1")
    if args.max_line_bytes < 1:
        raise _UsageError("--max-line-bytes must be at least 1")


def _build_judge(args: argparse.Namespace) -> Judge:
    """The judge ``--judge`` names; an LLM judge retries and backs off (``ResilientJudge``)."""
    register_secret(args.api_key)
    try:
        judge = build_judge(
            args.judge,
            model=args.model,
            base_url=args.base_url,
            api_key=args.api_key,
            resilient=True,
            correctness_mode=args.correctness_mode,
            **local_judge_options(args),
        )
    except JudgeUnavailable as exc:
        raise _UsageError(f"--judge {args.judge}: {exc}") from None
    for note in judge_notes(judge):
        print(f"ragpulse eval: --device {args.device}: {note}", file=sys.stderr)
    return judge


def _open_logs(path: Path) -> IO[bytes]:
    """A ``--logs`` file, opened for reading; a usage error when it cannot be."""
    try:
        return path.open("rb")
    except OSError as exc:
        raise _UsageError(f"--logs: cannot read {path}: {exc.strerror or exc}") from None


def _open_input(path: Path) -> IO[bytes]:
    if str(path) == "-":
        return sys.stdin.buffer
    try:
        return path.open("rb")
    except OSError as exc:
        raise _UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _open_output(path: Path | None) -> TextIO:
    if path is None:
        return sys.stdout
    try:
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise _UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


class _Results:
    """Writes one JSON line per input line (per unit of a trace file), flushed as it goes,
    and keeps the tallies."""

    def __init__(
        self,
        out: TextIO,
        policy: ContentPolicy,
        plan: MetricPlan,
        thresholds: Mapping[str, float],
        *,
        strict: bool = False,
        spans: EvaluatedSpans | None = None,
    ) -> None:
        self._out = out
        self._thresholds = thresholds
        self._policy = policy
        self._plan = plan
        self._strict = strict
        self.spans = spans
        """Where ``--write-spans`` writes the evaluated spans of a trace file."""
        self.computed: set[str] = set()
        self.skipped: Counter[tuple[str, str]] = Counter()
        # The summary needs scores and statuses only; claims are dropped to bound memory.
        self.evaluations: list[Evaluation] = []
        self.bad_lines = 0
        self.errors: Counter[str] = Counter()
        self.metric_failures: Counter[str] = Counter()
        """Records on which a metric failed alone (a user's metric that raised, exited,
        hung past its timeout), by metric."""
        self.first_failure: dict[str, str] = {}

    @property
    def rows(self) -> int:
        return len(self.evaluations) + self.bad_lines

    def _count_metric_failures(self, exported: Evaluation) -> None:
        for name, result in exported.metrics.items():
            if result.status is EvalStatus.ERROR:
                self.metric_failures[name] += 1
                if result.explanation:
                    self.first_failure.setdefault(name, result.explanation)

    def write(self, item: InputRecord | BadLine, evaluation: Evaluation | None) -> None:
        if isinstance(item, BadLine) or evaluation is None:
            assert isinstance(item, BadLine)
            self.bad_lines += 1
            self.errors["invalid_input"] += 1
            row = bad_line_to_json(item)
        else:
            self.computed.update(self._plan.for_record(item.record))
            self.skipped.update(self._plan.skipped(item.record))
            if self.spans is not None and isinstance(item, TraceUnit):
                try:
                    self.spans.write(item, evaluation)
                except (OSError, ValueError) as exc:
                    where = self.spans.path
                    raise _OutputError(
                        f"{where}: {getattr(exc, 'strerror', None) or exc}"
                    ) from None
            if self._strict:
                evaluation = apply_strict(evaluation)
            exported = export_evaluation(evaluation, self._policy)
            self.evaluations.append(replace(exported, claims=(), reference_claims=()))
            if exported.status is EvalStatus.ERROR:
                self.errors[exported.error_type or "unknown"] += 1
            else:
                self._count_metric_failures(exported)
            row = result_to_json(item, exported, self._thresholds)
        try:
            self._out.write(json_line(row) + "\n")
            self._out.flush()
        except (OSError, ValueError) as exc:
            raise _OutputError(str(getattr(exc, "strerror", None) or exc)) from None


def _input_kind(args: argparse.Namespace, source: IO[bytes]) -> str:
    """``records`` or ``traces``: as ``--input`` says, else as the input's first bytes show."""
    if args.input_kind != AUTO:
        return str(args.input_kind)
    peek = getattr(source, "peek", None)
    head = peek(_SNIFF_BYTES)[:_SNIFF_BYTES] if peek is not None else b""
    return TRACES if looks_like_traces(head) else RECORDS


async def _evaluate_all(
    args: argparse.Namespace,
    judge: Judge,
    metrics: MetricPlan,
    results: _Results,
    progress: Progress,
) -> TraceFileReader | None:
    """Evaluate the input; the trace file's reader, for its tallies (``None``: records)."""
    task = progress.add_task("eval", total=None)
    source = _open_input(args.input)
    reader: TraceFileReader | None = None
    stack = contextlib.ExitStack()
    try:
        if _input_kind(args, source) == TRACES:
            reader = TraceFileReader(
                Settings.load(),
                keep_spans=results.spans is not None,
                max_line_bytes=args.max_line_bytes,
            )
            logs = [stack.enter_context(_open_logs(path)) for path in args.logs]
            items: Iterable[InputRecord | BadLine] = reader.read(source, *logs)
        elif args.logs:
            raise _UsageError(
                f"--logs: {args.input} holds records, not spans; it takes a trace file"
            )
        elif args.write_spans is not None:
            raise _UsageError(
                f"--write-spans: {args.input} holds records, not spans; it takes a trace file "
                "(or --input traces)"
            )
        else:
            items = read_records(source, max_line_bytes=args.max_line_bytes)
        try:
            async for item, evaluation in evaluate_stream(
                items, judge, metrics, concurrency=args.concurrency
            ):
                if isinstance(item, BadLine):
                    _print(progress.console, f"line {item.line}: {item.reason}", "yellow")
                results.write(item, evaluation)
                progress.advance(task)
        except OSError as exc:
            raise _InputError(f"cannot read {args.input}: {exc.strerror or exc}") from None
    finally:
        stack.close()
        if source is not sys.stdin.buffer:
            source.close()
        close = getattr(judge, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):  # closing must not hide the results
                await close()
    return reader


def _open_spans(
    args: argparse.Namespace, thresholds: dict[str, float], policy: ContentPolicy
) -> EvaluatedSpans | None:
    """The ``--write-spans`` file, its spans' labels against the summary's thresholds."""
    if args.write_spans is None:
        return None
    options = EmitOptions(
        thresholds=thresholds,
        strict=args.strict,
        inline_annotations=Settings.load().inline_annotations,
    )
    try:
        return EvaluatedSpans(args.write_spans, options, policy)
    except OSError as exc:
        raise _UsageError(f"cannot write {args.write_spans}: {exc.strerror or exc}") from None


def _print_trace_file(
    console: Console, args: argparse.Namespace, stats: TraceFileStats, results: _Results
) -> None:
    """What the trace file held, how its traces were assembled, and where spans went."""
    released = ", ".join(f"{reason} {count}" for reason, count in sorted(stats.released.items()))
    _print(
        console,
        f"ragpulse eval: {stats.spans} spans in {stats.span_lines} lines, {stats.units} "
        f"evaluation unit{'' if stats.units == 1 else 's'}; traces released {released or 'none'}; "
        f"held at most {stats.peak_traces} traces, {stats.peak_bytes} bytes",
    )
    if stats.log_lines:
        _print(
            console,
            f"ragpulse eval: {stats.log_records} log records in {stats.log_lines} lines read "
            "(GenAI content events joined to their spans)",
        )
    if stats.events_dropped:
        dropped = ", ".join(f"{why} {n}" for why, n in sorted(stats.events_dropped.items()))
        _print(
            console,
            f"ragpulse eval: GenAI content events not read with their trace: {dropped} (late: "
            "after their unit was released)",
            "yellow",
        )
    if stats.duplicates:
        _print(console, f"ragpulse eval: {stats.duplicates} units read again, judged once")
    if stats.rejected_spans:
        _print(
            console,
            f"ragpulse eval: {stats.rejected_spans} spans with invalid ids not read "
            f"(first: {stats.first_rejection})",
            "yellow",
        )
    if stats.textless:
        _print(
            console,
            f"ragpulse eval: {stats.textless} @rag units carry no text to judge (written with "
            "content capture off, or a text cut at RAGPULSE_MAX_TEXT_BYTES)",
            "yellow",
        )
    if stats.metric_lines:
        _print(console, f"ragpulse eval: {stats.metric_lines} lines of metrics ignored")
    if not stats.units:
        _print(
            console,
            f"ragpulse eval: {args.input} holds no evaluation unit: nothing was evaluated "
            "(a unit is a @rag span, or a trace's root with an answer and its evidence)",
            "yellow",
        )
    if results.spans is not None:
        _print(
            console,
            f"ragpulse eval: {results.spans.lines} evaluated units' spans written to "
            f"{results.spans.path}",
        )


def _format(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _print_summary(console: Console, summary: BatchSummary) -> None:
    table = Table(title="ragpulse eval")
    table.add_column("metric")
    table.add_column("n", justify="right")
    table.add_column("mean", justify="right")
    table.add_column("p10", justify="right")
    table.add_column("threshold", justify="right")
    table.add_column("below it", justify="right")
    for m in summary.metrics:
        below = "-" if m.below is None else f"{m.below:.1%}"
        limit = "unlabelled" if m.threshold is None else f"{m.threshold:g}"
        row = (m.metric, str(m.count), _format(m.mean), _format(m.p10), limit, below)
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    statuses = Table(title="by status")
    statuses.add_column("status")
    statuses.add_column("records", justify="right")
    for status, count in summary.statuses.items():
        statuses.add_row(status, str(count))
    if summary.bad_lines:
        statuses.add_row("error (invalid input line)", str(summary.bad_lines))
    console.print(statuses)


def _print_unlabelled(
    console: Console, judge: str, thresholds: Mapping[str, float], computed: set[str]
) -> None:
    """Which scored metrics carry no pass/fail label because the judge declines one, and why."""
    for metric, reason in declined(judge).items():
        if metric in computed and metric not in thresholds:
            _print(
                console,
                f"ragpulse eval: {metric} is scored without a pass/fail label by the {judge} "
                f"judge ({reason}); --threshold {metric}=VALUE labels it",
                "yellow",
            )


def _print_skipped(console: Console, results: _Results) -> None:
    """Which metrics were left without a score for lack of input, and on how many records."""
    if not results.skipped:
        return
    parts = [
        f"{metric} on {count} record{'' if count == 1 else 's'} ({why})"
        for (metric, why), count in sorted(
            results.skipped.items(), key=lambda item: registry.known().index(item[0][0])
        )
    ]
    _print(console, "ragpulse eval: not scored for lack of input: " + "; ".join(parts), "yellow")


def _print_metric_failures(console: Console, results: _Results) -> None:
    """Which metrics failed on their own, on how many records, and the first reason."""
    for metric, count in results.metric_failures.items():
        why = results.first_failure.get(metric)
        _print(
            console,
            f"ragpulse eval: metric {metric} failed on {count} record"
            f"{'' if count == 1 else 's'} (metric_failed; the other metrics are written)"
            + (f": {why}" if why else ""),
            "yellow",
        )


def _summary_metrics(plan: MetricPlan, results: _Results) -> list[str]:
    if plan.requested is not None:
        return list(plan.requested)
    return [m for m in METRICS if m in ALL_METRICS or m in results.computed]


def _check_gates(console: Console, summary: BatchSummary, gates: dict[str, float]) -> bool:
    """Print each gate's outcome; True when every gate passed."""
    passed = True
    for metric, minimum in gates.items():
        mean = summary.mean(metric)
        if mean is None:
            _print(console, f"FAIL {metric}: no defined scores to compare with {minimum:g}", "red")
            passed = False
        elif mean < minimum:
            _print(console, f"FAIL {metric}: mean {mean:.3f} < {minimum:g}", "red")
            passed = False
        else:
            _print(console, f"PASS {metric}: mean {mean:.3f} >= {minimum:g}", "green")
    return passed


def _silence_stdout() -> None:
    # What is left in stdout's buffer would fail again at exit, with a traceback of the
    # interpreter's own; point the descriptor at /dev/null so that final flush succeeds.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _run_eval(args: argparse.Namespace) -> int:
    console = _console()
    try:
        load_metric_modules(args.metric_module)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    plan = _metric_plan(args.metrics)
    gates = _parse_gates(args.fail_under)
    allowance = _parse_max_errors(args.max_errors)
    _check_options(args)
    thresholds = _thresholds(args)
    policy = _content_policy(args)
    # The user's metrics are measured where the judge runs, beside the built-ins.
    judge = with_custom_metrics(_build_judge(args), plan.requested or ())
    spans = _open_spans(args, thresholds, policy)
    out = _open_output(args.output)
    results = _Results(out, policy, plan, thresholds, strict=args.strict, spans=spans)
    stopped: str | None = None
    reader: TraceFileReader | None = None
    try:
        with Progress(
            SpinnerColumn(),
            TextColumn("evaluating"),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            reader = asyncio.run(_evaluate_all(args, judge, plan, results, progress))
    except _OutputError as exc:
        where = args.output or "stdout"
        if args.output is None:
            _silence_stdout()
        _print(console, f"ragpulse eval: cannot write results to {where}: {exc}", "red")
        return EXIT_USAGE
    except _InputError as exc:
        stopped = str(exc)
    finally:
        if out is not sys.stdout:
            with contextlib.suppress(OSError):
                out.close()
        if spans is not None:
            with contextlib.suppress(OSError):
                spans.close()

    summary = summarize(
        results.evaluations,
        _summary_metrics(plan, results),
        thresholds=thresholds,
        bad_lines=results.bad_lines,
    )
    _print_summary(console, summary)
    _print_unlabelled(console, args.judge, thresholds, results.computed)
    _print_skipped(console, results)
    _print_metric_failures(console, results)
    if reader is not None:
        _print_trace_file(console, args, reader.stats, results)
    elif not results.rows and stopped is None:
        _print(
            console,
            f"ragpulse eval: {args.input} holds no records: nothing was evaluated",
            "yellow",
        )
    if stopped is not None:
        _print(console, f"ragpulse eval: {stopped} (results up to there are written)", "red")
        return EXIT_USAGE
    gates_passed = _check_gates(console, summary, gates)
    failed = sum(results.errors.values())
    if failed and not allowance.allows(failed, results.rows):
        kinds = ", ".join(f"{kind} {count}" for kind, count in results.errors.most_common())
        _print(
            console,
            f"ragpulse eval: {failed} of {results.rows} records failed ({kinds}); "
            f"--max-errors allows {allowance}",
            "red",
        )
        return EXIT_EVAL_FAILED
    return EXIT_OK if gates_passed else EXIT_GATE_FAILED


# --- entry point -----------------------------------------------------------------------


def _thresholds(args: argparse.Namespace) -> dict[str, float]:
    """The thresholds labels are read against: ``--threshold``, then ``--calibration`` (its
    own metric only), then the judge's declaration (none for a metric it cannot decide on
    real answers), then the metric's own. One meaning everywhere: the span's too."""
    overrides: dict[str, float] = {}
    if args.calibration is not None:
        overrides.update(_calibrated_thresholds(args.calibration))
    overrides.update(threshold_overrides(args.threshold))
    return label_thresholds(args.judge, overrides)


def _calibrated_thresholds(path: Path) -> dict[str, float]:
    from ragpulse.offline.calibrate import load_calibration

    try:
        return load_calibration(path).thresholds
    except (OSError, ValueError) as exc:
        raise _UsageError(f"--calibration: {exc}") from None
