"""What every capture decorator shares: one span around one call, whatever the call is.

``instrument`` wraps a function (sync, async, generator, async generator, method) so that a
span starts before it and ends after it, or after the stream it returned is consumed; the
``Hooks`` of a decorator (``@rag``, ``@retrieval``, ``@generation``, ``@tool``) say what the
span records. The wrapped function's result and exceptions pass through unchanged; a failure
of ours is recorded on the span (``record_error``) and never raised.
"""

from __future__ import annotations

import functools
import inspect
import traceback
import types
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ragpulse import semconv
from ragpulse._secrets import scrub_secrets
from ragpulse._version import __version__
from ragpulse.capture._content import ContentPolicy, SpanBytes, cap_bytes, get_policy
from ragpulse.capture._record import (
    RecordBuilder,
    current_record,
)
from ragpulse.capture._shield import capture_failed, swallow
from ragpulse.capture._streams import TracedAsyncStream, TracedStream
from ragpulse.capture._text import (
    PROPAGATE,
    ContextsRead,
)

__all__ = [
    "GENERATORS",
    "NEVER_STREAMS",
    "POSITIONAL",
    "ArgPicker",
    "ArgSpec",
    "Call",
    "F",
    "Hooks",
    "ResultSpec",
    "from_result",
    "instrument",
    "own_parameters",
    "qualname",
    "traceback_lines",
    "warning_attributes",
]

F = TypeVar("F", bound=Callable[..., Any])

# A ProxyTracer: it follows whatever global provider is set, even one set after
# the decorated module was imported. Made directly, not by trace.get_tracer(): that would
# load the provider OTEL_PYTHON_TRACER_PROVIDER names as this module is imported, and
# raise when it names none.
_tracer = trace.ProxyTracer("ragpulse", __version__)
_sdk_tracer: trace.Tracer | None = None
"""The global provider's own tracer, once one is set (OpenTelemetry sets it once)."""


def _resolve_tracer() -> trace.Tracer:
    """The tracer to start spans with: the provider's own once set, else the proxy.

    Calling the provider's tracer directly spares every span the proxy's two calls.
    """
    global _sdk_tracer
    try:
        provider = trace.get_tracer_provider()
    except Exception:  # OTEL_PYTHON_TRACER_PROVIDER names none the API can load
        return _tracer
    if isinstance(provider, trace.ProxyTracerProvider):
        return _tracer
    _sdk_tracer = provider.get_tracer("ragpulse", __version__)
    return _sdk_tracer


_MAX_EXCEPTION_BYTES = 8192
_MAX_WARNING_BYTES = 1024

ArgSpec = str | Callable[..., Any] | None
ResultSpec = str | Callable[[Any], Any] | None


class ArgPicker:
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
        params = own_parameters(func)
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


def from_result(result: Any, spec: ResultSpec) -> Any:
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
            # The conventions' class of the error the operation ended with.
            span.set_attribute(semconv.ERROR_TYPE, qualified)
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


class Call(SpanBytes):
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


class Hooks:
    """What one decorator kind does around a call. Subclasses fill the hooks."""

    span_name: str
    owns_record = False
    """Whether the call's record is made current while the function runs (``@rag``)."""

    def start(
        self, call: Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, AttributeValue]:
        """Before the span starts: its attributes, static ones included."""
        return {}

    def static_attributes(self, policy: ContentPolicy) -> dict[str, AttributeValue]:
        """The attributes every span of this kind carries (what is left when ``start`` fails)."""
        return {}

    def is_stream(self, call: Call, result: Any) -> bool:
        """Whether ``result`` is a stream to hand back wrapped and read as it is consumed."""
        return False

    def collect(self, call: Call, item: Any) -> None:
        """One item of a stream (a generator function's, or a result's from ``stream``)."""

    def streamed(self, span: Span, call: Call, error: BaseException | None) -> None:
        """The stream ended (``error`` when it raised); write what was collected."""

    def finish(self, span: Span, call: Call, result: Any) -> None:
        """After a successful call whose result is not a stream."""

    def before_end(self, span: Span, call: Call) -> None:
        """Just before the span's attributes are set and it ends, success or not.

        Not called for a kind that leaves it as it is here.
        """


