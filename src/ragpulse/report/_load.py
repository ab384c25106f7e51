"""Opens a run file and reads it with the reader its first line calls for."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ragpulse.offline_eval import InputRecord
from ragpulse.report._eval_output import load_eval_output
from ragpulse.report._model import Run
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
    """The evaluated requests of ``path`` (``ragpulse eval`` output or OTLP-JSON traces)."""
    lines = path.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    first: object = None
    for text in lines:
        if text.strip():
            try:
                first = json.loads(text)
            except ValueError:
                raise RunFileError("its first line is not JSON") from None
            break
    if first is None:
        raise RunFileError("it is empty")
    if _kind(first) == "traces":
        return load_traces(path, lines)
    return load_eval_output(path, lines, inputs)
