"""``@rag``, ``@retrieval`` and ``@generation``: RAG requests as OpenTelemetry spans.

Each decorator works on sync and async functions, generators, async
generators and methods. The wrapped function behaves exactly as undecorated:
its result and exceptions pass through unchanged (a one-shot iterator a
retriever returns is handed back as an iterator over the same items, read as
the caller consumes it), and any failure of ours is logged and recorded on the
span, never raised. Whatever happens, a started span ends.

What runs per call is kept small: names, pickers and static attributes are
worked out once when a function is decorated; a span's attributes are set in
one call just before it ends; the record is built only while a processor
wants it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, overload

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from ragpulse import errors, semconv
from ragpulse.capture._content import ContentPolicy, cap_bytes
from ragpulse.capture._instrument import (
    GENERATORS,
    ArgPicker,
    ArgSpec,
    Call,
    F,
    Hooks,
    ResultSpec,
    from_result,
    instrument,
    qualname,
    warning_attributes,
)
from ragpulse.capture._messages import ChatMessage, as_turns, read_messages, response_facts
from ragpulse.capture._record import (
    EXPLICIT,
    GENERATED,
    RESULT,
    RecordBuilder,
    current_record,
    handoff,
)
from ragpulse.capture._shield import capture_failed, swallow
from ragpulse.capture._text import (
    ContextsRead,
    ToText,
    Unreadable,
    UnreadableError,
    chunk_text,
    is_one_shot,
    read_contexts,
    to_text,
    unreadable_warning,
)
from ragpulse.errors import EvalStatus

_QUESTION_NAMES = ("question", "query", "q", "prompt", "input", "user_query", "message", "text")
_MESSAGES_NAMES = ("messages",)
_CONVERSATION_NAMES = ("conversation_id", "session_id", "thread_id")
_MAX_CONVERSATION_ID = 256
_FINISH_STOP = "stop"
_QUESTION_KEYS = (semconv.RAG_QUESTION,)
_QUESTION_KEYS_OI = (semconv.RAG_QUESTION, semconv.OI_INPUT_VALUE)
_ANSWER_KEYS = (semconv.RAG_ANSWER,)
_ANSWER_KEYS_OI = (semconv.RAG_ANSWER, semconv.OI_OUTPUT_VALUE)
_QUERY_KEYS = (semconv.GEN_AI_RETRIEVAL_QUERY_TEXT,)
_QUERY_KEYS_OI = (semconv.OI_INPUT_VALUE,)
_QUERY_KEYS_BOTH = (semconv.GEN_AI_RETRIEVAL_QUERY_TEXT, semconv.OI_INPUT_VALUE)


def _conversation_id(value: Any) -> str | None:
    """A conversation id argument as text (a string or a number), capped; else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        return None
    return cap_bytes(value, _MAX_CONVERSATION_ID)


# --- @rag ---------------------------------------------------------------------------


