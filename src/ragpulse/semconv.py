"""Attribute, metric and event names used by ragpulse, in one place.

Names follow the OpenTelemetry GenAI semantic conventions where they exist,
OpenInference where Phoenix needs them, and the ``ragpulse.`` namespace for the
rest. Code elsewhere imports these constants; it never spells a name inline.
"""

from __future__ import annotations

# --- GenAI semantic conventions: capture -----------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_OPERATION_RETRIEVAL = "retrieval"
GEN_AI_OPERATION_CHAT = "chat"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_RETRIEVAL_QUERY_TEXT = "gen_ai.retrieval.query.text"
GEN_AI_RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_OPERATION_EXECUTE_TOOL = "execute_tool"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"

# --- GenAI semantic conventions: evaluation --------------------------------
GEN_AI_EVALUATION_RESULT_EVENT = "gen_ai.evaluation.result"
EVALUATION_SCORE_METRIC = "ragpulse.evaluation.score"
"""The scores' histogram, one series per metric (``gen_ai.evaluation.name``): ragpulse's own,
as the GenAI conventions define the evaluation's event and attributes but no metric."""
# Scores by their pass/fail label (gen_ai.evaluation.score.label): what alerts compare, so a
# score exactly at its metric's threshold is `pass` there as it is on the span.
EVALUATION_LABELS_METRIC = "ragpulse.evaluation.labels"
GEN_AI_EVALUATION_NAME = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
ERROR_TYPE = "error.type"
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
EXCEPTION_ESCAPED = "exception.escaped"

# --- ragpulse: the evaluation unit (@rag span) -------------------------------
RAG_NAME = "ragpulse.rag.name"
OTEL_METRIC_OVERFLOW = "otel.metric.overflow"
"""Set on the point that counts what a cardinality limit kept out (as the OTel SDK does)."""
RAG_QUESTION = "ragpulse.input.question"
RAG_ANSWER = "ragpulse.output.answer"
RAG_CONTEXTS_COUNT = "ragpulse.contexts.count"
RAG_HAS_REFERENCE = "ragpulse.reference.present"
RAG_UNIT = "ragpulse.eval.unit"
RAG_FORCE_EVALUATION = "ragpulse.eval.force"
RAG_CAPTURE_STATUS = "ragpulse.capture.status"
RAG_CAPTURE_WARNING = "ragpulse.capture.warning"
RAG_CAPTURE_TRUNCATED = "ragpulse.capture.truncated"
RAG_CAPTURE_DOCUMENTS_OMITTED = "ragpulse.capture.documents.omitted"
RAG_CONTEXTS_UNREADABLE = "ragpulse.contexts.unreadable"
RAG_STREAM_END = "ragpulse.stream.end"
CAPTURE_STATUS_ERROR = "error"
CAPTURE_STATUS_PARTIAL = "partial"
# In a document of gen_ai.retrieval.documents (and OpenInference document.metadata):
# the item could not be read, and why.
GEN_AI_DOCUMENT_UNREADABLE = "unreadable"
# When content capture is off, texts are replaced by these: the length always, the
# HMAC-SHA256 keyed with the deployment's hash_key only when one is set (an unkeyed hash
# of a short text, an SSN, is found by trying every value). They are ragpulse's own, so
# they live under ``ragpulse.`` whatever the text's own name (``withheld``).
SUFFIX_LENGTH = ".length"
SUFFIX_HMAC_SHA256 = ".hmac_sha256"
_RAGPULSE = "ragpulse."
_GEN_AI = "gen_ai."
# The same two in a document of gen_ai.retrieval.documents.
DOCUMENT_CONTENT_LENGTH = "content_length"
DOCUMENT_CONTENT_HMAC_SHA256 = "content_hmac_sha256"

