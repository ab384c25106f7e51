"""Reading trace files (OTLP-JSON lines) into evaluation units: ``TraceFileReader``, which
``ragpulse eval`` runs on a trace file, through serve's router and assembler."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

from opentelemetry.sdk.trace import ReadableSpan

from ragpulse.offline.evaluate import BadLine
from ragpulse.offline.traces import TraceFileReader, TraceUnit, looks_like_traces
from ragpulse.settings import Settings
from servers.otlp_files import hex_id, spans_line
from servers.rag_traces import ANSWER, rag_trace, span_id

TRACE = 0x5B8EFFF798038103D269B633813FC60C


def _read(lines: list[str], **settings: object) -> tuple[TraceFileReader, list[object]]:
    reader = TraceFileReader(Settings.load(settings))
    source = io.BytesIO("".join(line + "\n" for line in lines).encode())
    return reader, list(reader.read(source))


def _units(items: list[object]) -> list[TraceUnit]:
    return [item for item in items if isinstance(item, TraceUnit)]


def test_a_trace_split_over_lines_is_one_unit_with_its_retrieved_document() -> None:
    root, retriever = rag_trace(TRACE)
    reader, items = _read([spans_line([retriever]), spans_line([root])])

    [unit] = _units(items)
    assert unit.record.answer == ANSWER
    assert [c.text for c in unit.record.contexts] == [
        "The Eiffel Tower is 330 metres tall and stands in Paris."
    ]
    assert unit.id == f"{hex_id(TRACE, 16)}/{hex_id(span_id(TRACE, 1), 8)}"
    assert reader.stats.released == {"complete": 1}


def test_ids_are_read_as_the_hex_the_otlp_json_encoding_writes() -> None:
    root, retriever = rag_trace(TRACE)
    line = json.loads(spans_line([retriever, root]))
    [root_json] = [
        s for s in line["resourceSpans"][0]["scopeSpans"][0]["spans"] if "parentSpanId" not in s
    ]
    assert root_json["traceId"] == hex_id(TRACE, 16)

    [unit] = _units(_read([json.dumps(line)])[1])
    context = unit.record.span_context
    assert context is not None
    assert (context.trace_id, context.span_id) == (TRACE, span_id(TRACE, 1))


def test_a_unit_read_twice_is_judged_once() -> None:
    line = spans_line(rag_trace(TRACE))
    reader, items = _read([line, line])

    assert len(_units(items)) == 1
    assert reader.stats.duplicates == 1


def test_a_root_without_an_answer_is_released_and_is_no_unit() -> None:
    root, retriever = rag_trace(TRACE, root_attributes={"output.value": ""})
    reader, items = _read([spans_line([retriever, root])])

    assert _units(items) == []
    assert reader.stats.released == {"drain": 1}


def test_a_malformed_line_is_a_bad_line_with_its_number_and_the_rest_is_read() -> None:
    good = spans_line(rag_trace(TRACE))
    other = spans_line(rag_trace(TRACE + 1))
    not_hex = good.replace(hex_id(TRACE, 16), "zz" * 16)
    _, items = _read([good, "{not json", '{"question": "q"}', not_hex, other])

    bad = [item for item in items if isinstance(item, BadLine)]
    assert [b.line for b in bad] == [2, 3, 4]
    assert bad[0].reason.startswith("not JSON")
    assert bad[1].reason == "not an OTLP-JSON export request (no resourceSpans or resourceLogs)"
    assert "traceId is not hex" in bad[2].reason
    assert len(_units(items)) == 2


def test_spans_with_invalid_ids_are_counted_and_the_line_read() -> None:
    zero = spans_line(rag_trace(TRACE)).replace(hex_id(TRACE, 16), "0" * 32, 1)
    reader, items = _read([zero, spans_line(rag_trace(TRACE + 1))])

    assert reader.stats.rejected_spans == 1
    assert reader.stats.first_rejection is not None
    assert reader.stats.first_rejection.startswith("line 1:")
    assert len(_units(items)) == 1


def test_log_lines_are_decoded_and_counted() -> None:
    log = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {"logRecords": [{"traceId": hex_id(TRACE, 16), "body": {"stringValue": "x"}}]}
                ]
            }
        ]
    }
    reader, items = _read([json.dumps(log), spans_line(rag_trace(TRACE))])

    assert reader.stats.log_lines == 1
    assert reader.stats.log_records == 1
    assert len(_units(items)) == 1


def _interleaved(traces: int, lag: int, padding: int) -> Iterator[str]:
    """Each trace's retriever on one line and its root ``lag`` lines later, so ``lag``
    traces wait in assembly at any time; each document ``padding`` characters long."""
    first = 0x1000
    filler = " ".join("Paris" for _ in range(padding // 6))
    for number in range(traces + lag):
        if number < traces:
            trace = first + number
            _, retriever = rag_trace(trace, document=f"The tower is 330 metres tall. {filler}")
            yield spans_line([retriever])
        if number >= lag:
            root, _ = rag_trace(first + number - lag)
            yield spans_line([root])


def test_a_file_much_larger_than_the_assembly_bound_is_read_within_it() -> None:
    bound = 64 * 1024
    lines = list(_interleaved(traces=600, lag=8, padding=3000))
    assert sum(map(len, lines)) > 30 * bound
    largest_trace = max(map(len, lines)) * 2

    reader, items = _read(lines, serve_assembly_bytes=bound)

    assert len(_units(items)) == 600
    assert reader.stats.released == {"complete": 600}
    assert reader.stats.peak_bytes <= bound + largest_trace
    assert reader.stats.peak_traces <= 9
    assert reader.assembler.traces == 0


def test_traces_past_the_bounds_are_released_evicted_and_none_is_lost() -> None:
    lines = list(_interleaved(traces=300, lag=40, padding=3000))

    reader, _ = _read(lines, serve_assembly_traces=16)

    assert reader.stats.peak_traces <= 16
    assert reader.stats.released["evicted"] > 0
    # Every root is released exactly once, whatever became of its trace's parts.
    assert sum(reader.stats.released.values()) == 300
    assert reader.assembler.traces == 0


def _later(spans: list[ReadableSpan], seconds: float) -> list[ReadableSpan]:
    shift = int(seconds * 1e9)
    return [
        ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=span.attributes,
            start_time=(span.start_time or 0) + shift,
            end_time=(span.end_time or 0) + shift,
            instrumentation_scope=span.instrumentation_scope,
        )
        for span in spans
    ]


def test_a_unit_waits_the_assembly_timeout_in_the_files_own_time() -> None:
    # The root's retriever never comes; the next trace ended ten seconds later. Read in
    # no time at all, the root is still released by the timeout, before the file ends.
    root, _ = rag_trace(TRACE)
    later = _later(rag_trace(TRACE + 1), 10.0)

    reader, items = _read([spans_line([root]), *map(spans_line, [later])],
                          serve_assembly_timeout=2.0)  # fmt: skip

    assert reader.stats.released == {"timeout": 1, "complete": 1}
    assert len(_units(items)) == 1


def test_a_unit_still_waiting_at_the_end_of_the_file_is_released_as_serve_drains() -> None:
    root, _ = rag_trace(TRACE)

    reader, _ = _read([spans_line([root])])

    assert reader.stats.released == {"drain": 1}


def test_only_otlp_json_requests_are_taken_for_a_trace_file() -> None:
    assert looks_like_traces(b'{"resourceSpans": [')
    assert looks_like_traces(b'\xef\xbb\xbf\n  {"resourceLogs":[')
    assert not looks_like_traces(b'{"id": "q1", "resourceSpans": 1}')
    assert not looks_like_traces(b"")


def test_past_the_byte_bound_the_oldest_traces_are_released_and_memory_stays_bounded() -> None:
    bound = 64 * 1024
    lines = list(_interleaved(traces=300, lag=40, padding=3000))
    largest_trace = max(map(len, lines)) * 2

    reader, _ = _read(lines, serve_assembly_bytes=bound)

    assert reader.stats.released["evicted"] > 0
    assert reader.stats.peak_bytes <= bound + largest_trace
    assert sum(reader.stats.released.values()) == 300


def test_a_content_event_after_its_unit_was_judged_is_counted_late() -> None:
    root, _ = rag_trace(TRACE)
    assert root.context is not None
    event = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "eventName": "gen_ai.user.message",
                                "traceId": hex_id(TRACE, 16),
                                "spanId": hex_id(root.context.span_id, 8),
                                "body": {
                                    "kvlistValue": {
                                        "values": [
                                            {"key": "content", "value": {"stringValue": "Hi"}}
                                        ]
                                    }
                                },
                            }
                        ]
                    }
                ]
            }
        ]
    }

    reader, items = _read([spans_line(rag_trace(TRACE)), json.dumps(event)])

    assert len(_units(items)) == 1
    assert reader.stats.events_dropped == {"late": 1}
