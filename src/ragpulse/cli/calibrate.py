"""``ragpulse calibrate``: fit a metric's threshold to labelled records, or measure agreement.

On labelled JSONL it judges each record, fits the threshold (``ragpulse.offline.calibrate``)
and prints the labels' agreement with the judge at it. Given the OTLP-JSON traces
``configure()`` (or ``ragpulse serve``) wrote and, with ``--feedback``, the log lines holding
``ragpulse.feedback`` events, it pairs each person's verdict with the judge's on the same
request and metric and prints, per metric, the number of pairs, the raw agreement and Cohen's
kappa with a bootstrap interval (``ragpulse.offline.agreement``). Nothing is judged again
there: the judge's verdict is the one on the span (its ``ragpulse.eval.<metric>.label``, else
its score against the metric's threshold).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragpulse.evaluation.types import FAITHFULNESS, Evaluation
from ragpulse.judges.base import with_judge_model
from ragpulse.metrics import METRICS
from ragpulse.offline.agreement import (
    HUMAN_PASS_SCORE,
    agreement,
    describe_agreements,
    label_agreement,
)
from ragpulse.offline.calibrate import (
    LabelledRecord,
    calibrate,
    describe,
    describe_family,
    read_labelled,
)
from ragpulse.outputs.files import read_lines

__all__ = ["add_parser"]

_EXIT_USAGE = 2


def _judge(args: argparse.Namespace) -> Any:
    from ragpulse.cli._judge_options import local_judge_options
    from ragpulse.judging._factory import build_judge, judge_notes

    judge = build_judge(
        args.judge,
        model=args.model,
        base_url=args.base_url,
        api_key=args.api_key,
        resilient=True,
        **local_judge_options(args),
    )
    for note in judge_notes(judge):
        print(f"ragpulse calibrate: --device {args.device}: {note}", file=sys.stderr)
    return judge


async def _judge_all(
    judge: Any, records: Sequence[LabelledRecord], metric: str, concurrency: int
) -> list[Evaluation]:
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(item: LabelledRecord) -> Evaluation:
        async with limit:
            result: Evaluation = await judge.evaluate(item.record, (metric,))
            return with_judge_model(result, judge, item.record)

    try:
        return list(await asyncio.gather(*(one(r) for r in records)))
    finally:
        close = getattr(judge, "aclose", None)
        if close is not None:
            await close()


def run(args: argparse.Namespace) -> int:
    """``ragpulse calibrate``: judge, fit, print, write; returns the exit code."""
    if takes_feedback(args):  # traces and feedback events: agreement only, nothing to judge
        return run_with_feedback(args)
    try:
        labelled = read_labelled(args.input)
    except (OSError, ValueError) as exc:
        print(f"ragpulse calibrate: {exc}", file=sys.stderr)
        return 2
    if not labelled or len({r.hallucinated for r in labelled}) < 2:
        print(
            "ragpulse calibrate: the labels need both hallucinated and faithful records",
            file=sys.stderr,
        )
        return 2
    from ragpulse.cli._metric_options import load_metric_modules
    from ragpulse.judging._factory import JudgeUnavailable
    from ragpulse.judging.custom_metrics import with_custom_metrics
    from ragpulse.metrics._registry import known

    try:
        load_metric_modules(args.metric_module)
    except ValueError as exc:
        print(f"ragpulse calibrate: {exc}", file=sys.stderr)
        return 2
    if args.metric not in known():
        print(
            f"ragpulse calibrate: --metric {args.metric}: unknown; choose from "
            f"{', '.join(known())} (your own: --metric-module)",
            file=sys.stderr,
        )
        return 2
    try:
        judge = with_custom_metrics(_judge(args), (args.metric,))
    except JudgeUnavailable as exc:
        print(f"ragpulse calibrate: --judge {args.judge}: {exc}", file=sys.stderr)
        return 2
    evaluations = asyncio.run(_judge_all(judge, labelled, args.metric, args.concurrency))
    failed = sum(1 for e in evaluations if e.error_type is not None)
    if failed:
        print(f"ragpulse calibrate: {failed} records could not be judged", file=sys.stderr)
        return 3
    calibration = calibrate(
        labelled,
        evaluations,
        metric=args.metric,
        target_precision=args.target_precision,
        judge=getattr(judge, "name", args.judge),
        rounds=args.bootstrap,
    )
    print(describe(calibration))
    family = describe_family(evaluations)
    if family:
        print(family)
    from ragpulse.offline.agreement import describe_agreements

    agreed = label_agreement(labelled, evaluations, calibration, args.bootstrap)
    print("\nagreement of the judge at this threshold with the labels (pass: not hallucinated)")
    print(describe_agreements([agreed]))
    args.output.write_text(calibration.to_json(), encoding="utf-8")
    print(f"\nwrote {args.output}", file=sys.stderr)
    return 0


MAX_BOOTSTRAP = 10_000
"""Most bootstrap resamples ``--bootstrap`` accepts: more narrows no interval visibly and
only makes the command slow."""


def add_parser(subparsers: Any) -> None:
    """Mount ``ragpulse calibrate`` on the command line's subparsers."""
    parser = subparsers.add_parser(
        "calibrate",
        help="fit a metric's pass/fail threshold to your own labelled records",
        description="Judge labelled JSONL records (as for `ragpulse eval`, plus "
        "'hallucinated': true/false or a 0-1 score, and optional 'spans' of the answer), "
        "print AUROC, the threshold, a reliability table and span-level F1, and write a "
        "calibration file for `ragpulse eval --calibration` and `configure(calibration=...)`. "
        "Given OTLP-JSON traces and --feedback, print how often the judge agrees with the "
        "people's ragpulse.feedback verdicts, per metric (Cohen's kappa).",
        epilog="examples: ragpulse calibrate labelled.jsonl --output calibration.json; "
        "ragpulse calibrate ragpulse-traces.jsonl --feedback ragpulse-logs.jsonl",
    )
    parser.add_argument(
        "input",
        type=Path,
        metavar="LABELLED.jsonl|TRACES.jsonl",
        help="labelled records, or the OTLP-JSON traces that --feedback events are about",
    )
    parser.add_argument(
        "--feedback",
        type=Path,
        action="append",
        default=[],
        metavar="LOGS.jsonl",
        help="OTLP-JSON log lines holding ragpulse.feedback events on the traces given (or "
        "plain lines {trace_id, span_id, score, label, metric, comment}): print "
        "the judge's agreement with people per metric (Cohen's kappa) instead of fitting a "
        "threshold (repeatable; default: none)",
    )
    from ragpulse.cli._judge_options import add_judge_options

    add_judge_options(parser)
    parser.add_argument(
        "--metric",
        default=FAITHFULNESS,
        help="the metric whose threshold is fitted: a built-in one (faithfulness, "
        "groundedness, ...) or your own from --metric-module (default: %(default)s)",
    )
    from ragpulse.cli._metric_options import add_metric_module_option

    add_metric_module_option(parser)
    parser.add_argument(
        "--target-precision",
        type=_fraction,
        default=None,
        metavar="FRACTION",
        help="choose the threshold with the best recall at this precision, in (0, 1] "
        "(default: the threshold with the best F1)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("ragpulse-calibration.json"),
        metavar="FILE",
        help="the calibration file to write (default: %(default)s)",
    )
    parser.add_argument(
        "--bootstrap",
        type=_bounded(0, MAX_BOOTSTRAP),
        default=1000,
        metavar="N",
        help=f"resamples for the 95%% intervals, 0 to {MAX_BOOTSTRAP} (0: no interval) "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--concurrency",
        type=_bounded(1, 1024),
        default=4,
        metavar="N",
        help="evaluations in flight (default: %(default)s)",
    )
    parser.set_defaults(handler=run)