# --- ragpulse: agents (@tool spans, and what a unit says of its tool calls) ----
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_TYPE_FUNCTION = "function"
RAG_TOOL_OUTCOME = "ragpulse.tool.outcome"
"""On a ``@tool`` span: ``ok``, ``error`` (it raised or returned an error result) or
``empty`` (it returned nothing)."""
TOOL_OUTCOME_OK = "ok"
TOOL_OUTCOME_ERROR = "error"
TOOL_OUTCOME_EMPTY = "empty"
TOOL_ERROR_RESULT = "tool_error_result"
"""``error.type`` of a tool call that returned an error result (MCP's ``isError``): the
call ended in an error, so its span has no ``gen_ai.tool.call.result``."""
RAG_TOOL_CALLS = "ragpulse.tool_calls.count"
"""On a unit span: the ``@tool`` calls made inside it, evidence and acting tools alike."""
RAG_TOOLS_FAILED = "ragpulse.tools.failed"
"""On a unit span: the evidence tools that failed or returned nothing (``failed_tools``)."""

# --- ragpulse: evaluation results on the unit span ---------------------------
EVAL_PREFIX = "ragpulse.eval."
EVAL_STATUS = "ragpulse.eval.status"
EVAL_ERROR_TYPE = "ragpulse.eval.error.type"
EVAL_JUDGE = "ragpulse.eval.judge"
EVAL_ANNOTATOR_KIND = "ragpulse.eval.annotator_kind"
EVAL_DURATION_MS = "ragpulse.eval.duration_ms"
EVAL_JUDGE_MODEL = "ragpulse.eval.judge.model"
"""The judge's model: an LLM judge's model name, a local judge's exported model (its hub id)."""
EVAL_JUDGE_SAME_FAMILY = "ragpulse.eval.judge.same_family"
"""True when the judge's model is of the generator's family (``gpt-4o`` judging
``gpt-4o-mini``): its scores may be inflated; False when the families differ; absent when
either model or its family is unknown."""
EVAL_CASCADE_ESCALATED = "ragpulse.eval.cascade.escalated"
"""Cascade judge: True when the screen was unsure and the escalation judge decided."""
EVAL_DISAGREEMENT = "ragpulse.eval.disagreement"
"""True when the offline cross-check found a verified contradiction the LLM called supported."""
EVAL_CLAIMS = "ragpulse.eval.claims"
EVAL_CLAIMS_TOTAL = "ragpulse.eval.claims.total"
EVAL_CLAIMS_SUPPORTED = "ragpulse.eval.claims.supported"
EVAL_CLAIMS_INFERRED = "ragpulse.eval.claims.inferred"
EVAL_CLAIMS_NOT_FOUND = "ragpulse.eval.claims.not_found"
EVAL_CLAIMS_CONTRADICTED = "ragpulse.eval.claims.contradicted"
EVAL_TARGET_SPAN_ID = "ragpulse.eval.target.span_id"
EVAL_TARGET_TRACE_ID = "ragpulse.eval.target.trace_id"
EVAL_ABSTAINED = "ragpulse.eval.abstained"
"""True when the answer declines to answer ("I don't know")."""
EVAL_ANSWERABLE = "ragpulse.eval.answerable"
"""Whether the retrieved contexts could answer the question."""
EVAL_SLICE_PREFIX = "ragpulse.eval.slice."
EVAL_SLICE_SOURCES = "ragpulse.eval.slice.sources"
"""``none``, ``single`` or ``multi``: how many contexts the supported claims draw on."""
EVAL_SLICE_QUESTION = "ragpulse.eval.slice.question"
"""``none``, ``single_part`` or ``multi_part``."""
EVAL_SLICE_ABSTAINED = "ragpulse.eval.slice.abstained"
"""``true`` or ``false``."""
EVAL_SLICE_CITED = "ragpulse.eval.slice.cited"
"""``true`` when the answer cites a passage with an ``[N]`` marker."""
# Per claim in ``ragpulse.eval.claims``: the contexts its markers cite (0-based) and
# whether a cited context supports it.
CLAIM_CITED = "cited"
CLAIM_CITATION_HOLDS = "citation_holds"
CLAIM_CONFIDENCE = "confidence"
"""Per claim in ``ragpulse.eval.claims``: how sure the judge is of its verdict (0-1)."""
EVAL_CONTEXTS = "ragpulse.eval.contexts"
"""JSON list, one item per retrieved passage (``index`` and ``id`` as in
``gen_ai.retrieval.documents``): its ``relevance`` to the question, whether it is
``relevant`` (helps answer) and whether the answer ``used`` it."""
CONTEXT_RELEVANCE = "relevance"
CONTEXT_RELEVANT = "relevant"
CONTEXT_USED = "used"
# On each retrieval span of an evaluated unit, per document N (0-based, the document's
# position in that span: ``retrieval.documents.N``, the N-th item of
# ``gen_ai.retrieval.documents``, Phoenix's document position). Numbers and flags only.
EVAL_DOCUMENTS_PREFIX = "ragpulse.eval.context_relevance.documents."
DOCUMENT_SCORE = "score"
"""The document's relevance to the question, 0-1 (its ``context_relevance``)."""
DOCUMENT_RELEVANT = "relevant"
"""Whether it helps answer (what context precision ranks)."""
DOCUMENT_USED = "used"
"""Whether the answer drew on it (context utilisation)."""
EVAL_DIAGNOSIS = "ragpulse.eval.diagnosis"
"""``ok``, ``retrieval_miss``, ``generation_drift`` or ``unanswerable_ok``: whose fault a
poor answer is. Low-cardinality: also on the score histogram and the evaluations counter."""
EVAL_DIAGNOSIS_EXPLANATION = "ragpulse.eval.diagnosis.explanation"
"""Why the diagnosis was made, in ragpulse's own words."""


