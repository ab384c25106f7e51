"""ragpulse's evaluated spans reach Arize Phoenix through rotel, on their original span ids.

A small RAG app runs in its own process (a fresh OpenTelemetry global state, as in
production): ``ragpulse.configure()`` from the standard ``OTEL_*`` variables, ``LexicalJudge``,
``inline_annotations=True``. It exports to rotel, which records every span and forwards the
traces to Phoenix (SQLite, started by the test). Phoenix's REST API must then return the
``@rag`` span with the id it had while the request ran, the ``ragpulse.eval.*`` attributes and
the OpenInference ``annotations.N.annotation.*`` form that Phoenix shows as annotations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from ragpulse import semconv
from ragpulse.errors import EvalStatus
from servers.phoenix import PhoenixServer, PhoenixSpan
from servers.rotel_sink import RotelSink

pytestmark = [pytest.mark.integration, pytest.mark.phoenix]

GROUNDEDNESS = "groundedness"
THRESHOLD = 0.7
CONTEXT = (
    "The Larkspur 3 router ships with firmware 2.4. "
    "Firmware 2.4 added WPA3 support. "
    "The router has four Ethernet ports and one USB-C port."
)
QUESTION = "What firmware does the Larkspur 3 ship with, and how many Ethernet ports does it have?"
ANSWERS = {
    # Copied from the context: every claim has a verbatim span.
    "grounded": (
        "The Larkspur 3 router ships with firmware 2.4. The router has four Ethernet ports."
    ),
    # Numbers and features the context never states.
    "fabricated": "The Larkspur 3 ships with firmware 9.1. It has a built-in satellite modem.",
}

# The app under test, run as its own process. It prints the ids its @rag spans had while the
# requests ran, so the test can look for exactly those ids at the other end.
APP = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    import ragpulse
    from ragpulse.judges import LexicalJudge

    question, context, answers, threshold = json.loads(sys.argv[1])
    handle = ragpulse.configure(
        service_name="phoenix-proof",
        judge=LexicalJudge(),
        thresholds={"groundedness": threshold},
        evaluation=ragpulse.EvaluationOptions(inline_annotations=True),
    )

    @ragpulse.retrieval
    def search(query: str) -> list[str]:
        return [context]

    ids = {}
    for label, text in answers.items():

        @ragpulse.generation(model="extractive")
        def answer(question: str, docs: list[str]) -> str:
            return text

        @ragpulse.rag(name="support-" + label)
        def handle_request(question: str) -> str:
            span = trace.get_current_span().get_span_context()
            ids[label] = {"trace_id": format(span.trace_id, "032x"),
                          "span_id": format(span.span_id, "016x")}
            return answer(question, search(question))

        handle_request(question)

    handle.force_flush(timeout=30.0)
    handle.shutdown()
    print(json.dumps(ids))
    """
)


@dataclass(frozen=True)
class Exported:
    """What one run of the app left at each end: its ids, rotel's record and Phoenix."""

    ids: Mapping[str, Mapping[str, str]]
    sink: RotelSink
    phoenix: PhoenixServer

    def phoenix_span(self, label: str) -> PhoenixSpan:
        """The app's ``@rag`` span for ``label`` as Phoenix stores it, once evaluated."""
        return self.phoenix.wait_for_span(
            self.ids[label]["span_id"],
            lambda span: semconv.EVAL_STATUS in span["attributes"],
        )


