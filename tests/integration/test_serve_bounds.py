"""``ragpulse serve`` keeps within its bounds: what it forwards fits the destination's limit."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from servers.otlp_load import CountingSink, make_requests
from servers.rag_traces import post_spans, rag_trace
from servers.serve_process import ServeProcess, free_port

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


def test_unsampled_spans_are_held_as_the_bytes_they_came_in_up_to_the_buffer(
    tmp_path: Path,
) -> None:
    # Nothing listens at the destination, so everything taken stays held until refused.
    # At rate 0 no span is decoded: the buffer holds the received bytes, once, and fills
    # with them (decoded, spans would hold several times their wire size).
    buffer_bytes = 8 * MiB
    with ServeProcess(
        tmp_path,
        "--sample-rate",
        "0",
        "--buffer-bytes",
        str(buffer_bytes),
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"},
    ) as serve:
        accepted = 0
        refused_in_a_row = 0
        seed = 0
        while refused_in_a_row < 5:
            seed += 1
            (body,) = make_requests(1, 64, seed=seed)
            response = httpx.post(
                f"{serve.http_endpoint}/v1/traces",
                content=body,
                headers={"content-type": "application/x-protobuf"},
                timeout=60,
            )
            assert response.status_code in (200, 429)
            if response.status_code == 200:
                accepted += len(body)
                refused_in_a_row = 0
            else:
                refused_in_a_row += 1
        serve.kill()

    assert buffer_bytes / 2 < accepted <= buffer_bytes