def withheld(key: str, suffix: str) -> str:
    """The name a text's ``suffix`` (``SUFFIX_LENGTH``, ``SUFFIX_HMAC_SHA256``) goes under
    when content capture is off: ``ragpulse.`` and the text's name without its ``gen_ai.``
    (``gen_ai.output.messages`` gives ``ragpulse.output.messages.length``; an OpenInference
    ``input.value`` gives ``ragpulse.input.value.length``). The GenAI conventions define no
    such names, and a name in their namespace is theirs to define."""
    if key.startswith(_RAGPULSE):
        return key + suffix
    return _RAGPULSE + key.removeprefix(_GEN_AI) + suffix


def eval_slice(name: str) -> str:
    """``ragpulse.eval.slice.<name>``: one low-cardinality cut of an evaluation."""
    return f"{EVAL_SLICE_PREFIX}{name}"


def eval_document(index: int, field: str) -> str:
    """``ragpulse.eval.context_relevance.documents.<index>.<field>``."""
    return f"{EVAL_DOCUMENTS_PREFIX}{index}.{field}"


def eval_score(metric: str) -> str:
    """``ragpulse.eval.<metric>.score``."""
    return f"{EVAL_PREFIX}{metric}.score"


def eval_label(metric: str) -> str:
    """``ragpulse.eval.<metric>.label``."""
    return f"{EVAL_PREFIX}{metric}.label"


def eval_explanation(metric: str) -> str:
    """``ragpulse.eval.<metric>.explanation``."""
    return f"{EVAL_PREFIX}{metric}.explanation"


# --- ragpulse: human feedback (a log event linked to the evaluated span) ------------------
FEEDBACK_EVENT = "ragpulse.feedback"
"""The event name of a person's verdict on a request (``ragpulse.feedback()``)."""
FEEDBACK_SCORE = "ragpulse.feedback.score"
"""The person's score in [0, 1]: 1 is good."""
FEEDBACK_LABEL = "ragpulse.feedback.label"
"""A short category the person chose (``pass``/``fail`` count as verdicts)."""
FEEDBACK_COMMENT = "ragpulse.feedback.comment"
"""The person's words, under the content policy like every exported text."""
FEEDBACK_METRIC = "ragpulse.feedback.metric"
"""The metric the feedback judges; absent when it judges the answer as a whole."""


# --- ragpulse: label values (statuses are ``EvalStatus``, reasons ``ragpulse.errors``) ---
LABEL_PASS = "pass"
LABEL_FAIL = "fail"