def _bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high], else a clear usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
        return value

    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text}: must be in (0, 1]")
    return value


def _traces_file(path: Path) -> bool:
    """Whether the first JSON line of ``path`` is an OTLP trace export; ``OSError`` propagates."""
    for _, text in read_lines(path):
        if not text.strip():
            continue
        try:
            first = json.loads(text)
        except (ValueError, RecursionError):
            continue
        return isinstance(first, dict) and "resourceSpans" in first
    return False


def takes_feedback(args: argparse.Namespace) -> bool:
    """Whether this ``calibrate`` compares with feedback (``--feedback``, or a traces file)."""
    try:
        return bool(args.feedback) or _traces_file(args.input)
    except OSError:
        return False  # the labelled-records path says what is wrong with the file


def _say(message: str) -> None:
    print(f"ragpulse calibrate: {message}", file=sys.stderr)


def _order(metrics: Sequence[str]) -> list[str]:
    from ragpulse.report._feedback_events import OVERALL

    known = [m for m in METRICS if m in metrics]
    return [*known, *(m for m in metrics if m not in known and m != OVERALL)] + (
        [OVERALL] if OVERALL in metrics else []
    )


def run_with_feedback(args: argparse.Namespace) -> int:
    """Pair the feedback with the judge's verdicts on the traces, print the agreement."""
    from ragpulse.report._feedback_events import add_feedback, pair_verdicts, read_feedback
    from ragpulse.report._load import RunFileError, load_run
    from ragpulse.report._model import plural

    try:
        traces = _traces_file(args.input)
    except OSError as exc:
        _say(str(exc))
        return _EXIT_USAGE
    if not traces:
        _say(
            f"--feedback goes with the OTLP-JSON traces the feedback is about "
            f"(ragpulse-traces.jsonl); {args.input} is not one (labelled JSONL carries its "
            "own labels)"
        )
        return _EXIT_USAGE
    if not args.feedback:
        _say(
            "give the feedback events with --feedback LOGS.jsonl (configure() writes them to "
            "the -logs file beside the traces)"
        )
        return _EXIT_USAGE
    try:
        run = load_run(args.input)
        files = [read_feedback(path) for path in args.feedback]
    except (OSError, RunFileError) as exc:
        _say(str(exc))
        return _EXIT_USAGE
    add_feedback([run], files)
    for note in run.notes:
        _say(f"{run.name}: {note}")
    pairs = pair_verdicts(run.requests)
    if not pairs.judge:
        _say("no feedback event with a verdict matched a request the judge scored")
        return _EXIT_USAGE
    rows = [
        agreement(metric, pairs.judge[metric], pairs.human[metric], args.bootstrap)
        for metric in _order(list(pairs.judge))
    ]
    print(
        f"{sum(r.n for r in rows)} feedback verdicts on {len(run.requests)} evaluated requests "
        f"of {run.name}; a person's score >= {HUMAN_PASS_SCORE:g} (or the label pass) is a pass, "
        "the judge's verdict is its pass/fail on the span"
    )
    print(describe_agreements(rows))
    if pairs.no_verdict or pairs.unscored:
        print(
            f"not compared: {plural(pairs.no_verdict, 'event')} whose label is no verdict, "
            f"{plural(pairs.unscored, 'event')} on a metric the judge did not score on that "
            "request"
        )
    return 0