class _RagHooks(Hooks):
    owns_record = True

    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None,
        question_arg: ArgSpec,
        answer_from: ResultSpec,
        reference: Callable[[str | None], Any] | None,
        rubric: Callable[[str | None], Any] | None = None,
        conversation_arg: ArgSpec = None,
    ) -> None:
        self.span_name = name or qualname(func)
        self._question = ArgPicker(func, question_arg, _QUESTION_NAMES)
        conversation = ArgPicker(func, conversation_arg, _CONVERSATION_NAMES, first_text=False)
        self._conversation = None if conversation.finds_nothing else conversation
        self._answer_from = answer_from
        self._reference = reference
        self._rubric = rubric
        self._start_attributes: dict[str, AttributeValue] = {
            semconv.RAG_UNIT: True,
            semconv.RAG_NAME: self.span_name,
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OI_KIND_CHAIN,
        }

    def start(
        self, call: Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, AttributeValue]:
        question = self._question.pick(args, kwargs)
        if type(question) is str and question.isascii():
            # The usual question: nothing to read.
            call.builder = RecordBuilder(self.span_name, question, call.policy.max_record_chars)
        else:
            builder = call.builder = RecordBuilder(
                self.span_name, None, call.policy.max_record_chars
            )
            builder.question = builder.read(question, "question")
        if self._conversation is None:
            return dict(self._start_attributes)
        attributes = dict(self._start_attributes)
        conversation = _conversation_id(self._conversation.pick(args, kwargs))
        if conversation is not None:
            call.builder.conversation_id = conversation
            # An id, not the conversation's text: it leaves whatever the content policy.
            attributes[semconv.GEN_AI_CONVERSATION_ID] = conversation
            if call.policy.openinference:
                attributes[semconv.OI_SESSION_ID] = conversation
        return attributes

    def static_attributes(self, policy: ContentPolicy) -> dict[str, AttributeValue]:
        return dict(self._start_attributes)

    def collect(self, call: Call, item: Any) -> None:
        try:
            call.add_chunk(chunk_text(item))
        except UnreadableError as exc:
            if call.builder is not None:
                call.builder.warn(f"streamed answer chunk unreadable ({exc.kind}: {exc.error})")
                call.builder.unreadable_answers.add(RESULT)

    def streamed(self, span: Span, call: Call, error: BaseException | None) -> None:
        if error is None and call.builder is not None:
            call.builder.answer = call.streamed_text()

    def finish(self, span: Span, call: Call, result: Any) -> None:
        builder = call.builder
        if builder is None:
            return
        if self._answer_from is None:
            if builder.explicit_answer is not None or builder.generated_answer is not None:
                return  # an answer that wins over the result: nothing to read
            if type(result) is str and result.isascii():
                builder.answer = result  # the usual answer: nothing to read
            else:
                builder.set_answer(RESULT, result)
        elif builder.explicit_answer is None:
            builder.set_answer(EXPLICIT, from_result(result, self._answer_from))

    def before_end(self, span: Span, call: Call) -> None:
        builder = call.builder
        if builder is None:
            return
        if self._reference is not None and builder.reference is None:
            try:
                builder.reference = builder.read(self._reference(builder.question), "reference")
            except BaseException as exc:
                swallow(exc)
                capture_failed(span, "the reference", exc)
        if self._rubric is not None and builder.rubric is None:
            try:
                builder.rubric = builder.read_rubric(self._rubric(builder.question))
            except BaseException as exc:
                swallow(exc)
                capture_failed(span, "the rubric", exc)
        policy = call.policy
        # Inner calls are over: the record's fields are read without the lock.
        question, reference, rubric = builder.question, builder.reference, builder.rubric
        answer = builder.explicit_answer
        if answer is None:
            answer = builder.generated_answer
            if answer is None:
                answer = builder.answer
        attributes = call.pending
        if policy.openinference:
            policy.put_text(attributes, _QUESTION_KEYS_OI, question, call)
            policy.put_text(attributes, _ANSWER_KEYS_OI, answer, call)
        else:
            policy.put_text(attributes, _QUESTION_KEYS, question, call)
            policy.put_text(attributes, _ANSWER_KEYS, answer, call)
        attributes[semconv.RAG_CONTEXTS_COUNT] = len(builder.contexts)
        attributes[semconv.RAG_HAS_REFERENCE] = reference is not None
        if builder.attributes and builder.attributes.get("force"):
            attributes[semconv.RAG_FORCE_EVALUATION] = True
        if builder.unreadable_contexts:
            attributes[semconv.RAG_CONTEXTS_UNREADABLE] = builder.unreadable_contexts
        if builder.warnings:
            attributes.update(warning_attributes(builder.warnings))
        tool_calls = builder.tool_calls
        if tool_calls:
            attributes[semconv.RAG_TOOL_CALLS] = tool_calls
        if tool_calls or builder.agent:
            # An agent's answer: with no evidence at all (acting tools only) the worker skips
            # it as no_evidence, counted in coverage like a trace-read agent's.
            builder.attributes[semconv.RAG_ADAPTER_AGENT] = True
            if builder.failed_tools:
                attributes[semconv.RAG_TOOLS_FAILED] = list(builder.failed_tools)
        # Judging an answer against passages ragpulse could not read, or read only
        # in part, would report a hallucination that is not there: say why it
        # was not judged instead.
        skipped: str | None = None
        if (builder.unreadable_contexts or builder.unreadable_answers) and not builder.evaluable:
            skipped = errors.UNREADABLE_INPUT
        elif builder.too_large or (
            # What evaluation would read besides the contexts.
            len(question or "")
            + len(answer or "")
            + len(reference or "")
            + (sum(map(len, rubric)) if rubric else 0)
            > builder.budget
        ):
            skipped = errors.TOO_LARGE
        if skipped is not None:
            attributes[semconv.EVAL_STATUS] = EvalStatus.SKIPPED.value
            attributes[semconv.EVAL_ERROR_TYPE] = skipped
        if skipped is None and handoff.wanted:
            handoff.offer(builder.build(span.get_span_context()))