# --- OpenInference (Phoenix) -------------------------------------------------
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
OI_KIND_CHAIN = "CHAIN"
OI_KIND_RETRIEVER = "RETRIEVER"
OI_KIND_LLM = "LLM"
OI_KIND_EVALUATOR = "EVALUATOR"
OI_INPUT_VALUE = "input.value"
OI_OUTPUT_VALUE = "output.value"
OI_RETRIEVAL_DOCUMENTS = "retrieval.documents"
OI_DOCUMENT_CONTENT = "document.content"
OI_DOCUMENT_ID = "document.id"
OI_DOCUMENT_SCORE = "document.score"
OI_DOCUMENT_METADATA = "document.metadata"
OI_LLM_MODEL_NAME = "llm.model_name"
# OpenLLMetry's older names of an LLM span's models (before gen_ai.*).
TRACELOOP_LLM_REQUEST_MODEL = "llm.request.model"
TRACELOOP_LLM_RESPONSE_MODEL = "llm.response.model"
OI_LLM_OUTPUT_MESSAGES = "llm.output_messages"
OI_LLM_INPUT_MESSAGES = "llm.input_messages"
OI_MESSAGE_CONTENT = "message.content"
OI_MESSAGE_ROLE = "message.role"


def oi_annotation(index: int, field: str) -> str:
    """``annotations.<index>.annotation.<field>`` (OpenInference inline form)."""
    return f"annotations.{index}.annotation.{field}"


# --- OpenLLMetry (Traceloop) ------------------------------------------------
TRACELOOP_SPAN_KIND = "traceloop.span.kind"
TRACELOOP_ENTITY_INPUT = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT = "traceloop.entity.output"
DB_QUERY_RESULT_EVENT = "db.query.result"
DB_QUERY_RESULT_DOCUMENT = "db.query.result.document"
DB_QUERY_RESULT_ID = "db.query.result.id"
DB_QUERY_TEXT = "db.query.text"

# --- ragpulse self-metrics ----------------------------------------------------
METRIC_DECISIONS = "ragpulse.evaluator.decisions"
METRIC_QUEUE_SIZE = "ragpulse.evaluator.queue.size"
METRIC_QUEUE_BYTES = "ragpulse.evaluator.queue.bytes"
METRIC_HELD_SPANS = "ragpulse.evaluator.held_spans"
METRIC_HELD_BYTES = "ragpulse.evaluator.held_bytes"
METRIC_HOLD_TIME = "ragpulse.evaluator.hold_time"
METRIC_FORCED_EXPORTS = "ragpulse.evaluator.forced_exports"
METRIC_LATE_RESULTS = "ragpulse.evaluator.late_results"
METRIC_JUDGE_CALLS = "ragpulse.evaluator.judge.calls"
METRIC_JUDGE_TOKENS = "ragpulse.evaluator.judge.tokens"
METRIC_JUDGE_LATENCY = "ragpulse.evaluator.judge.latency"
METRIC_ERRORS = "ragpulse.evaluator.errors"
METRIC_EVALUATIONS = "ragpulse.evaluator.evaluations"
METRIC_BREAKER_STATE = "ragpulse.evaluator.breaker.open"
METRIC_EXPORT_DROPPED = "ragpulse.evaluator.export.dropped"
METRIC_COVERAGE = "ragpulse.evaluator.coverage"
ATTR_EXPORT_SIGNAL = "ragpulse.export.signal"
ATTR_EXPORT_REASON = "ragpulse.export.reason"
ATTR_DECISION_REASON = "ragpulse.decision.reason"
ATTR_SERVICE_NAME = "service.name"

# --- Attributes sampling rules read -------------------------------------------
HTTP_ROUTE = "http.route"

# --- RAGPULSE_* environment variables (keyword arguments win over these) -----
ENV_SAMPLE_RATE = "RAGPULSE_SAMPLE_RATE"
ENV_MAX_EVALUATIONS_PER_MINUTE = "RAGPULSE_MAX_EVALUATIONS_PER_MINUTE"
ENV_MAX_JUDGE_TOKENS_PER_HOUR = "RAGPULSE_MAX_JUDGE_TOKENS_PER_HOUR"
ENV_MAX_QUEUE_SIZE = "RAGPULSE_MAX_QUEUE_SIZE"
ENV_EVAL_CONCURRENCY = "RAGPULSE_EVAL_CONCURRENCY"
ENV_EVAL_TIMEOUT = "RAGPULSE_EVAL_TIMEOUT"
ENV_EVAL_MAX_RETRIES = "RAGPULSE_EVAL_MAX_RETRIES"

