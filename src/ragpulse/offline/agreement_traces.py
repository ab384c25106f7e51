"""``ragpulse calibrate`` on traces and feedback: how often the judge agrees with people.

Given the OTLP-JSON traces ``configure()`` (or ``ragpulse serve``) wrote and, with
``--feedback``, the log lines holding ``ragpulse.feedback`` events, it pairs each
person's verdict with the judge's on the same request and metric and prints, per
metric, the number of pairs, the raw agreement and Cohen's kappa with a bootstrap
interval (``ragpulse.offline.agreement``). Nothing is judged again: the judge's verdict is
the one on the span (its ``ragpulse.eval.<metric>.label``, else its score against the
metric's threshold). On labelled JSONL, ``calibrate`` prints the same figures for the
labels against the threshold it chose.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ragpulse.evaluation.types import METRICS, Evaluation
from ragpulse.offline.agreement import HUMAN_PASS_SCORE, Agreement, agreement, describe_agreements
from ragpulse.offline.calibrate import Calibration, LabelledRecord
from ragpulse.outputs.files import read_lines

__all__ = ["label_agreement", "run_with_feedback", "takes_feedback"]

_EXIT_USAGE = 2


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


def label_agreement(
    labelled: Sequence[LabelledRecord],
    evaluations: Sequence[Evaluation],
    calibration: Calibration,
    rounds: int,
) -> Agreement:
    """The labels against the judge at the chosen threshold (an unscored record passes,
    as it is never flagged): the agreement this calibration file will give."""
    judge = [
        (score := e.score(calibration.metric)) is None or score >= calibration.threshold
        for e in evaluations
    ]
    human = [not item.hallucinated for item in labelled]
    return agreement(calibration.metric, judge, human, rounds)
