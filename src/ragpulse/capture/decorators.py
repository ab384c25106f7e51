"""``@rag``, ``@retrieval`` and ``@generation``: RAG requests as OpenTelemetry spans.

Each decorator works on sync and async functions, generators, async
generators and methods. The wrapped function behaves exactly as undecorated:
its result and exceptions pass through unchanged, and any failure of ours is
logged and recorded on the span, never raised.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast, overload

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ragpulse import semconv
from ragpulse._version import __version__
from ragpulse.capture._content import get_policy
from ragpulse.capture._record import RecordBuilder, current_record, handoff
from ragpulse.capture._streams import TracedAsyncStream, TracedStream
from ragpulse.capture._text import ToText, to_contexts, to_text
from ragpulse.evaluation.types import Context

_logger = logging.getLogger("ragpulse.capture")

F = TypeVar("F", bound=Callable[..., Any])

# A ProxyTracer: it follows whatever global provider is set, even one set after
# the decorated module was imported.
_tracer = trace.get_tracer("ragpulse", __version__)

_QUESTION_NAMES = ("question", "query", "q", "prompt", "input", "user_query", "message", "text")

ArgSpec = str | Callable[..., Any] | None
ResultSpec = str | Callable[[Any], Any] | None


class _ArgPicker:
    """Finds one argument of a call by name, position or a user callable, cheaply."""

    __slots__ = ("_callable", "_index", "_name")

    def __init__(self, func: Callable[..., Any], spec: ArgSpec, defaults: Sequence[str]) -> None:
        self._callable: Callable[..., Any] | None = spec if callable(spec) else None
        self._name: str | None = None
        self._index: int | None = None
        if self._callable is not None:
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
                position = names.index(candidate)
                kind = params[position].kind
                if kind in (
                    inspect.Parameter.POSITIONAL_ONLY,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                ):
                    self._index = position
                break

    def pick(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        if self._callable is not None:
            return self._callable(*args, **kwargs)
        if self._name is not None:
            if self._name in kwargs:
                return kwargs[self._name]
            if self._index is not None and self._index < len(args):
                return args[self._index]
            return None
        # No named parameter: the first text argument is the best guess.
        for value in args:
            if isinstance(value, (str, bytes)):
                return value
        return None


def _from_result(result: Any, spec: ResultSpec) -> Any:
    if spec is None:
        return result
    if callable(spec):
        return spec(result)
    if isinstance(result, Mapping):
        return result.get(spec)
    return getattr(result, spec, None)


def _record_error(span: Span, exc: BaseException) -> None:
    if isinstance(exc, Exception):
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:1024]))
    else:  # cancellation, GeneratorExit, KeyboardInterrupt: not the function's failure
        span.set_attribute(semconv.ERROR_TYPE, type(exc).__name__)


def _capture_failed(span: Span, what: str) -> None:
    _logger.warning("ragpulse: could not capture %s", what, exc_info=True)
    try:
        span.set_attribute(semconv.RAG_CAPTURE_STATUS, "error")
        span.set_attribute(semconv.RAG_CAPTURE_WARNING, f"could not capture {what}")
    except Exception:
        pass


class _Hooks:
    """What one decorator kind does around a call. Subclasses fill the hooks."""

    span_name: str
    func: Callable[..., Any]

    def start(self, span: Span, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """Called with the span started; returns per-call state."""
        return None

    def record_builder(self, state: Any) -> RecordBuilder | None:
        """The record to make current while the function runs (``@rag`` only)."""
        return None

    def finish(self, span: Span, state: Any, result: Any, streamed: str | None) -> None:
        """Called before the span ends, after success; ``streamed`` is a joined stream."""

    def before_end(self, span: Span, state: Any) -> None:
        """Called just before ``span.end()``, success or not."""


def _run_hook(span: Span, what: str, hook: Callable[[], None]) -> None:
    try:
        hook()
    except Exception:
        _capture_failed(span, what)


def _instrument(func: F, hooks: _Hooks, *, stream_results: bool = False) -> F:
    """Wrap ``func`` so every call is a span driven by ``hooks``."""
    is_async_gen = inspect.isasyncgenfunction(func)
    is_gen = inspect.isgeneratorfunction(func)
    is_coro = inspect.iscoroutinefunction(func)

    def begin(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Span, Any]:
        span = _tracer.start_span(hooks.span_name)
        state: Any = None
        try:
            state = hooks.start(span, args, kwargs)
        except Exception:
            _capture_failed(span, "the call's inputs")
        return span, state

    def end(span: Span, state: Any) -> None:
        _run_hook(span, "the record", lambda: hooks.before_end(span, state))
        span.end()

    def stream_ender(span: Span, state: Any) -> Callable[[str, BaseException | None, str], None]:
        def on_end(text: str, error: BaseException | None, how: str) -> None:
            span.set_attribute("ragpulse.stream.end", how)
            if error is not None:
                _record_error(span, error)
            else:
                _run_hook(
                    span, "the streamed output", lambda: hooks.finish(span, state, None, text)
                )
            end(span, state)

        return on_end

    def enter(span: Span, state: Any) -> tuple[object, Any]:
        token = otel_context.attach(trace.set_span_in_context(span))
        builder = hooks.record_builder(state)
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
            span, state = begin(args, kwargs)
            tokens = enter(span, state)
            try:
                iterator = wrapped(*args, **kwargs)
            except BaseException as exc:
                leave(tokens)
                _record_error(span, exc)
                end(span, state)
                raise
            leave(tokens)
            return stream_type(
                iterator, span, hooks.record_builder(state), stream_ender(span, state)
            )

        return cast(F, stream_wrapper(func))

    def complete(span: Span, state: Any, result: Any) -> Any:
        """Finish a plain call; a streamed result (e.g. an SDK stream) keeps the span open."""
        if stream_results and _is_stream(result):
            stream_cls = TracedAsyncStream if hasattr(result, "__anext__") else TracedStream
            return stream_cls(result, span, None, stream_ender(span, state))
        _run_hook(span, "the result", lambda: hooks.finish(span, state, result, None))
        end(span, state)
        return result

    if is_coro:

        @wrapt.decorator  # type: ignore[misc]
        async def async_wrapper(
            wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
        ) -> Any:
            span, state = begin(args, kwargs)
            tokens = enter(span, state)
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                leave(tokens)
                _record_error(span, exc)
                end(span, state)
                raise
            leave(tokens)
            return complete(span, state, result)

        return cast(F, async_wrapper(func))

    @wrapt.decorator  # type: ignore[misc]
    def sync_wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        span, state = begin(args, kwargs)
        tokens = enter(span, state)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            leave(tokens)
            _record_error(span, exc)
            end(span, state)
            raise
        leave(tokens)
        return complete(span, state, result)

    return cast(F, sync_wrapper(func))


def _is_stream(result: Any) -> bool:
    # Only plain generators are wrapped: an SDK stream object keeps its own type
    # and methods, so it is passed through untouched (the span ends at return).
    return inspect.isgenerator(result) or inspect.isasyncgen(result)


def _qualname(func: Callable[..., Any]) -> str:
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", "function"))


# --- @rag ---------------------------------------------------------------------------


class _RagHooks(_Hooks):
    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None,
        question_arg: ArgSpec,
        answer_from: ResultSpec,
        reference: Callable[[str | None], Any] | None,
    ) -> None:
        self.func = func
        self.span_name = name or _qualname(func)
        self._question = _ArgPicker(func, question_arg, _QUESTION_NAMES)
        self._answer_from = answer_from
        self._reference = reference
        self._start_attributes: dict[str, AttributeValue] = {
            semconv.RAG_UNIT: True,
            semconv.RAG_NAME: self.span_name,
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OI_KIND_CHAIN,
        }

    def start(self, span: Span, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        builder = RecordBuilder(self.span_name, None)
        span.set_attributes(self._start_attributes)
        builder.question = to_text(self._question.pick(args, kwargs))
        return builder

    def record_builder(self, state: Any) -> RecordBuilder | None:
        return state  # type: ignore[no-any-return,return-value]

    def finish(self, span: Span, state: Any, result: Any, streamed: str | None) -> None:
        builder: RecordBuilder = state
        if streamed is not None:
            builder.answer = streamed
        else:
            value = _from_result(result, self._answer_from)
            if self._answer_from is not None:
                builder.explicit_answer = builder.explicit_answer or to_text(value)
            else:
                builder.answer = to_text(value)

    def before_end(self, span: Span, state: Any) -> None:
        builder: RecordBuilder | None = state
        if builder is None:
            return
        if self._reference is not None and builder.reference is None:
            try:
                builder.reference = to_text(self._reference(builder.question))
            except Exception:
                _capture_failed(span, "the reference")
        record = builder.build(span.get_span_context())
        policy = get_policy()
        attributes: dict[str, Any] = {}
        attributes.update(
            policy.text_attributes(semconv.RAG_QUESTION, record.question, semconv.OI_INPUT_VALUE)
        )
        attributes.update(
            policy.text_attributes(semconv.RAG_ANSWER, record.answer, semconv.OI_OUTPUT_VALUE)
        )
        attributes[semconv.RAG_CONTEXTS_COUNT] = len(record.contexts)
        attributes[semconv.RAG_HAS_REFERENCE] = record.reference is not None
        if record.attributes.get("force"):
            attributes[semconv.RAG_FORCE_EVALUATION] = True
        span.set_attributes(attributes)
        handoff.offer(record)


@overload
def rag(func: F, /) -> F: ...
@overload
def rag(
    *,
    name: str | None = None,
    question_arg: ArgSpec = None,
    answer_from: ResultSpec = None,
    reference: Callable[[str | None], Any] | None = None,
) -> Callable[[F], F]: ...
def rag(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    question_arg: ArgSpec = None,
    answer_from: ResultSpec = None,
    reference: Callable[[str | None], Any] | None = None,
) -> F | Callable[[F], F]:
    """Mark a function as one RAG request: the evaluation unit.

    The question is the argument named by ``question_arg`` (a name or a callable
    taking the call's arguments), else a parameter called ``question``,
    ``query``, ``prompt``…, else the first text argument. The answer is what
    ``record_answer`` set, else ``answer_from`` applied to the result, else the
    last ``@generation`` output, else the (streamed) result.
    ``reference(question)`` may return a gold answer for correctness.
    """

    def decorate(f: F) -> F:
        return _instrument(f, _RagHooks(f, name, question_arg, answer_from, reference))

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
        self.func = func
        self.name = name or _qualname(func)
        self.span_name = f"{semconv.GEN_AI_OPERATION_RETRIEVAL} {self.name}"
        self._query = _ArgPicker(func, query_arg, _QUESTION_NAMES)
        self._contexts_from = contexts_from
        self._to_text = to_text_fn

    def start(self, span: Span, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_RETRIEVAL)
        span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OI_KIND_RETRIEVER)
        query = to_text(self._query.pick(args, kwargs))
        span.set_attributes(
            get_policy().text_attributes(semconv.GEN_AI_RETRIEVAL_QUERY_TEXT, query)
        )
        return None

    def finish(self, span: Span, state: Any, result: Any, streamed: str | None) -> None:
        items = _from_result(result, self._contexts_from) if streamed is None else [streamed]
        contexts: list[Context] = to_contexts(items, self._to_text)
        span.set_attribute(
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS, get_policy().documents_json(contexts)
        )
        builder = current_record.get()
        if builder is not None:
            builder.add_contexts(contexts)


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
    richer result (a key, an attribute name, or a callable).
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
    ) -> None:
        self.func = func
        self.name = name or _qualname(func)
        self.span_name = f"{semconv.GEN_AI_OPERATION_CHAT} {model or self.name}"
        self._model = model
        self._answer_from = answer_from
        self._system = system

    def start(self, span: Span, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_CHAT)
        span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OI_KIND_LLM)
        if self._model:
            span.set_attribute(semconv.GEN_AI_REQUEST_MODEL, self._model)
        if self._system:
            span.set_attribute(semconv.GEN_AI_PROVIDER_NAME, self._system)
        return None

    def finish(self, span: Span, state: Any, result: Any, streamed: str | None) -> None:
        answer = (
            streamed if streamed is not None else to_text(_from_result(result, self._answer_from))
        )
        builder = current_record.get()
        if builder is not None:
            builder.set_generated_answer(answer)
        if answer is None:
            return
        policy = get_policy()
        if policy.capture_content:
            message = {
                "role": "assistant",
                "parts": [{"type": "text", "content": policy.export_text(answer)}],
                "finish_reason": "stop",
            }
            span.set_attribute(
                semconv.GEN_AI_OUTPUT_MESSAGES, json.dumps([message], ensure_ascii=False)
            )
        else:
            span.set_attributes(policy.text_attributes(semconv.GEN_AI_OUTPUT_MESSAGES, answer))


@overload
def generation(func: F, /) -> F: ...
@overload
def generation(
    *,
    name: str | None = None,
    model: str | None = None,
    answer_from: ResultSpec = None,
    system: str | None = None,
) -> Callable[[F], F]: ...
def generation(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    model: str | None = None,
    answer_from: ResultSpec = None,
    system: str | None = None,
) -> F | Callable[[F], F]:
    """Mark the function that writes the answer.

    Its result (text, an OpenAI ``ChatCompletion``, a dict, or a stream of
    chunks) becomes the request's answer; a stream is joined when it ends.
    """

    def decorate(f: F) -> F:
        return _instrument(
            f, _GenerationHooks(f, name, model, answer_from, system), stream_results=True
        )

    return decorate(func) if func is not None else decorate