# --- Adapters: reading traces instrumented by others ---------------------------
RAG_ADAPTER_CONVENTION = "ragpulse.adapter.convention"
# OpenInference
OI_INPUT_MIME_TYPE = "input.mime_type"
OI_OUTPUT_MIME_TYPE = "output.mime_type"
OI_MIME_JSON = "application/json"
OI_MESSAGE_CONTENTS = "message.contents"
OI_MESSAGE_CONTENT_TYPE = "message_content.type"
OI_MESSAGE_CONTENT_TEXT = "message_content.text"
# GenAI: operations that generate text, and the older prompt/completion forms
GEN_AI_OPERATION_TEXT_COMPLETION = "text_completion"
GEN_AI_OPERATION_GENERATE_CONTENT = "generate_content"
GEN_AI_PROMPT = "gen_ai.prompt"
GEN_AI_COMPLETION = "gen_ai.completion"
GEN_AI_OPERATION_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
GEN_AI_CONTENT_PROMPT_EVENT = "gen_ai.content.prompt"
GEN_AI_CONTENT_COMPLETION_EVENT = "gen_ai.content.completion"
# OpenLLMetry (Traceloop)
LLM_REQUEST_TYPE = "llm.request.type"
DB_QUERY_RESULT_SCORE = "db.query.result.score"
DB_QUERY_RESULT_METADATA = "db.query.result.metadata"

# --- ragpulse serve: self-metrics of the OTLP relay ------------------------------------
METRIC_SERVE_SPANS_RECEIVED = "ragpulse.serve.spans.received"
METRIC_SERVE_SPANS_REFUSED = "ragpulse.serve.spans.refused"
METRIC_SERVE_SPANS_REJECTED = "ragpulse.serve.spans.rejected"
METRIC_SERVE_SPANS_EXPORTED = "ragpulse.serve.spans.exported"
METRIC_SERVE_EXPORT_FAILURES = "ragpulse.serve.export.failures"
METRIC_SERVE_SPANS_DROPPED = "ragpulse.serve.spans.dropped"
METRIC_SERVE_BUFFER_BYTES = "ragpulse.serve.buffer.bytes"
METRIC_SERVE_ASSEMBLY_TRACES = "ragpulse.serve.assembly.traces"
METRIC_SERVE_ASSEMBLY_RELEASED = "ragpulse.serve.assembly.released"
# Why a request was refused with a retryable answer (the refused counter's label).
METRIC_SERVE_UNITS_DUPLICATE = "ragpulse.serve.units.duplicate"
METRIC_SERVE_RESULTS_DROPPED = "ragpulse.serve.relayed_results_dropped"
METRIC_SERVE_CONTENT_EVENTS_DROPPED = "ragpulse.serve.content_events.dropped"
"""GenAI content log events of sampled traces serve did not read with their trace, by
``reason`` (``late``, ``bounds``); they are relayed all the same."""
"""Received evaluation results serve did not compute (``gen_ai.evaluation.result`` events,
``ragpulse.evaluation.score`` metrics), dropped from what it relays, by ``signal``."""
SERVE_EVAL_STRIPPED = "ragpulse.serve.eval_stripped"
"""On a received span: how many ``ragpulse.eval.*`` results it arrived with, removed because
this deployment did not compute them (the span is judged again when sampled)."""
SERVE_REFUSED_BUFFER_FULL = "buffer_full"
SERVE_REFUSED_DRAINING = "draining"

