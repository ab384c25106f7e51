"""``ragpulse serve`` keeps within its bounds: what it forwards fits the destination's limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from servers.otlp_load import CountingSink
from servers.rag_traces import post_spans, rag_trace
from servers.serve_process import ServeProcess

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
DOCUMENT = "The Eiffel Tower is 330 metres tall and stands in Paris. " * 1150  # ~64 KiB


@pytest.mark.parametrize(
    "mode", [("--sample-rate", "0"), ("--no-evaluate",)], ids=["converted", "passed-through"]
)
def test_requests_sent_separately_are_never_forwarded_as_one_past_the_byte_bound(
    tmp_path: Path, mode: tuple[str, ...]
) -> None:
    # A slow destination lets the 100 small requests pile up behind its first export.
    with (
        CountingSink(max_spans_per_s=100) as sink,
        ServeProcess(
            tmp_path,
            *mode,
            "--max-export-batch-bytes",
            str(1 * MiB),
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url},
        ) as serve,
    ):
        for trace_id in range(1, 101):
            response = post_spans(serve.http_endpoint, rag_trace(trace_id, document=DOCUMENT))
            assert response.status_code == 200
        assert sink.wait_for(200, timeout=120), serve.log()
    assert sink.spans == 200
    assert max(sink.request_bytes) <= 1 * MiB
    assert sum(sink.request_bytes) > 6 * MiB


@pytest.mark.parametrize(
    "mode", [("--sample-rate", "0"), ("--no-evaluate",)], ids=["converted", "passed-through"]
)
def test_one_request_larger_than_the_byte_bound_is_forwarded_cut_below_it(
    tmp_path: Path, mode: tuple[str, ...]
) -> None:
    spans = [span for trace_id in range(1, 41) for span in rag_trace(trace_id, document=DOCUMENT)]
    with (
        CountingSink() as sink,
        ServeProcess(
            tmp_path,
            *mode,
            "--max-export-batch-bytes",
            str(1 * MiB),
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url},
        ) as serve,
    ):
        assert post_spans(serve.http_endpoint, spans).status_code == 200
        assert sink.wait_for(80, timeout=120), serve.log()
    assert sink.spans == 80
    assert max(sink.request_bytes) <= 1 * MiB