@overload
def rag(func: F, /) -> F: ...
@overload
def rag(
    *,
    name: str | None = None,
    question_arg: ArgSpec = None,
    answer_from: ResultSpec = None,
    reference: Callable[[str | None], Any] | None = None,
    rubric: Callable[[str | None], Any] | None = None,
    conversation_arg: ArgSpec = None,
) -> Callable[[F], F]: ...
def rag(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    question_arg: ArgSpec = None,
    answer_from: ResultSpec = None,
    reference: Callable[[str | None], Any] | None = None,
    rubric: Callable[[str | None], Any] | None = None,
    conversation_arg: ArgSpec = None,
) -> F | Callable[[F], F]:
    """Mark a function as one RAG request: the evaluation unit.

    The question is the argument named by ``question_arg`` (a name or a callable
    taking the call's arguments), else a parameter called ``question``,
    ``query``, ``prompt``…, else the first text argument. The answer is what
    ``record_answer`` set, else ``answer_from`` applied to the result, else the
    last ``@generation`` output, else the (streamed) result.
    ``reference(question)`` may return a gold answer for correctness, and
    ``rubric(question)`` the required points a complete answer covers (a list of
    texts, for completeness; ``record_rubric`` inside the call wins over it).
    The conversation the request is a turn of is the argument named by
    ``conversation_arg``, else a parameter called ``conversation_id``, ``session_id``
    or ``thread_id``: it goes onto the span as ``gen_ai.conversation.id``.

    Inside an agent, the results of the ``@tool`` calls it makes are its contexts; an
    answer after acting tools only (no passage, no evidence tool) is not judged
    (``ragpulse.eval.status = "skipped"``, ``error.type = "no_evidence"``).
    """

    def decorate(f: F) -> F:
        hooks = _RagHooks(f, name, question_arg, answer_from, reference, rubric, conversation_arg)
        return instrument(f, hooks)

    return decorate(func) if func is not None else decorate


# --- @retrieval -----------------------------------------------------------------------