# --- Adapters: agents (tool results as evidence, conversations) -------------------
RAG_ADAPTER_AGENT = "ragpulse.adapter.agent"
"""In a record's attributes: it was read from an agent's trace (tools were offered, called
or answered), so an answer without any evidence is skipped ``no_evidence``, not ignored."""
RAG_ADAPTER_SPANS_REFUSED = "ragpulse.adapter.spans_refused"
"""In a record's attributes: spans of its trace the trace buffer's bounds refused; a record
read from part of its trace is not judged (``too_large``)."""
RAG_ADAPTER_HISTORY_GIVEN = "ragpulse.adapter.history_given"
"""In a ``@rag`` unit's record, never on a span: the contexts (0-based) that only a tool result
in the history ``@generation`` was given brought; the processor marks those no tool result it
saw in the conversation vouches for as ``RAG_ADAPTER_HISTORY_UNVOUCHED``."""
RAG_ADAPTER_HISTORY_UNVOUCHED = "ragpulse.adapter.history_unvouched"
"""In a record's attributes: the contexts (0-based) that only a tool result in the chat
history gave, which no tool span ragpulse saw vouches for; a claim whose only evidence lies
there is not counted as found (``trust_history`` turns this off)."""
RAG_TOOL_EVIDENCE = "ragpulse.tool.evidence"
"""On a tool span (``@ragpulse.tool(evidence=False)``): ``False`` when the tool acts rather
than fetches evidence; its result is then never a context."""
OI_KIND_TOOL = "TOOL"
OI_KIND_AGENT = "AGENT"
GEN_AI_OPERATION_INVOKE_AGENT = "invoke_agent"
GEN_AI_OPERATION_INVOKE_WORKFLOW = "invoke_workflow"
GEN_AI_OPERATION_CREATE_AGENT = "create_agent"
GEN_AI_OPERATION_PLAN = "plan"
GEN_AI_AGENT_OPERATIONS = frozenset(
    {
        GEN_AI_OPERATION_INVOKE_AGENT,
        GEN_AI_OPERATION_INVOKE_WORKFLOW,
        GEN_AI_OPERATION_CREATE_AGENT,
        GEN_AI_OPERATION_PLAN,
    }
)
"""``gen_ai.operation.name`` values of an agent's own spans (an agent invoked, a workflow of
agents, an agent created, an agent's planning step): a trace with such a span is an agent's,
even where its instrumentation records no tools offered."""
OI_TOOL_NAME = "tool.name"
OI_TOOL_CALL_ID = "tool_call.id"
OI_SESSION_ID = "session.id"
OI_LLM_TOOLS = "llm.tools"
OI_MESSAGE_TOOL_CALL_ID = "message.tool_call_id"
OI_MESSAGE_NAME = "message.name"
OI_MESSAGE_TOOL_CALLS = "message.tool_calls"
OI_TOOL_CALL_ID_KEY = "tool_call.id"
OI_TOOL_CALL_FUNCTION_NAME = "tool_call.function.name"
OI_TOOL_CALL_FUNCTION_ARGUMENTS = "tool_call.function.arguments"
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_PART_TOOL_CALL = "tool_call"
GEN_AI_PART_TOOL_CALL_RESPONSE = "tool_call_response"
MCP_METHOD_NAME = "mcp.method.name"
MCP_METHOD_TOOLS_CALL = "tools/call"
JSONRPC_REQUEST_ID = "jsonrpc.request.id"
TRACELOOP_ENTITY_NAME = "traceloop.entity.name"
TRACELOOP_KIND_TOOL = "tool"
LLM_REQUEST_FUNCTIONS = "llm.request.functions"

# --- Adapters: GenAI content written as log events, and the agent operations --------
TRACELOOP_KIND_AGENT = "agent"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_CHOICE_EVENT = "gen_ai.choice"
"""The GenAI instrumentation's legacy event of one completion choice (body: ``index``,
``finish_reason``, ``message``)."""
GEN_AI_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
"""The GenAI instrumentation's legacy per-message log events, and the role each names."""
EVENT_NAME = "event.name"
"""Where older OpenTelemetry SDKs put a log event's name (newer ones: the record's
``event_name`` field)."""
METRIC_CONTENT_EVENTS_DROPPED = "ragpulse.evaluator.content_events.dropped"
"""GenAI content log events not read with their trace, by ``reason``: ``bounds`` (the trace
buffer's count or byte bound), ``late`` (their trace was already read)."""
