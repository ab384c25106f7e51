"""``ragpulse serve`` passes on only the scores it computed, and judges a unit once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse import semconv
from servers.otlp_load import CountingSink
from servers.rag_traces import post_spans, rag_trace, span_id
from servers.serve_process import ServeProcess

pytestmark = pytest.mark.integration

FORGED = {
    semconv.EVAL_STATUS: "ok",
    "ragpulse.eval.groundedness.score": 1.0,
    "ragpulse.eval.faithfulness.score": 1.0,
    "ragpulse.eval.faithfulness.label": "faithful",
}
UNSUPPORTED = "The Eiffel Tower is 12 metres tall and was built in Rome by a baker in 1452."


def test_results_a_unit_arrives_with_are_removed_and_marked_when_it_is_not_sampled(
    tmp_path: Path,
) -> None:
    with ServeProcess(tmp_path, "--sample-rate", "0") as serve:
        spans = rag_trace(0x71, root_attributes=FORGED)
        assert post_spans(serve.http_endpoint, spans).status_code == 200
        exported = serve.wait_for_spans(lambda spans: len(spans) == 2)

    (root,) = [s for s in exported if s.name == "POST /ask"]
    assert not [key for key in root.attributes if key.startswith(semconv.EVAL_PREFIX)]
    assert root.attributes[semconv.SERVE_EVAL_STRIPPED] == len(FORGED)


def test_a_unit_arriving_with_forged_scores_is_judged_again(tmp_path: Path) -> None:
    with ServeProcess(tmp_path, "--sample-rate", "1") as serve:
        spans = rag_trace(0x72, answer=UNSUPPORTED, root_attributes=FORGED)
        assert post_spans(serve.http_endpoint, spans).status_code == 200
        exported = serve.wait_for_spans(
            lambda spans: any(semconv.EVAL_STATUS in s.attributes for s in spans)
        )

    (root,) = [s for s in exported if s.name == "POST /ask"]
    assert root.attributes[semconv.EVAL_STATUS] == "ok"
    assert root.attributes["ragpulse.eval.groundedness.score"] < 1.0
    assert root.attributes[semconv.SERVE_EVAL_STRIPPED] == len(FORGED)


def test_a_trace_sent_three_times_has_its_unit_forwarded_and_judged_once(tmp_path: Path) -> None:
    trace_id = 0x73
    with CountingSink(keep_ids=True) as sink:
        serve = ServeProcess(
            tmp_path, "--sample-rate", "1", env={"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url}
        ).start()
        try:
            for _ in range(3):
                assert post_spans(serve.http_endpoint, rag_trace(trace_id)).status_code == 200
            # Draining exports everything held, so the counts below are final.
            assert serve.terminate() == 0
        finally:
            serve.stop()

    unit = (trace_id.to_bytes(16, "big"), span_id(trace_id, 1).to_bytes(8, "big"))
    assert sink.copies[unit] == 1
    assert sink.evaluations[trace_id.to_bytes(16, "big")] == 1
