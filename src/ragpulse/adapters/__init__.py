"""Read traces instrumented by others into a ``RagRecord``.

An app instrumented with OpenInference, the OpenTelemetry GenAI conventions or
OpenLLMetry has no ``@rag`` span: its question, contexts and answer are spread
over a trace. The processor keeps that trace's retrieval and LLM spans in a
``TraceBuffer`` (``is_buffered`` says which) and, when the local root ends, asks
``record_from_trace`` for the record to evaluate:

- ``question``: the root's input (``input.value``, ``traceloop.entity.input``,
  ``gen_ai.input.messages``), else the latest user message of the first LLM
  span, else the first retrieval query. A user message that contains a
  retrieved passage is a stuffed prompt, not a question: then the retrieval
  query wins.
- ``contexts``: every retrieved document, in span start order, with id and score
  where the convention has them; a passage reported twice (a framework's
  retriever span and the vector-store span under it) is kept once. The record's
  ``sources`` say which span and document position each came from (both spans,
  for a passage reported twice), so per-document scores go back onto them.
- ``answer``: the root's output, else the output message of the last LLM call that
  asked for no tool.

An agent's trace may hold several final answers to the user (``_agent.final_calls``):
``read_trace`` then gives one record per answer (``TraceReading.records``), each with its
own question, its own turn's evidence and the span its scores go onto (an earlier answer's
LLM span; the last answer's is the root, ``TraceReading.record``).

A span may mix conventions (ragpulse's own spans write OpenInference and GenAI
attributes side by side; OpenLLMetry's LLM spans use the older GenAI
attributes), so each facet is read with the span's own convention first and the
others after it. Nothing here raises: what cannot be read is skipped and counted
in ``read_trace``'s ``TraceReading``.
"""

from __future__ import annotations

from ragpulse.adapters._buffer import TraceBuffer, estimate_bytes
from ragpulse.adapters._classify import (
    SpanFacts,
    is_agent_record,
    is_buffered,
    is_evidence_span,
    is_local_root,
    is_retrieval,
    is_unit_record,
    may_answer,
    span_facts,
    unjudged_reason,
)
from ragpulse.adapters._read import TraceReading, read_trace, record_from_trace, records_from_trace
from ragpulse.adapters._readers import Convention, detect_convention
from ragpulse.adapters._tools import ToolPolicy

__all__ = [
    "Convention",
    "SpanFacts",
    "ToolPolicy",
    "TraceBuffer",
    "TraceReading",
    "detect_convention",
    "estimate_bytes",
    "is_agent_record",
    "is_buffered",
    "is_evidence_span",
    "is_local_root",
    "is_retrieval",
    "is_unit_record",
    "may_answer",
    "read_trace",
    "record_from_trace",
    "records_from_trace",
    "span_facts",
    "unjudged_reason",
]