class _RetrievalHooks(Hooks):
    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None,
        query_arg: ArgSpec,
        contexts_from: ResultSpec,
        to_text_fn: ToText | None,
    ) -> None:
        self.name = name or qualname(func)
        self.span_name = f"{semconv.GEN_AI_OPERATION_RETRIEVAL} {self.name}"
        self._query = ArgPicker(func, query_arg, _QUESTION_NAMES)
        self._contexts_from = contexts_from
        self._to_text = to_text_fn
        self._start_attributes: dict[str, AttributeValue] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OI_KIND_RETRIEVER,
        }

    def start(
        self, call: Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, AttributeValue]:
        call.builder = current_record.get()
        attributes = dict(self._start_attributes)
        query = self._query.pick(args, kwargs)
        if type(query) is not str or not query.isascii():
            try:
                query = to_text(query)
            except UnreadableError as exc:
                warning = f"query unreadable ({exc.kind}: {exc.error})"
                attributes.update(warning_attributes([warning]))
                return attributes
        policy = call.policy
        if policy.openinference:
            keys = _QUERY_KEYS_BOTH if policy.genai else _QUERY_KEYS_OI
        else:
            keys = _QUERY_KEYS
        policy.put_text(attributes, keys, query, call)
        return attributes

    def static_attributes(self, policy: ContentPolicy) -> dict[str, AttributeValue]:
        return dict(self._start_attributes)

    @staticmethod
    def _budget(call: Call) -> int:
        # Read what the record may still take, and at least what the span can show.
        budget = call.policy.max_documents_bytes
        builder = call.builder
        if builder is not None and builder.budget > budget:
            budget = builder.budget
        return budget

    def is_stream(self, call: Call, result: Any) -> bool:
        # A one-shot iterator is handed back wrapped and read as the caller
        # consumes it: reading it here would leave the caller nothing.
        if type(result) is list or self._contexts_from is not None or not is_one_shot(result):
            return False
        call.items = ContextsRead([], self._budget(call))
        return True

    def collect(self, call: Call, item: Any) -> None:
        if call.items is None:  # a generator function's first item
            call.items = ContextsRead([], self._budget(call))
        call.items.add(item, self._to_text)

    def streamed(self, span: Span, call: Call, error: BaseException | None) -> None:
        # The items the consumer got, also when the stream failed part-way.
        self._write(span, call, call.items or ContextsRead([]))

    def finish(self, span: Span, call: Call, result: Any) -> None:
        if self._contexts_from is None:
            self._write(span, call, read_contexts(result, self._to_text, self._budget(call)))
            return
        items = from_result(result, self._contexts_from)
        if is_one_shot(items):
            # Reading it would use up what the caller's result holds.
            read = ContextsRead([Unreadable(type(items).__name__, "one-shot iterator")])
            read.unreadable = 1
            self._write(span, call, read)
            return
        self._write(span, call, read_contexts(items, self._to_text, self._budget(call)))

    def _write(self, span: Span, call: Call, read: ContextsRead) -> None:
        attributes = call.pending
        call.policy.put_documents(attributes, read, call)
        if read.unreadable:
            first = read.first_unreadable()
            if first is not None:
                attributes[semconv.RAG_CONTEXTS_UNREADABLE] = read.unreadable
                attributes.update(warning_attributes([unreadable_warning(read.unreadable, first)]))
        if call.builder is not None:
            call.builder.add_read(read, span.get_span_context().span_id)


@overload
def retrieval(func: F, /) -> F: ...
@overload
def retrieval(
    *,
    name: str | None = None,
    query_arg: ArgSpec = None,
    contexts_from: ResultSpec = None,
    to_text: ToText | None = None,
) -> Callable[[F], F]: ...
def retrieval(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    query_arg: ArgSpec = None,
    contexts_from: ResultSpec = None,
    to_text: ToText | None = None,
) -> F | Callable[[F], F]:
    """Mark a retriever: its result becomes the request's contexts.

    Items may be ``str``, ``dict``, LangChain ``Document``, LlamaIndex nodes, or
    anything ``to_text`` can read. ``contexts_from`` picks the items out of a
    richer result (a key, an attribute name, or a callable). A result that is a
    one-shot iterator (a generator, ``map(...)``) is handed back as an iterator
    over the same items and read as the caller consumes it; an item that cannot
    be read is marked, and the request is then not evaluated.
    """

    def decorate(f: F) -> F:
        return instrument(f, _RetrievalHooks(f, name, query_arg, contexts_from, to_text))

    return decorate(func) if func is not None else decorate


# --- @generation --------------------------------------------------------------------


