"""``ragpulse eval --write-spans``: the evaluated spans of a trace file, as OTLP-JSON lines.

Each evaluated unit becomes one line, one export request as a file exporter writes it:
the unit's span as it was read plus its ``ragpulse.eval.*`` attributes, and the retrieval
and tool spans its contexts came from with their documents' scores, made by the same
functions serve's processor writes them with (``make_signals``, ``document_attributes``,
``rebuild``) under the content policy. A unit whose span was not kept (an earlier answer
whose LLM span a bound let go) gets a carrier span, as a late result does in serve. The
file is ready to send to a backend (the Collector's ``otlpjsonfile`` receiver reads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan

from ragpulse import semconv
from ragpulse.capture._content import ContentPolicy
from ragpulse.evaluation.types import Evaluation
from ragpulse.metrics._contexts import document_attributes
from ragpulse.offline.traces import TraceUnit
from ragpulse.outputs.files import otlp_json
from ragpulse.outputs.relayed import encode_request
from ragpulse.processor.settle import carrier_span, rebuild
from ragpulse.signals.emit import EmitOptions
from ragpulse.signals.make import make_signals

__all__ = ["EvaluatedSpans", "evaluated_spans"]


def evaluated_spans(
    unit: TraceUnit, evaluation: Evaluation, options: EmitOptions, policy: ContentPolicy
) -> list[ReadableSpan]:
    """The spans ``evaluation`` of ``unit`` is written onto, with their attributes."""
    record = unit.record
    target = record.span_context
    if target is None:
        return []
    service = record.attributes.get(semconv.ATTR_SERVICE_NAME)
    exported, signals = make_signals(
        evaluation,
        name=record.name,
        service=service if isinstance(service, str) else None,
        options=options,
        policy=policy,
        conversation=record.conversation_id,
    )
    if unit.span is not None:
        spans = [rebuild(unit.span, signals.span)]
    else:
        resource = unit.resource or Resource.get_empty()
        spans = [carrier_span(target, signals.span, exported, resource)]
    scored = document_attributes(signals.documents, record.sources)
    for span in unit.retrievals:
        extra = scored.get(span.context.span_id) if span.context is not None else None
        if extra:
            spans.append(rebuild(span, extra))
    return spans


class EvaluatedSpans:
    """Writes each evaluated unit's spans to ``path`` (created anew) as one OTLP-JSON line."""

    def __init__(self, path: Path, options: EmitOptions, policy: ContentPolicy) -> None:
        self.path = path
        self._options = options
        self._policy = policy
        self._out: TextIO = path.open("w", encoding="utf-8")
        self.lines = 0

    def write(self, unit: TraceUnit, evaluation: Evaluation) -> None:
        """One line for ``unit``; ``OSError`` when it cannot be written."""
        spans = evaluated_spans(unit, evaluation, self._options, self._policy)
        if spans:
            self._out.write(otlp_json(encode_request(spans)) + "\n")
            self._out.flush()
            self.lines += 1

    def close(self) -> None:
        """Flush and close the file; ``OSError`` when the last lines cannot be written."""
        self._out.close()
