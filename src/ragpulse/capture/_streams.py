"""Iterators that keep a span open until a stream is exhausted, closed or abandoned.

The wrapper hands every item to the consumer unchanged and as it comes (a lazy
or endless stream stays lazy); each item is also shown to a ``collect``
callback, whose failures are swallowed, and the span ends once, when the stream
ends. An error raised by the wrapped stream reaches the consumer unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from ragpulse.capture._record import RecordBuilder, current_record
from ragpulse.capture._shield import log_failure, swallow

T = TypeVar("T")

# Called with each item the stream produces.
Collect = Callable[[Any], None]
# Called once with (exception or None, how it ended).
OnStreamEnd = Callable[[BaseException | None, str], None]

END_EXHAUSTED = "exhausted"
END_CLOSED = "closed"
END_ABANDONED = "abandoned"
END_ERROR = "error"


class _StreamBase:
    __slots__ = ("_builder", "_collect", "_done", "_on_end", "_otel_ctx")

    def __init__(
        self,
        span: trace.Span,
        builder: RecordBuilder | None,
        collect: Collect,
        on_end: OnStreamEnd,
    ) -> None:
        self._otel_ctx = trace.set_span_in_context(span)
        self._builder = builder
        self._collect = collect
        self._done = False
        self._on_end = on_end

    def _enter(self) -> tuple[object, contextvars.Token[RecordBuilder | None] | None]:
        # Each step of the stream runs with our span current (so spans the
        # producer starts are its children) and, for @rag, with its record.
        token = otel_context.attach(self._otel_ctx)
        record_token = current_record.set(self._builder) if self._builder is not None else None
        return token, record_token

    @staticmethod
    def _exit(tokens: tuple[object, contextvars.Token[RecordBuilder | None] | None]) -> None:
        token, record_token = tokens
        if record_token is not None:
            current_record.reset(record_token)
        otel_context.detach(token)  # type: ignore[arg-type]

    def _finish(self, error: BaseException | None, how: str) -> None:
        if self._done:
            return
        self._done = True
        self._on_end(error, how)

    def _yielded(
        self, tokens: tuple[object, contextvars.Token[RecordBuilder | None] | None], chunk: object
    ) -> None:
        """The wrapped stream produced ``chunk``: restore the consumer's context, note the chunk."""
        self._exit(tokens)
        # A chunk we cannot read must not break the stream.
        try:
            self._collect(chunk)
        except BaseException as exc:
            swallow(exc)
            log_failure("a streamed item", exc)

    def _stopped(
        self,
        tokens: tuple[object, contextvars.Token[RecordBuilder | None] | None],
        exc: BaseException,
    ) -> None:
        """The wrapped stream raised: exhausted (Stop*Iteration) or failed; the span ends."""
        self._exit(tokens)
        if isinstance(exc, (StopIteration, StopAsyncIteration)):
            self._finish(None, END_EXHAUSTED)
        else:
            self._finish(exc, END_ERROR)


class TracedStream(_StreamBase, Generic[T]):
    """Wraps a sync iterator or generator; ends the span when the stream ends."""

    __slots__ = ("_iterator",)

    def __init__(
        self,
        iterator: Iterator[T],
        span: trace.Span,
        builder: RecordBuilder | None,
        collect: Collect,
        on_end: OnStreamEnd,
    ) -> None:
        super().__init__(span, builder, collect, on_end)
        self._iterator = iterator

    def __iter__(self) -> TracedStream[T]:
        return self

    def __next__(self) -> T:
        # _step written out: a recursive generator (``yield from`` a decorated one) keeps
        # this frame on the stack per level beside its own, and no more.
        if self._done:
            raise StopIteration
        tokens = self._enter()
        try:
            chunk = next(self._iterator)
        except BaseException as exc:
            self._stopped(tokens, exc)
            raise
        self._yielded(tokens, chunk)
        return chunk

    def send(self, value: Any) -> T:
        """Generator protocol: send a value into the wrapped generator."""
        return self._step(lambda: self._iterator.send(value))  # type: ignore[attr-defined,no-any-return]

    def throw(self, *args: Any) -> T:
        """Generator protocol: raise inside the wrapped generator."""
        return self._step(lambda: self._iterator.throw(*args))  # type: ignore[attr-defined,no-any-return]

    def _step(self, advance: Callable[[], T]) -> T:
        if self._done:
            raise StopIteration
        tokens = self._enter()
        try:
            chunk = advance()
        except BaseException as exc:
            self._stopped(tokens, exc)
            raise
        self._yielded(tokens, chunk)
        return chunk

    def close(self) -> None:
        """Close the stream early; the span ends now with what was produced."""
        self._close(END_CLOSED)

    def _close(self, how: str) -> None:
        if self._done:
            return
        close = getattr(self._iterator, "close", None)
        try:
            if close is not None:
                tokens = self._enter()
                try:
                    close()
                finally:
                    self._exit(tokens)
        finally:
            self._finish(None, how)

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            with contextlib.suppress(BaseException):
                self._close(END_ABANDONED)
            self._done = True


class TracedAsyncStream(_StreamBase, Generic[T]):
    """Wraps an async iterator or async generator; ends the span when the stream ends."""

    __slots__ = ("_iterator",)

    def __init__(
        self,
        iterator: AsyncIterator[T],
        span: trace.Span,
        builder: RecordBuilder | None,
        collect: Collect,
        on_end: OnStreamEnd,
    ) -> None:
        super().__init__(span, builder, collect, on_end)
        self._iterator = iterator

    def __aiter__(self) -> TracedAsyncStream[T]:
        return self

    async def __anext__(self) -> T:
        # _step written out, as TracedStream.__next__ is, for the same reason.
        if self._done:
            raise StopAsyncIteration
        tokens = self._enter()
        try:
            chunk = await self._iterator.__anext__()
        except BaseException as exc:
            self._stopped(tokens, exc)
            raise
        self._yielded(tokens, chunk)
        return chunk

    async def asend(self, value: Any) -> T:
        """Async generator protocol: send a value into the wrapped generator."""
        return await self._step("asend", (value,))

    async def athrow(self, *args: Any) -> T:
        """Async generator protocol: raise inside the wrapped generator."""
        return await self._step("athrow", args)

    async def _step(self, method: str | None, args: tuple[Any, ...] | None) -> T:
        if self._done:
            raise StopAsyncIteration
        tokens = self._enter()
        try:
            if method is None:
                chunk = await self._iterator.__anext__()
            else:
                chunk = await getattr(self._iterator, method)(*(args or ()))
        except BaseException as exc:
            self._stopped(tokens, exc)
            raise
        self._yielded(tokens, chunk)
        return chunk

    async def aclose(self) -> None:
        """Close the stream early; the span ends now with what was produced."""
        if self._done:
            return
        aclose = getattr(self._iterator, "aclose", None)
        try:
            if aclose is not None:
                tokens = self._enter()
                try:
                    await aclose()
                finally:
                    self._exit(tokens)
        finally:
            self._finish(None, END_CLOSED)

    def __del__(self) -> None:
        # Cannot await here; the event loop's async-generator hooks finalise the
        # wrapped generator. The span must still end so it is not lost.
        if not getattr(self, "_done", True):
            with contextlib.suppress(BaseException):
                self._finish(None, END_ABANDONED)
