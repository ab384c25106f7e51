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

import functools
import inspect
import traceback
import types
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast, overload

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ragpulse import errors, semconv
from ragpulse._secrets import scrub_secrets
from ragpulse._version import __version__
from ragpulse.capture._content import ContentPolicy, SpanBytes, cap_bytes, get_policy
from ragpulse.capture._record import (
    EXPLICIT,
    GENERATED,
    RESULT,
    RecordBuilder,
    current_record,
    handoff,
)
from ragpulse.capture._shield import capture_failed, swallow
from ragpulse.capture._streams import TracedAsyncStream, TracedStream
from ragpulse.capture._text import (
    PROPAGATE,
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

F = TypeVar("F", bound=Callable[..., Any])

# A ProxyTracer: it follows whatever global provider is set, even one set after
# the decorated module was imported.
_tracer = trace.get_tracer("ragpulse", __version__)
_sdk_tracer: trace.Tracer | None = None
"""The global provider's own tracer, once one is set (OpenTelemetry sets it once)."""


def _resolve_tracer() -> trace.Tracer:
    """The tracer to start spans with: the provider's own once set, else the proxy.

    Calling the provider's tracer directly spares every span the proxy's two calls.
    """
    global _sdk_tracer
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return _tracer
    _sdk_tracer = provider.get_tracer("ragpulse", __version__)
    return _sdk_tracer


_QUESTION_NAMES = ("question", "query", "q", "prompt", "input", "user_query", "message", "text")
_MESSAGES_NAMES = ("messages",)
_CONVERSATION_NAMES = ("conversation_id", "session_id", "thread_id")
_MAX_CONVERSATION_ID = 256
_QUESTION_KEYS = (semconv.RAG_QUESTION,)
_QUESTION_KEYS_OI = (semconv.RAG_QUESTION, semconv.OI_INPUT_VALUE)
_ANSWER_KEYS = (semconv.RAG_ANSWER,)
_ANSWER_KEYS_OI = (semconv.RAG_ANSWER, semconv.OI_OUTPUT_VALUE)
_QUERY_KEYS = (semconv.GEN_AI_RETRIEVAL_QUERY_TEXT,)
_QUERY_KEYS_OI = (semconv.OI_INPUT_VALUE,)
_QUERY_KEYS_BOTH = (semconv.GEN_AI_RETRIEVAL_QUERY_TEXT, semconv.OI_INPUT_VALUE)
_MAX_EXCEPTION_BYTES = 8192
_MAX_WARNING_BYTES = 1024

ArgSpec = str | Callable[..., Any] | None
ResultSpec = str | Callable[[Any], Any] | None


class _ArgPicker:
    """Finds one argument of a call by name, position or a user callable, cheaply.

    How is decided once, when the function is decorated: ``pick`` is the one
    way that applies, and ``finds_nothing`` says no call can have the argument.
    """

    __slots__ = ("_callable", "_index", "_name", "finds_nothing", "pick")

    def __init__(
        self,
        func: Callable[..., Any],
        spec: ArgSpec,
        defaults: Sequence[str],
        *,
        first_text: bool = True,
    ) -> None:
        self._callable: Callable[..., Any] | None = spec if callable(spec) else None
        self._name: str | None = None
        self._index: int | None = None
        self.pick: Callable[[tuple[Any, ...], Mapping[str, Any]], Any] = self._first_text
        self.finds_nothing = False
        if self._callable is not None:
            self.pick = self._by_callable
            return
        try:
            params = [
                p
                for p in inspect.signature(func).parameters.values()
                if p.name not in ("self", "cls")
            ]
        except (TypeError, ValueError):
            params = []
        names = [p.name for p in params]
        wanted = [spec] if isinstance(spec, str) else list(defaults)
        for candidate in wanted:
            if candidate in names:
                self._name = candidate
                self.pick = self._by_name
                position = names.index(candidate)
                kind = params[position].kind
                if kind in (
                    inspect.Parameter.POSITIONAL_ONLY,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                ):
                    self._index = position
                return
        if not first_text:
            self.finds_nothing = True
            self.pick = self._nothing

    def _by_callable(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        return self._callable(*args, **kwargs)  # type: ignore[misc]  # set with this method

    def _by_name(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        if kwargs and self._name in kwargs:
            return kwargs[self._name]  # type: ignore[index]  # set with this method
        index = self._index
        if index is not None and index < len(args):
            return args[index]
        return None

    @staticmethod
    def _first_text(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        # No named parameter: the first text argument is the best guess.
        for value in args:
            if isinstance(value, (str, bytes)):
                return value
        return None

    @staticmethod
    def _nothing(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        return None


def _conversation_id(value: Any) -> str | None:
    """A conversation id argument as text (a string or a number), capped; else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        return None
    return cap_bytes(value, _MAX_CONVERSATION_ID)


def _from_result(result: Any, spec: ResultSpec) -> Any:
    if spec is None:
        return result
    if callable(spec):
        return spec(result)
    if isinstance(result, Mapping):
        return result.get(spec)
    return getattr(result, spec, None)


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException as inner:
        swallow(inner)
        return f"<{type(exc).__name__}: str() raised {type(inner).__name__}>"


def _record_error(span: Span, exc: BaseException, policy: ContentPolicy) -> None:
    """Record the user's exception on the span, bounded; never raises (but see ``PROPAGATE``).

    Its message and traceback leave under the content policy like any captured text
    (an exception message often quotes the data that failed): credentials scrubbed,
    then the ``redact`` hook on the whole text, then the cap. Without content, only the
    exception's type and the frames of its traceback leave.
    """
    try:
        if isinstance(exc, Exception):
            name = type(exc).__name__
            module = type(exc).__module__
            qualified = (
                f"{module}.{type(exc).__qualname__}"
                if module and module != "builtins"
                else type(exc).__qualname__
            )
            event: dict[str, AttributeValue] = {semconv.EXCEPTION_TYPE: qualified}
            if policy.capture_content:
                message = _exported_error_text(_safe_str(exc), policy)
                event[semconv.EXCEPTION_MESSAGE] = message
                description = f"{name}: {message}"
                stack = _exported_error_text(_traceback_text(exc, with_messages=True), policy)
            else:
                description = name
                stack = _traceback_text(exc, with_messages=False)
            event[semconv.EXCEPTION_STACKTRACE] = cap_bytes(stack, _MAX_EXCEPTION_BYTES)
            event[semconv.EXCEPTION_ESCAPED] = "True"
            span.add_event(semconv.EXCEPTION_EVENT, event)
            span.set_status(Status(StatusCode.ERROR, cap_bytes(description, 1024)))
        else:  # cancellation, GeneratorExit, KeyboardInterrupt: not the function's failure
            span.set_attribute(semconv.ERROR_TYPE, type(exc).__name__)
    except BaseException as inner:
        capture_failed(span, "the exception", inner)
        swallow(inner)


def _exported_error_text(text: str, policy: ContentPolicy) -> str:
    """An exception's text as it may leave: credentials scrubbed, redacted whole, then capped."""
    return cap_bytes(policy.redacted(scrub_secrets(text)), _MAX_EXCEPTION_BYTES)


def _traceback_text(exc: BaseException, *, with_messages: bool) -> str:
    """``exc``'s traceback; without messages, its frames and type only (no text of the error)."""
    try:
        if with_messages:
            return "".join(traceback_lines(exc))
        frames = traceback.format_tb(exc.__traceback__, limit=-32)
        return "Traceback (most recent call last):\n" + "".join(frames) + type(exc).__name__
    except BaseException as inner:
        swallow(inner)
        return ""


def traceback_lines(exc: BaseException) -> list[str]:
    """The formatted traceback of ``exc`` (its last frames when it is long)."""
    return traceback.format_exception(exc, limit=-32)


class _Call(SpanBytes):
    """What one decorated call keeps between its start and its end.

    It is also the span's byte budget (one object per call, not two).
    """

    __slots__ = ("builder", "chunks", "items", "pending", "policy", "state")

    def __init__(self, policy: ContentPolicy) -> None:
        # SpanBytes' fields set here directly: one call less on every decorated call.
        self.remaining = policy.max_span_bytes
        self.truncated = None
        self.omitted_documents = 0
        self.policy = policy
        self.builder: RecordBuilder | None = None
        """The record this call reports into (for ``@rag``, its own)."""
        self.chunks: list[str] | None = None
        """A stream's text chunks, once it has one."""
        self.items: ContextsRead | None = None
        self.state: Any = None
        """What a decorator kind keeps of the call between its start and its end."""
        # Attributes for the span, set in one call just before it ends (one
        # set_attributes per span is what the SDK does cheapest): what ``start``
        # returns, filled in as the call goes.
        self.pending: dict[str, AttributeValue]

    def add_chunk(self, text: str) -> None:
        """Keep one text chunk of a stream."""
        if self.chunks is None:
            self.chunks = [text]
        else:
            self.chunks.append(text)

    def streamed_text(self) -> str:
        """The stream's chunks joined."""
        return "".join(self.chunks or ())


class _Hooks:
    """What one decorator kind does around a call. Subclasses fill the hooks."""

    span_name: str
    owns_record = False
    """Whether the call's record is made current while the function runs (``@rag``)."""

    def start(
        self, call: _Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, AttributeValue]:
        """Before the span starts: its attributes, static ones included."""
        return {}

    def static_attributes(self, policy: ContentPolicy) -> dict[str, AttributeValue]:
        """The attributes every span of this kind carries (what is left when ``start`` fails)."""
        return {}

    def is_stream(self, call: _Call, result: Any) -> bool:
        """Whether ``result`` is a stream to hand back wrapped and read as it is consumed."""
        return False

    def collect(self, call: _Call, item: Any) -> None:
        """One item of a stream (a generator function's, or a result's from ``stream``)."""

    def streamed(self, span: Span, call: _Call, error: BaseException | None) -> None:
        """The stream ended (``error`` when it raised); write what was collected."""

    def finish(self, span: Span, call: _Call, result: Any) -> None:
        """After a successful call whose result is not a stream."""

    def before_end(self, span: Span, call: _Call) -> None:
        """Just before the span's attributes are set and it ends, success or not.

        Not called for a kind that leaves it as it is here.
        """


def _instrument(func: F, hooks: _Hooks) -> F:
    """Wrap ``func`` so every call is a span driven by ``hooks``."""
    is_async_gen = inspect.isasyncgenfunction(func)
    is_gen = inspect.isgeneratorfunction(func)
    is_coro = inspect.iscoroutinefunction(func)
    owns_record = hooks.owns_record
    before_end = hooks.before_end if type(hooks).before_end is not _Hooks.before_end else None

    def begin(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Span, _Call]:
        call = _Call(get_policy())
        failure: BaseException | None = None
        try:
            call.pending = hooks.start(call, args, kwargs)
        except BaseException as exc:
            swallow(exc)  # before the span exists: nothing to lose
            call.pending = hooks.static_attributes(call.policy)
            failure = exc
        tracer = _sdk_tracer if _sdk_tracer is not None else _resolve_tracer()
        span = tracer.start_span(hooks.span_name)
        if failure is not None:
            capture_failed(span, "the call's inputs", failure)
        return span, call

    def end(span: Span, call: _Call) -> None:
        try:
            if before_end is not None:
                before_end(span, call)
        except BaseException as exc:
            capture_failed(span, "the record", exc)
            swallow(exc)
        finally:
            try:
                if call.truncated is not None or call.omitted_documents:
                    call.pending.update(call.truncation_attributes() or {})
                span.set_attributes(call.pending)
            finally:
                span.end()

    def fail(span: Span, call: _Call, exc: BaseException) -> None:
        """The function raised ``exc``: record it and end the span (the caller re-raises)."""
        try:
            _record_error(span, exc, call.policy)
        finally:
            end(span, call)

    def stream_ender(span: Span, call: _Call) -> Callable[[BaseException | None, str], None]:
        def on_end(error: BaseException | None, how: str) -> None:
            # Runs inside the consumer's next()/close(): must not raise over the
            # stream's own exception, and must end the span.
            try:
                call.pending[semconv.RAG_STREAM_END] = how
                if error is not None:
                    _record_error(span, error, call.policy)
                hooks.streamed(span, call, error)
            except BaseException as exc:
                capture_failed(span, "the streamed output", exc)
                if isinstance(exc, PROPAGATE):
                    end(span, call)
                    raise
            end(span, call)

        return on_end

    def collector(call: _Call) -> Callable[[Any], None]:
        return functools.partial(hooks.collect, call)

    def enter(span: Span, call: _Call) -> tuple[object, Any]:
        token = otel_context.attach(trace.set_span_in_context(span))
        builder = call.builder if owns_record else None
        record_token = current_record.set(builder) if builder is not None else None
        return token, record_token

    def leave(tokens: tuple[object, Any]) -> None:
        token, record_token = tokens
        if record_token is not None:
            current_record.reset(record_token)
        otel_context.detach(token)  # type: ignore[arg-type]

    if is_async_gen or is_gen:
        stream_type: type[TracedStream[Any]] | type[TracedAsyncStream[Any]] = (
            TracedAsyncStream if is_async_gen else TracedStream
        )

        @wrapt.decorator  # type: ignore[misc]
        def stream_wrapper(
            wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
        ) -> Iterator[Any] | AsyncIterator[Any]:
            # Calling a generator function runs none of its body; the span lives
            # as long as the stream, which the returned wrapper drives.
            span, call = begin(args, kwargs)
            tokens = enter(span, call)
            try:
                iterator = wrapped(*args, **kwargs)
            except BaseException as exc:
                leave(tokens)
                fail(span, call, exc)
                raise
            leave(tokens)
            return stream_type(
                iterator,
                span,
                call.builder if owns_record else None,
                collector(call),
                stream_ender(span, call),
            )

        return cast(F, stream_wrapper(func))

    def complete(span: Span, call: _Call, result: Any) -> Any:
        """Finish a plain call; a result read as a stream keeps the span open."""
        try:
            if hooks.is_stream(call, result):
                stream_cls = TracedAsyncStream if hasattr(result, "__anext__") else TracedStream
                return stream_cls(result, span, None, collector(call), stream_ender(span, call))
            hooks.finish(span, call, result)
        except BaseException as exc:
            capture_failed(span, "the result", exc)
            if isinstance(exc, PROPAGATE):
                end(span, call)
                raise
        end(span, call)
        return result

    if is_coro:

        @wrapt.decorator  # type: ignore[misc]
        async def async_wrapper(
            wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
        ) -> Any:
            span, call = begin(args, kwargs)
            tokens = enter(span, call)
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                leave(tokens)
                fail(span, call, exc)
                raise
            leave(tokens)
            return complete(span, call, result)

        return cast(F, async_wrapper(func))

    span_name = hooks.span_name
    start = hooks.start
    is_stream = hooks.is_stream
    finish = hooks.finish
    attach = otel_context.attach
    detach = otel_context.detach
    set_span_in_context = trace.set_span_in_context
    set_record = current_record.set
    reset_record = current_record.reset

    def run(
        wrapped: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        inputs: tuple[Any, ...],
    ) -> Any:
        """One sync call; ``inputs`` are its arguments less a method's ``self``."""
        # begin() and enter() written out: this is the path every sync call takes.
        call = _Call(get_policy())
        failure: BaseException | None = None
        try:
            call.pending = start(call, inputs, kwargs)
        except BaseException as exc:
            swallow(exc)  # before the span exists: nothing to lose
            call.pending = hooks.static_attributes(call.policy)
            failure = exc
        tracer = _sdk_tracer if _sdk_tracer is not None else _resolve_tracer()
        span = tracer.start_span(span_name)
        if failure is not None:
            capture_failed(span, "the call's inputs", failure)
        token = attach(set_span_in_context(span))
        record_token = set_record(call.builder) if owns_record else None
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            if record_token is not None:
                reset_record(record_token)
            detach(token)
            fail(span, call, exc)
            raise
        if record_token is not None:
            reset_record(record_token)
        detach(token)
        # complete() written out for the same reason.
        try:
            if type(result) not in _NEVER_STREAMS and is_stream(call, result):
                stream_cls = TracedAsyncStream if hasattr(result, "__anext__") else TracedStream
                return stream_cls(result, span, None, collector(call), stream_ender(span, call))
            finish(span, call, result)
        except BaseException as exc:
            capture_failed(span, "the result", exc)
            if isinstance(exc, PROPAGATE):
                end(span, call)
                raise
        # end() written out for the same reason.
        try:
            if before_end is not None:
                before_end(span, call)
        except BaseException as exc:
            capture_failed(span, "the record", exc)
            swallow(exc)
        finally:
            try:
                if call.truncated is not None or call.omitted_documents:
                    call.pending.update(call.truncation_attributes() or {})
                span.set_attributes(call.pending)
            finally:
                span.end()
        return result

    if isinstance(func, types.FunctionType):
        # A plain function (or method) gets a plain function around it: calling
        # one costs a fraction of what calling an object proxy costs. A method's
        # instance comes first in its arguments; the hooks look past it.
        if _takes_self(func):

            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                return run(func, args, kwargs, args[1:])
        else:

            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                return run(func, args, kwargs, args)

        return cast(F, functools.update_wrapper(sync_wrapper, func))

    # Anything else callable (a classmethod object, a callable instance): wrapt
    # binds it as its own descriptor would.
    @wrapt.decorator  # type: ignore[misc]
    def proxy_wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        return run(wrapped, args, kwargs, args)

    return cast(F, proxy_wrapper(func))


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _takes_self(func: Callable[..., Any]) -> bool:
    """Whether ``func``'s first parameter is a method's ``self`` or ``cls``."""
    try:
        first = next(iter(inspect.signature(func).parameters.values()), None)
    except (TypeError, ValueError):
        return False
    return first is not None and first.name in ("self", "cls") and first.kind in _POSITIONAL


_GENERATORS = (types.GeneratorType, types.AsyncGeneratorType)
_NEVER_STREAMS = frozenset({str, bytes, list, tuple, dict, int, float, bool, type(None)})
"""Result types no hook reads as a stream: the check is skipped for them."""


def _qualname(func: Callable[..., Any]) -> str:
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", "function"))


def _warning_attributes(warnings: Sequence[str]) -> dict[str, AttributeValue]:
    return {
        semconv.RAG_CAPTURE_STATUS: semconv.CAPTURE_STATUS_PARTIAL,
        semconv.RAG_CAPTURE_WARNING: cap_bytes("; ".join(warnings), _MAX_WARNING_BYTES),
    }


# --- @rag ---------------------------------------------------------------------------


class _RagHooks(_Hooks):
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
        self.span_name = name or _qualname(func)
        self._question = _ArgPicker(func, question_arg, _QUESTION_NAMES)
        conversation = _ArgPicker(func, conversation_arg, _CONVERSATION_NAMES, first_text=False)
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
        self, call: _Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
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

    def collect(self, call: _Call, item: Any) -> None:
        try:
            call.add_chunk(chunk_text(item))
        except UnreadableError as exc:
            if call.builder is not None:
                call.builder.warn(f"streamed answer chunk unreadable ({exc.kind}: {exc.error})")
                call.builder.unreadable_answers.add(RESULT)

    def streamed(self, span: Span, call: _Call, error: BaseException | None) -> None:
        if error is None and call.builder is not None:
            call.builder.answer = call.streamed_text()

    def finish(self, span: Span, call: _Call, result: Any) -> None:
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
            builder.set_answer(EXPLICIT, _from_result(result, self._answer_from))

    def before_end(self, span: Span, call: _Call) -> None:
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
            attributes.update(_warning_attributes(builder.warnings))
        tool_calls = builder.tool_calls
        if tool_calls:
            attributes[semconv.RAG_TOOL_CALLS] = tool_calls
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
        return _instrument(f, hooks)

    return decorate(func) if func is not None else decorate


# --- @retrieval -----------------------------------------------------------------------


class _RetrievalHooks(_Hooks):
    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None,
        query_arg: ArgSpec,
        contexts_from: ResultSpec,
        to_text_fn: ToText | None,
    ) -> None:
        self.name = name or _qualname(func)
        self.span_name = f"{semconv.GEN_AI_OPERATION_RETRIEVAL} {self.name}"
        self._query = _ArgPicker(func, query_arg, _QUESTION_NAMES)
        self._contexts_from = contexts_from
        self._to_text = to_text_fn
        self._start_attributes: dict[str, AttributeValue] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OI_KIND_RETRIEVER,
        }

    def start(
        self, call: _Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, AttributeValue]:
        call.builder = current_record.get()
        attributes = dict(self._start_attributes)
        query = self._query.pick(args, kwargs)
        if type(query) is not str or not query.isascii():
            try:
                query = to_text(query)
            except UnreadableError as exc:
                warning = f"query unreadable ({exc.kind}: {exc.error})"
                attributes.update(_warning_attributes([warning]))
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
    def _budget(call: _Call) -> int:
        # Read what the record may still take, and at least what the span can show.
        budget = call.policy.max_documents_bytes
        builder = call.builder
        if builder is not None and builder.budget > budget:
            budget = builder.budget
        return budget

    def is_stream(self, call: _Call, result: Any) -> bool:
        # A one-shot iterator is handed back wrapped and read as the caller
        # consumes it: reading it here would leave the caller nothing.
        if type(result) is list or self._contexts_from is not None or not is_one_shot(result):
            return False
        call.items = ContextsRead([], self._budget(call))
        return True

    def collect(self, call: _Call, item: Any) -> None:
        if call.items is None:  # a generator function's first item
            call.items = ContextsRead([], self._budget(call))
        call.items.add(item, self._to_text)

    def streamed(self, span: Span, call: _Call, error: BaseException | None) -> None:
        # The items the consumer got, also when the stream failed part-way.
        self._write(span, call, call.items or ContextsRead([]))

    def finish(self, span: Span, call: _Call, result: Any) -> None:
        if self._contexts_from is None:
            self._write(span, call, read_contexts(result, self._to_text, self._budget(call)))
            return
        items = _from_result(result, self._contexts_from)
        if is_one_shot(items):
            # Reading it would use up what the caller's result holds.
            read = ContextsRead([Unreadable(type(items).__name__, "one-shot iterator")])
            read.unreadable = 1
            self._write(span, call, read)
            return
        self._write(span, call, read_contexts(items, self._to_text, self._budget(call)))

    def _write(self, span: Span, call: _Call, read: ContextsRead) -> None:
        attributes = call.pending
        call.policy.put_documents(attributes, read, call)
        if read.unreadable:
            first = read.first_unreadable()
            if first is not None:
                attributes[semconv.RAG_CONTEXTS_UNREADABLE] = read.unreadable
                attributes.update(_warning_attributes([unreadable_warning(read.unreadable, first)]))
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
        return _instrument(f, _RetrievalHooks(f, name, query_arg, contexts_from, to_text))

    return decorate(func) if func is not None else decorate


# --- @generation --------------------------------------------------------------------


class _GenerationHooks(_Hooks):
    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None,
        model: str | None,
        answer_from: ResultSpec,
        system: str | None,
        messages_arg: ArgSpec,
    ) -> None:
        self.name = name or _qualname(func)
        self.span_name = f"{semconv.GEN_AI_OPERATION_CHAT} {model or self.name}"
        self._answer_from = answer_from
        self._model = model
        messages = _ArgPicker(func, messages_arg, _MESSAGES_NAMES, first_text=False)
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
        self, call: _Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
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
        read = _read_messages(messages)
        if read is None:
            attributes.update(_warning_attributes(["input messages unreadable"]))
        else:
            call.policy.put_messages(attributes, read, call, output=False)
        return attributes

    def static_attributes(self, policy: ContentPolicy) -> dict[str, AttributeValue]:
        return dict(self._start_attributes_oi if policy.openinference else self._start_attributes)

    def is_stream(self, call: _Call, result: Any) -> bool:
        # Only plain generators are wrapped: an SDK stream object keeps its own type
        # and methods, so it is passed through untouched (the span ends at return).
        return isinstance(result, _GENERATORS)

    def collect(self, call: _Call, item: Any) -> None:
        try:
            call.add_chunk(chunk_text(item))
        except UnreadableError as exc:
            call.add_chunk("")
            if call.builder is not None:
                call.builder.warn(f"streamed answer chunk unreadable ({exc.kind}: {exc.error})")
                call.builder.unreadable_answers.add(GENERATED)

    def streamed(self, span: Span, call: _Call, error: BaseException | None) -> None:
        if error is None:
            self._write(span, call, call.streamed_text())

    def finish(self, span: Span, call: _Call, result: Any) -> None:
        value = result if self._answer_from is None else _from_result(result, self._answer_from)
        if type(value) is str and value.isascii():
            self._write(span, call, value)
            return
        try:
            answer = to_text(value)
        except UnreadableError as exc:
            warning = f"answer unreadable ({exc.kind}: {exc.error})"
            call.pending.update(_warning_attributes([warning]))
            if call.builder is not None:
                call.builder.warn(warning)
                call.builder.unreadable_answers.add(GENERATED)
            return
        self._write(span, call, answer)

    def _write(self, span: Span, call: _Call, answer: str | None) -> None:
        builder = call.builder
        if builder is not None and GENERATED not in builder.unreadable_answers:
            builder.set_generated_answer(answer)
        if answer is not None:
            call.policy.put_messages(call.pending, [("assistant", answer)], call, output=True)


def _read_messages(messages: Any) -> list[tuple[str, str]] | None:
    """Chat messages (OpenAI-style dicts or objects with ``role``/``content``) as (role, text)."""
    if isinstance(messages, (str, bytes)):
        text = to_text(messages)
        return [("user", text or "")]
    if not isinstance(messages, (list, tuple)):
        return None
    read: list[tuple[str, str]] = []
    for message in messages[:256]:
        try:
            if isinstance(message, Mapping):
                role, content = message.get("role"), message.get("content")
            else:
                role, content = getattr(message, "role", None), getattr(message, "content", None)
            text = to_text(content) or ""
            read.append((role if isinstance(role, str) else "user", text))
        except UnreadableError as exc:
            read.append(("user", f"[unreadable {exc.kind}: {exc.error}]"))
    return read


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
        return _instrument(f, _GenerationHooks(f, name, model, answer_from, system, messages_arg))

    return decorate(func) if func is not None else decorate