class _GenerationHooks(Hooks):
    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None,
        model: str | None,
        answer_from: ResultSpec,
        system: str | None,
        messages_arg: ArgSpec,
    ) -> None:
        self.name = name or qualname(func)
        self.span_name = f"{semconv.GEN_AI_OPERATION_CHAT} {model or self.name}"
        self._answer_from = answer_from
        self._model = model
        messages = ArgPicker(func, messages_arg, _MESSAGES_NAMES, first_text=False)
        self._messages = None if messages.finds_nothing else messages

        attributes: dict[str, AttributeValue] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_CHAT,
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OI_KIND_LLM,
        }
        if model:
            attributes[semconv.GEN_AI_REQUEST_MODEL] = model
        if system:
            attributes[semconv.GEN_AI_PROVIDER_NAME] = system
        self._start_attributes = attributes
        # OpenInference names the model once more.
        self._start_attributes_oi = (
            attributes | {semconv.OI_LLM_MODEL_NAME: model} if model else attributes
        )

    def start(
        self, call: Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, AttributeValue]:
        call.builder = current_record.get()
        if call.builder is not None and self._model:
            # The generator's model: the judge's family is checked against it.
            call.builder.attributes[semconv.GEN_AI_REQUEST_MODEL] = self._model
        attributes = self.static_attributes(call.policy)
        if self._messages is None:
            return attributes
        messages = self._messages.pick(args, kwargs)
        if messages is None:
            return attributes
        read = read_messages(messages)
        if read is None:
            attributes.update(warning_attributes(["input messages unreadable"]))
            return attributes
        call.policy.put_messages(attributes, read, call, output=False)
        if call.builder is not None and handoff.wanted:
            # Its tool results are the unit's evidence: read only while a processor takes it.
            call.builder.add_conversation(as_turns(read))
        return attributes

    def static_attributes(self, policy: ContentPolicy) -> dict[str, AttributeValue]:
        return dict(self._start_attributes_oi if policy.openinference else self._start_attributes)

    def is_stream(self, call: Call, result: Any) -> bool:
        # Only plain generators are wrapped: an SDK stream object keeps its own type
        # and methods, so it is passed through untouched (the span ends at return).
        return isinstance(result, GENERATORS)

    def collect(self, call: Call, item: Any) -> None:
        try:
            call.add_chunk(chunk_text(item))
        except UnreadableError as exc:
            call.add_chunk("")
            if call.builder is not None:
                call.builder.warn(f"streamed answer chunk unreadable ({exc.kind}: {exc.error})")
                call.builder.unreadable_answers.add(GENERATED)

    def streamed(self, span: Span, call: Call, error: BaseException | None) -> None:
        if error is None:
            self._write(span, call, call.streamed_text())

    def finish(self, span: Span, call: Call, result: Any) -> None:
        value = result if self._answer_from is None else from_result(result, self._answer_from)
        if type(value) is str and value.isascii():
            self._write(span, call, value)
            return
        self._response_facts(call, result)
        try:
            # Read no further than the record holds: a longer answer is not judged.
            answer = to_text(value, call.policy.max_record_chars + 1)
        except UnreadableError as exc:
            warning = f"answer unreadable ({exc.kind}: {exc.error})"
            call.pending.update(warning_attributes([warning]))
            if call.builder is not None:
                call.builder.warn(warning)
                call.builder.unreadable_answers.add(GENERATED)
            return
        self._write(span, call, answer)

    @staticmethod
    def _response_facts(call: Call, result: Any) -> None:
        """An OpenAI-style response's id and finish reasons, on the span (and the id in the
        record, for the evaluation's events)."""
        try:
            response_id, reasons = response_facts(result)
        except Exception as exc:  # a user object's properties can do anything
            swallow(exc)
            return
        if response_id is not None:
            call.pending[semconv.GEN_AI_RESPONSE_ID] = response_id
            if call.builder is not None:
                call.builder.attributes[semconv.GEN_AI_RESPONSE_ID] = response_id
        if reasons:
            call.pending[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = reasons

    def _write(self, span: Span, call: Call, answer: str | None) -> None:
        builder = call.builder
        if builder is not None and GENERATED not in builder.unreadable_answers:
            builder.set_generated_answer(answer)
        if answer is not None:
            call.policy.put_messages(
                call.pending, [ChatMessage("assistant", answer)], call, output=True
            )
            # The answer ended the generation, unless the response said otherwise.
            call.pending.setdefault(semconv.GEN_AI_RESPONSE_FINISH_REASONS, [_FINISH_STOP])


@overload
def generation(func: F, /) -> F: ...
@overload
def generation(
    *,
    name: str | None = None,
    model: str | None = None,
    answer_from: ResultSpec = None,
    system: str | None = None,
    messages_arg: ArgSpec = None,
) -> Callable[[F], F]: ...
def generation(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    model: str | None = None,
    answer_from: ResultSpec = None,
    system: str | None = None,
    messages_arg: ArgSpec = None,
) -> F | Callable[[F], F]:
    """Mark the function that writes the answer.

    Its result (text, an OpenAI ``ChatCompletion``, a dict, or a stream of
    chunks) becomes the request's answer; a stream is joined when it ends.
    The chat messages it was given (a parameter named ``messages``, or
    ``messages_arg=``: a name or a callable taking the call's arguments) are
    recorded as its input messages.
    """

    def decorate(f: F) -> F:
        return instrument(f, _GenerationHooks(f, name, model, answer_from, system, messages_arg))

    return decorate(func) if func is not None else decorate