def instrument(func: F, hooks: Hooks) -> F:
    """Wrap ``func`` so every call is a span driven by ``hooks``."""
    is_async_gen = inspect.isasyncgenfunction(func)
    is_gen = inspect.isgeneratorfunction(func)
    is_coro = inspect.iscoroutinefunction(func)
    owns_record = hooks.owns_record
    before_end = hooks.before_end if type(hooks).before_end is not Hooks.before_end else None

    def begin(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Span, Call]:
        call = Call(get_policy())
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

    def end(span: Span, call: Call) -> None:
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

    def fail(span: Span, call: Call, exc: BaseException) -> None:
        """The function raised ``exc``: record it and end the span (the caller re-raises)."""
        try:
            _record_error(span, exc, call.policy)
        finally:
            end(span, call)

    def stream_ender(span: Span, call: Call) -> Callable[[BaseException | None, str], None]:
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

    def collector(call: Call) -> Callable[[Any], None]:
        return functools.partial(hooks.collect, call)

    def enter(span: Span, call: Call) -> tuple[object, Any]:
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

    def complete(span: Span, call: Call, result: Any) -> Any:
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

    def sync_wrapper_of(wrapped: Callable[..., Any], skip: int) -> Callable[..., Any]:
        """The wrapper of a sync function; the hooks see its arguments from ``skip`` on
        (1 past a method's ``self``).

        Its body is the whole call, begin() to end() written out: a recursive decorated
        function keeps this one frame on the stack per level beside its own, so it
        reaches the interpreter's recursion limit at half the undecorated depth, not less.
        """

        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            call = Call(get_policy())
            failure: BaseException | None = None
            try:
                call.pending = start(call, args[skip:] if skip else args, kwargs)
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
            try:
                if type(result) not in NEVER_STREAMS and is_stream(call, result):
                    stream_cls = TracedAsyncStream if hasattr(result, "__anext__") else TracedStream
                    return stream_cls(result, span, None, collector(call), stream_ender(span, call))
                finish(span, call, result)
            except BaseException as exc:
                capture_failed(span, "the result", exc)
                if isinstance(exc, PROPAGATE):
                    end(span, call)
                    raise
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

        return sync_wrapper

    if isinstance(func, types.FunctionType):
        # A plain function (or method) gets a plain function around it: calling
        # one costs a fraction of what calling an object proxy costs. A method's
        # instance comes first in its arguments; the hooks look past it.
        wrapper = sync_wrapper_of(func, 1 if _takes_self(func) else 0)
        return cast(F, functools.update_wrapper(wrapper, func))

    # Anything else callable (a classmethod object, a callable instance): wrapt
    # binds it as its own descriptor would, and hands each call its bound callable.
    @wrapt.decorator  # type: ignore[misc]
    def proxy_wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        return sync_wrapper_of(wrapped, 0)(*args, **kwargs)

    return cast(F, proxy_wrapper(func))


POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def own_parameters(func: Callable[..., Any]) -> list[inspect.Parameter]:
    """``func``'s parameters but ``self`` and ``cls`` (the wrapper hands the arguments
    without them); none for a callable without a signature."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p for p in parameters if p.name not in ("self", "cls")]


def _takes_self(func: Callable[..., Any]) -> bool:
    """Whether ``func``'s first parameter is a method's ``self`` or ``cls``."""
    try:
        first = next(iter(inspect.signature(func).parameters.values()), None)
    except (TypeError, ValueError):
        return False
    return first is not None and first.name in ("self", "cls") and first.kind in POSITIONAL


GENERATORS = (types.GeneratorType, types.AsyncGeneratorType)
NEVER_STREAMS = frozenset({str, bytes, list, tuple, dict, int, float, bool, type(None)})
"""Result types no hook reads as a stream: the check is skipped for them."""


def qualname(func: Callable[..., Any]) -> str:
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", "function"))


def warning_attributes(warnings: Sequence[str]) -> dict[str, AttributeValue]:
    return {
        semconv.RAG_CAPTURE_STATUS: semconv.CAPTURE_STATUS_PARTIAL,
        semconv.RAG_CAPTURE_WARNING: cap_bytes("; ".join(warnings), _MAX_WARNING_BYTES),
    }
