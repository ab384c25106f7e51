"""``ragpulse.feedback()``: the event it writes, the targets it takes, and the input it refuses.

Events go through a real SDK ``LoggerProvider`` into ragpulse's own OTLP-JSON file
exporter and are read back by the reader ``ragpulse calibrate`` and ``ragpulse report`` use.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import INVALID_SPAN, SpanContext

from ragpulse import semconv
from ragpulse._feedback import feedback_attributes, target_context, write_feedback
from ragpulse._secrets import REDACTED_SECRET
from ragpulse.capture._content import ContentPolicy
from ragpulse.outputs.files import FileLogExporter
from ragpulse.report._feedback_events import read_feedback
from ragpulse.report._model import Feedback

ROOT = Path(__file__).resolve().parents[2]
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[tuple[LoggerProvider, Path]]:
    path = tmp_path / "logs.jsonl"
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(FileLogExporter(path)))
    yield provider, path
    provider.shutdown()


def _written(logs: tuple[LoggerProvider, Path], target: Any, **given: Any) -> list[Feedback]:
    provider, path = logs
    write_feedback(
        provider, target_context(target, given.pop("trace_id", None)), feedback_attributes(**given)
    )
    return read_feedback(path).events


def test_feedback_on_a_span_carries_its_trace_and_span_id(
    logs: tuple[LoggerProvider, Path],
) -> None:
    span = TracerProvider().get_tracer("t").start_span("rag")
    span.end()
    context = span.get_span_context()
    (event,) = _written(logs, span, score=0.25, label="wrong_source", metric="groundedness")
    assert event == Feedback(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        score=0.25,
        label="wrong_source",
        metric="groundedness",
    )


def test_feedback_on_an_ended_span_links_its_ids(logs: tuple[LoggerProvider, Path]) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.get_tracer("t").start_span("rag").end()
    (ended,) = memory.get_finished_spans()  # a ReadableSpan, as span processors see it
    (event,) = _written(logs, ended, score=1.0)
    assert event.span_id == format(ended.context.span_id, "016x")


def test_feedback_on_a_span_context_links_the_same_ids(logs: tuple[LoggerProvider, Path]) -> None:
    context = SpanContext(int(TRACE, 16), int(SPAN, 16), is_remote=False)
    (event,) = _written(logs, context, score=1.0)
    assert (event.trace_id, event.span_id) == (TRACE, SPAN)


def test_feedback_on_hex_ids_links_the_span_they_name(logs: tuple[LoggerProvider, Path]) -> None:
    (event,) = _written(logs, SPAN.upper(), trace_id=TRACE, label="pass")
    assert (event.trace_id, event.span_id, event.passed) == (TRACE, SPAN, True)


def test_feedback_on_a_trace_id_alone_leaves_the_span_id_unset(
    logs: tuple[LoggerProvider, Path],
) -> None:
    (event,) = _written(logs, TRACE, score=0.0)
    assert (event.trace_id, event.span_id, event.passed) == (TRACE, None, False)


def test_the_event_is_named_and_its_attributes_are_named_in_semconv(
    logs: tuple[LoggerProvider, Path],
) -> None:
    provider, path = logs
    attributes = feedback_attributes(score=0.5, label="ok", comment="fine", metric="faithfulness")
    write_feedback(provider, target_context(TRACE), attributes)
    line = path.read_text(encoding="utf-8")
    assert f'"eventName": "{semconv.FEEDBACK_EVENT}"' in line
    for key in (
        semconv.FEEDBACK_SCORE,
        semconv.FEEDBACK_LABEL,
        semconv.FEEDBACK_COMMENT,
        semconv.FEEDBACK_METRIC,
    ):
        assert f'"key": "{key}"' in line


def test_a_score_of_one_half_is_a_pass_and_below_it_a_fail() -> None:
    assert Feedback(TRACE, None, score=0.5).passed is True
    assert Feedback(TRACE, None, score=0.49).passed is False
    assert Feedback(TRACE, None, label="fail").passed is False
    assert Feedback(TRACE, None, label="thumbs_up").passed is None


# --- the comment obeys the content policy ------------------------------------------------


def test_a_comment_is_exported_redacted() -> None:
    policy = ContentPolicy(redact=lambda text: re.sub(r"\d{3}-\d{2}-\d{4}", "[SSN]", text))
    attributes = feedback_attributes(
        score=0.0, comment="my SSN 078-05-1120 is wrong", policy=policy
    )
    assert attributes[semconv.FEEDBACK_COMMENT] == "my SSN [SSN] is wrong"


def test_a_comment_is_scrubbed_of_credentials_whatever_the_policy() -> None:
    attributes = feedback_attributes(
        score=1.0, comment="key sk-abcdefghijklmnop", policy=ContentPolicy()
    )
    assert attributes[semconv.FEEDBACK_COMMENT] == f"key {REDACTED_SECRET}"


def test_without_content_a_comment_leaves_only_its_length() -> None:
    attributes = feedback_attributes(
        score=1.0, comment="call me at 555-0100", policy=ContentPolicy(capture_content=False)
    )
    assert semconv.FEEDBACK_COMMENT not in attributes
    assert attributes[semconv.FEEDBACK_COMMENT + semconv.SUFFIX_LENGTH] == 19
    assert semconv.FEEDBACK_COMMENT + semconv.SUFFIX_HMAC_SHA256 not in attributes


def test_without_content_a_keyed_hash_matches_equal_comments() -> None:
    policy = ContentPolicy(capture_content=False, hash_key="k" * 32)
    first = feedback_attributes(score=1.0, comment="same words", policy=policy)
    second = feedback_attributes(score=0.0, comment="same words", policy=policy)
    key = semconv.FEEDBACK_COMMENT + semconv.SUFFIX_HMAC_SHA256
    assert first[key] == second[key]
    assert "same words" not in str(first)


# --- bad input: one ValueError line at call time -----------------------------------------


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"score": 1.5}, "score= must be in [0, 1]"),
        ({"score": -0.01}, "score= must be in [0, 1]"),
        ({"score": math.nan}, "score= must be in [0, 1]"),
        ({"score": True}, "score= must be a number"),
        ({"score": "0.5"}, "score= must be a number"),
        ({}, "give a score="),
        ({"comment": "no verdict"}, "give a score="),
        ({"label": ""}, "label= must be a non-empty string"),
        ({"label": "x" * 65}, "at most 64 characters"),
        ({"score": 1.0, "metric": "helpfulness"}, "unknown metric 'helpfulness'"),
        ({"score": 1.0, "comment": 42}, "comment= must be a string"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(given: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)) as raised:
        feedback_attributes(**given)
    assert str(raised.value).startswith("ragpulse.feedback(): ")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("target", "trace_id", "said"),
    [
        ("not-an-id", None, "a trace id must be 32 hex digits"),
        ("0" * 32, None, "not all zero"),
        (SPAN, None, "a span id needs its trace"),
        (SPAN, "xyz", "trace_id= must be 32 hex digits"),
        (TRACE, TRACE, "a span id must be 16 hex digits"),
        (INVALID_SPAN, None, "no valid trace and span id"),
        (SpanContext(int(TRACE, 16), int(SPAN, 16), False), TRACE, "trace_id= goes with"),
        (12345, None, "not int"),
    ],
)
def test_bad_targets_are_refused_in_one_line(target: object, trace_id: Any, said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)) as raised:
        target_context(target, trace_id)
    assert "\n" not in str(raised.value)


def test_feedback_before_configure_says_to_configure_first() -> None:
    code = (
        "import ragpulse\n"
        "try:\n"
        f"    ragpulse.feedback('{TRACE}', score=1.0)\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "ragpulse.feedback(): ragpulse is not configured (or was shut down): "
        "call ragpulse.configure() first"
    )


def test_feedback_after_shutdown_is_refused_like_before_configure(tmp_path: Path) -> None:
    code = (
        "import ragpulse\n"
        "handle = ragpulse.configure(\n"
        "    evaluate=False, export=ragpulse.ExportOptions(handle_sigterm=False)\n"
        ")\n"
        f"ragpulse.feedback('{TRACE}', score=1.0)\n"
        "handle.shutdown()\n"
        "try:\n"
        f"    ragpulse.feedback('{TRACE}', score=1.0)\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "(or was shut down)" in done.stdout
    # The call made while configured was written, to the -logs file beside the traces.
    assert semconv.FEEDBACK_EVENT in (tmp_path / "ragpulse-logs.jsonl").read_text(encoding="utf-8")
