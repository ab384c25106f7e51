"""Opens a run file and reads it with the reader its first line calls for."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from ragpulse.offline.evaluate import InputRecord
from ragpulse.outputs.files import read_lines
from ragpulse.report._eval_output import load_eval_output
from ragpulse.report._model import Run, SkippedLines
from ragpulse.report._traces import load_traces


class RunFileError(ValueError):
    """A file that is neither ``ragpulse eval`` output nor OTLP-JSON trace lines."""


def _kind(first: object) -> str:
    if isinstance(first, dict):
        if "resourceSpans" in first:
            return "traces"
        if "status" in first and ("scores" in first or "claims" in first):
            return "eval"
        if "answer" in first:
            raise RunFileError(
                "it holds records to evaluate, not results: run `ragpulse eval` on it first "
                "and pass it as --input"
            )
    raise RunFileError(
        "its first line is neither a `ragpulse eval` result nor an OTLP-JSON trace export"
    )


def load_run(path: Path, inputs: Mapping[str, InputRecord] | None = None) -> Run:
    """The evaluated requests of ``path`` (``ragpulse eval`` output or OTLP-JSON traces).

    A file with no line yet is a run with no request. Lines that cannot be read are
    skipped one by one and named in the run's notes; the first line that is JSON tells
    what kind of file this is.
    """
    lines: Iterator[tuple[int, str]] = read_lines(path)
    skipped = SkippedLines()
    first: object = None
    seen = found = False
    for number, text in lines:
        if not text.strip():
            continue
        seen = True
        try:
            first = json.loads(text)
        except (ValueError, RecursionError):
            skipped.add(number, "not JSON")
            continue
        found = True
        lines = itertools.chain([(number, text)], lines)
        break
    if not seen:
        run = Run(name=path.name, source="empty", requests=[])
        run.notes.append("the file holds no line yet: nothing has been evaluated")
        return run
    if not found:
        raise RunFileError("no line of it is JSON")
    if _kind(first) == "traces":
        run = load_traces(path, lines, skipped)
    else:
        run = load_eval_output(path, lines, inputs, skipped)
    run.notes[:0] = skipped.notes()
    return run