def _run_app(otlp_endpoint: str, protocol: str) -> dict[str, dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_"))}
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        }
    )
    argument = json.dumps([QUESTION, CONTEXT, ANSWERS, THRESHOLD])
    done = subprocess.run(
        [sys.executable, "-c", APP, argument],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ids: dict[str, dict[str, str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return ids


@pytest.fixture(scope="module", params=["http/protobuf", "grpc"])
def exported(
    request: pytest.FixtureRequest, rotel_binary: Path, phoenix_server: PhoenixServer
) -> Iterator[Exported]:
    """The app run once per OTLP protocol, app -> rotel -> Phoenix on that same protocol."""
    protocol: str = request.param
    forward_protocol: Literal["http", "grpc"] = "grpc" if protocol == "grpc" else "http"
    backend = (
        phoenix_server.otlp_grpc_endpoint
        if forward_protocol == "grpc"
        else phoenix_server.otlp_http_endpoint
    )
    with RotelSink(
        binary=rotel_binary, forward_to=backend, forward_protocol=forward_protocol
    ) as sink:
        endpoint = sink.grpc_endpoint if protocol == "grpc" else sink.http_endpoint
        yield Exported(_run_app(endpoint, protocol), sink, phoenix_server)


def _annotations(attributes: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """OpenInference inline annotations by name: ``{name: {score, label, ...}}``."""
    found: dict[str, dict[str, Any]] = {}
    index = 0
    while semconv.oi_annotation(index, "name") in attributes:
        fields = ("score", "label", "explanation", "annotator_kind")
        found[attributes[semconv.oi_annotation(index, "name")]] = {
            field: attributes.get(semconv.oi_annotation(index, field)) for field in fields
        }
        index += 1
    return found


def test_evaluated_rag_span_is_stored_in_phoenix_under_its_original_ids(
    exported: Exported,
) -> None:
    stored = exported.phoenix_span("grounded")

    assert stored["context"] == exported.ids["grounded"]
    assert stored["parent_id"] is None


def test_phoenix_span_carries_the_ragpulse_eval_attributes(exported: Exported) -> None:
    attributes = exported.phoenix_span("grounded")["attributes"]

    assert attributes[semconv.EVAL_STATUS] == EvalStatus.OK
    assert isinstance(attributes[semconv.eval_score(GROUNDEDNESS)], float)
    assert 0.0 <= attributes[semconv.eval_score(GROUNDEDNESS)] <= 1.0
    assert attributes[semconv.EVAL_CLAIMS_TOTAL] >= 1
    assert attributes[semconv.EVAL_ANNOTATOR_KIND] == "CODE"


def test_phoenix_span_carries_openinference_annotations_equal_to_the_eval_attributes(
    exported: Exported,
) -> None:
    attributes = exported.phoenix_span("grounded")["attributes"]

    annotation = _annotations(attributes)[GROUNDEDNESS]

    assert annotation["score"] == attributes[semconv.eval_score(GROUNDEDNESS)]
    assert annotation["label"] == attributes[semconv.eval_label(GROUNDEDNESS)]
    assert annotation["annotator_kind"] == "CODE"


def test_grounded_answer_passes_and_fabricated_answer_fails_in_phoenix(
    exported: Exported,
) -> None:
    grounded = exported.phoenix_span("grounded")["attributes"]
    fabricated = exported.phoenix_span("fabricated")["attributes"]

    assert grounded[semconv.eval_label(GROUNDEDNESS)] == semconv.LABEL_PASS
    assert fabricated[semconv.eval_label(GROUNDEDNESS)] == semconv.LABEL_FAIL
    assert grounded[semconv.eval_score(GROUNDEDNESS)] > fabricated[semconv.eval_score(GROUNDEDNESS)]


def test_retrieval_and_generation_spans_keep_the_rag_span_as_parent_in_phoenix(
    exported: Exported,
) -> None:
    rag_ids = exported.ids["grounded"]
    exported.phoenix_span("grounded")
    children = [
        span
        for span in exported.phoenix.spans_in_trace(rag_ids["trace_id"])
        if span["context"]["span_id"] != rag_ids["span_id"]
    ]

    operations = sorted(span["attributes"].get(semconv.GEN_AI_OPERATION_NAME) for span in children)
    assert operations == [semconv.GEN_AI_OPERATION_CHAT, semconv.GEN_AI_OPERATION_RETRIEVAL]
    assert {span["parent_id"] for span in children} == {rag_ids["span_id"]}


def test_collector_passed_each_rag_span_on_exactly_once(exported: Exported) -> None:
    exported.phoenix_span("grounded")
    exported.phoenix_span("fabricated")
    rag_span_ids = {ids["span_id"] for ids in exported.ids.values()}

    received = [s.span_id for s in exported.sink.spans() if s.span_id in rag_span_ids]

    assert sorted(received) == sorted(rag_span_ids)
