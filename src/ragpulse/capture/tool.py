"""``@tool``: an agent's tool call as a GenAI ``execute_tool`` span whose result is evidence.

The tool's result (text, a dict or JSON-like structure, an MCP ``CallToolResult``, a
stream of chunks) is read once, in bounded size, and becomes a context of the
enclosing ``@rag`` unit, with the tool's name and call id, and the tool's span as its
source (where its per-document scores go). An acting tool (``evidence=False``, or a
name matching the ``action_tools`` globs: a calculator, a booking) is traced the same
way, but its result is not evidence. An evidence tool that raises, returns an error
result or returns nothing is named in the record's ``failed_tools``: an answer given
after it is diagnosed ``tool_failure``.

The call's arguments, bound to the parameters' names (a method's ``self`` or ``cls`` left
out), are written as JSON under the content policy like any captured text: GenAI's
``gen_ai.tool.call.arguments``, OpenInference's ``input.value`` (``input.mime_type``
``application/json``), whichever conventions capture writes. A value without a JSON form
is written as its ``repr()``; one that cannot be read at all leaves the arguments out with
a capture warning.

As with every ragpulse decorator, the function behaves exactly as undecorated: its
result and exceptions pass through unchanged (the span records the exception as the
SDK does), and a failure of ours is logged and recorded on the span, never raised.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Mapping
from typing import Any, overload

from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ragpulse import semconv
from ragpulse.capture._content import ContentPolicy
from ragpulse.capture._instrument import (
    GENERATORS,
    NEVER_STREAMS,
    POSITIONAL,
    ArgPicker,
    ArgSpec,
    Call,
    F,
    Hooks,
    ResultSpec,
    from_result,
    instrument,
    own_parameters,
    warning_attributes,
)
from ragpulse.capture._record import current_record
from ragpulse.capture._roles import get_tool_roles
from ragpulse.capture._shield import log_failure, swallow
from ragpulse.capture._text import (
    CUT_MARKER,
    MAX_STRUCTURE_CHARS,
    ToText,
    UnreadableError,
    chunk_text,
    is_one_shot,
    to_json,
    to_text,
)

__all__ = ["tool"]

_CALL_ID_NAMES = ("tool_call_id", "call_id")
_RESULT_KEYS = (semconv.GEN_AI_TOOL_CALL_RESULT,)
_RESULT_KEYS_OI = (semconv.OI_OUTPUT_VALUE,)
_RESULT_KEYS_BOTH = (semconv.GEN_AI_TOOL_CALL_RESULT, semconv.OI_OUTPUT_VALUE)
_ARGUMENTS_KEYS = (semconv.GEN_AI_TOOL_CALL_ARGUMENTS,)
_ARGUMENTS_KEYS_OI = (semconv.OI_INPUT_VALUE,)
_ARGUMENTS_KEYS_BOTH = (semconv.GEN_AI_TOOL_CALL_ARGUMENTS, semconv.OI_INPUT_VALUE)
_EXTRA_ARGUMENTS = "args"
"""Where positional arguments past the parameters go (a call the function will refuse, or a
callable without a signature)."""
_ERROR_FLAGS = ("isError", "is_error")
"""Keys (or attributes) by which a tool result says it is an error: MCP's ``isError``."""
_NOTHING = frozenset({"", "null", "none", "[]", "{}", '""'})
"""Texts of a result that holds nothing, once stripped and lower-cased."""


class _ToolCall:
    """What one tool call keeps between its start and its end."""

    __slots__ = ("call_id", "cut", "evidence", "outcome", "size", "text")

    def __init__(self, evidence: bool, call_id: str | None) -> None:
        self.evidence = evidence
        self.call_id = call_id
        self.outcome: str | None = None
        """``ok``, ``error`` or ``empty`` once the result is read; ``None``: the call raised."""
        self.text: str | None = None
        self.size = 0
        """Characters of streamed chunks kept."""
        self.cut = False
        """The streamed result was longer than what is read of one value."""


def _is_error_result(value: Any) -> bool:
    """Whether ``value`` says it is an error (MCP's ``isError``), read without surprises."""
    if isinstance(value, Mapping):
        return any(value.get(flag) is True for flag in _ERROR_FLAGS)
    if isinstance(value, (str, bytes, list, tuple)):
        return False
    return any(getattr(value, flag, None) is True for flag in _ERROR_FLAGS)


def _content_of(value: Any) -> Any:
    """The part of a result that holds its text: an MCP result's ``content`` list (of text
    parts), else the value itself."""
    if isinstance(value, Mapping):
        content = value.get("content")
        return content if isinstance(content, list) else value
    if isinstance(value, (str, bytes, list, tuple)):
        return value
    content = getattr(value, "content", None)
    return content if isinstance(content, list) else value


def _holds_nothing(text: str | None) -> bool:
    return text is None or text.strip().lower() in _NOTHING


def _call_id(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


_MIN_READ_CHARS = 1024
"""Characters of arguments read at least, whatever ``max_text_bytes`` (the length and hash
exported without content are of what was read)."""


class _ArgumentNames:
    """Binds a call's arguments to the function's parameter names, worked out once.

    Positional arguments take their parameters' names, in order; those a ``*args`` takes
    are one list under its name; keyword arguments (a ``**kwargs``' too) keep theirs. Only
    what the call passed is bound: defaults are the function's, not the call's. A method's
    ``self`` or ``cls`` is not among the names (the wrapper hands the arguments without it).
    """

    __slots__ = ("_positional", "_rest")

    def __init__(self, func: Callable[..., Any]) -> None:
        # A classmethod or staticmethod object is not callable itself: its function is.
        func = getattr(func, "__func__", func)
        params = own_parameters(func)
        self._positional = tuple(p.name for p in params if p.kind in POSITIONAL)
        rest = [p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL]
        self._rest = rest[0] if rest else _EXTRA_ARGUMENTS

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], limit: int) -> dict[str, Any]:
        """The arguments by name, at most ``limit`` keyword arguments and ``limit`` extra
        positional ones: more than can be written are not copied (the walk marks the cut)."""
        names = self._positional
        bound: dict[str, Any] = dict(zip(names, args, strict=False))
        if len(args) > len(names):
            bound[self._rest] = list(args[len(names) : len(names) + limit])
        bound.update(kwargs if len(kwargs) <= limit else itertools.islice(kwargs.items(), limit))
        return bound


class _ToolHooks(Hooks):
    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None,
        evidence: bool | None,
        call_id_arg: ArgSpec,
        result_from: ResultSpec,
        to_text_fn: ToText | None,
    ) -> None:
        self.name = name or str(getattr(func, "__name__", None) or "tool")
        self.span_name = f"{semconv.GEN_AI_OPERATION_EXECUTE_TOOL} {self.name}"
        self._evidence = evidence
        picker = ArgPicker(func, call_id_arg, _CALL_ID_NAMES, first_text=False)
        self._call_id = None if picker.finds_nothing else picker
        self._result_from = result_from
        self._to_text = to_text_fn
        self._arguments = _ArgumentNames(func)
        attributes: dict[str, AttributeValue] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: self.name,
            semconv.GEN_AI_TOOL_TYPE: semconv.GEN_AI_TOOL_TYPE_FUNCTION,
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OI_KIND_TOOL,
        }
        self._start_attributes = attributes
        self._start_attributes_oi = attributes | {semconv.OI_TOOL_NAME: self.name}

    def static_attributes(self, policy: ContentPolicy) -> dict[str, AttributeValue]:
        return dict(self._start_attributes_oi if policy.openinference else self._start_attributes)

    def start(
        self, call: Call, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, AttributeValue]:
        call.builder = current_record.get()
        attributes = self.static_attributes(call.policy)
        # Read per call: configure() may set the roles after the function was decorated.
        evidence = (
            self._evidence
            if self._evidence is not None
            else get_tool_roles().is_evidence(self.name)
        )
        call_id = _call_id(self._call_id.pick(args, kwargs)) if self._call_id else None
        call.state = _ToolCall(evidence, call_id)
        attributes[semconv.RAG_TOOL_EVIDENCE] = evidence
        if call_id is not None:
            attributes[semconv.GEN_AI_TOOL_CALL_ID] = call_id
        self._write_arguments(call, attributes, args, kwargs)
        return attributes

    def _write_arguments(
        self,
        call: Call,
        attributes: dict[str, AttributeValue],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> None:
        """The call's arguments as JSON, under the content policy; a failure to read them
        costs only them (a capture warning on the span), never the call or its span."""
        try:
            # Read no more than can leave: the text is cut to the bound anyway, and each
            # argument takes at least two of its characters.
            chars = max(call.policy.max_text_bytes, _MIN_READ_CHARS)
            bound = self._arguments.bind(args, kwargs, chars // 2 + 2)
            text = to_json(bound, chars)
        except BaseException as exc:
            swallow(exc)
            log_failure("a tool's arguments", exc)
            reason = (
                f"{exc.kind}: {exc.error}"
                if isinstance(exc, UnreadableError)
                else type(exc).__name__
            )
            attributes.update(warning_attributes([f"tool arguments unreadable ({reason})"]))
            return
        policy = call.policy
        if policy.openinference:
            keys = _ARGUMENTS_KEYS_BOTH if policy.genai else _ARGUMENTS_KEYS_OI
            if policy.capture_content:
                attributes[semconv.OI_INPUT_MIME_TYPE] = semconv.OI_MIME_JSON
        else:
            keys = _ARGUMENTS_KEYS
        policy.put_text(attributes, keys, text, call)

    def is_stream(self, call: Call, result: Any) -> bool:
        # A one-shot iterator is handed back wrapped and read as the caller consumes it:
        # reading it here would leave the caller nothing.
        return (
            self._result_from is None
            and type(result) not in NEVER_STREAMS
            and (isinstance(result, GENERATORS) or is_one_shot(result))
        )

    def collect(self, call: Call, item: Any) -> None:
        state: _ToolCall = call.state
        if state.cut:
            return
        try:
            text = chunk_text(item)
        except UnreadableError as exc:
            text = f"[unreadable {exc.kind}: {exc.error}]"
        if state.size + len(text) > MAX_STRUCTURE_CHARS:
            text = text[: max(MAX_STRUCTURE_CHARS - state.size, 0)] + CUT_MARKER
            state.cut = True
        state.size += len(text)
        call.add_chunk(text)

    def streamed(self, span: Span, call: Call, error: BaseException | None) -> None:
        state: _ToolCall = call.state
        if error is not None:
            state.outcome = semconv.TOOL_OUTCOME_ERROR
            return
        self._write(call, call.streamed_text())

    def finish(self, span: Span, call: Call, result: Any) -> None:
        state: _ToolCall = call.state
        value = result if self._result_from is None else from_result(result, self._result_from)
        failed = _is_error_result(value)
        try:
            if self._to_text is not None:
                text = to_text(self._to_text(value))
            elif type(value) is str:
                # Read no further than the record holds: a longer result is not judged.
                text = (
                    value if value.isascii() else to_text(value, call.policy.max_record_chars + 1)
                )
            else:
                text = to_text(_content_of(value))
        except UnreadableError as exc:
            warning = f"tool result unreadable ({exc.kind}: {exc.error})"
            call.pending.update(warning_attributes([warning]))
            state.outcome = semconv.TOOL_OUTCOME_ERROR if failed else semconv.TOOL_OUTCOME_OK
            if call.builder is not None and state.evidence:
                call.builder.warn(warning)
            return
        self._write(call, text, failed=failed)

    def _write(self, call: Call, text: str | None, *, failed: bool = False) -> None:
        state: _ToolCall = call.state
        state.text = text
        if failed:
            state.outcome = semconv.TOOL_OUTCOME_ERROR
        elif _holds_nothing(text):
            state.outcome = semconv.TOOL_OUTCOME_EMPTY
        else:
            state.outcome = semconv.TOOL_OUTCOME_OK
        policy = call.policy
        keys: tuple[str, ...]
        if failed:
            # The conventions keep gen_ai.tool.call.result for a call that succeeded; a
            # failed one says so with error.type (OpenInference's output.value still shows
            # what it returned).
            call.pending[semconv.ERROR_TYPE] = semconv.TOOL_ERROR_RESULT
            keys = _RESULT_KEYS_OI if policy.openinference else ()
        elif policy.openinference:
            keys = _RESULT_KEYS_BOTH if policy.genai else _RESULT_KEYS_OI
        else:
            keys = _RESULT_KEYS
        if keys:
            policy.put_text(call.pending, keys, text, call)

    def before_end(self, span: Span, call: Call) -> None:
        state: _ToolCall | None = call.state
        if state is None:  # start() failed: nothing known of this call
            return
        if state.outcome is None:  # the function raised (recorded on the span already)
            state.outcome = semconv.TOOL_OUTCOME_ERROR
        elif call.pending.get(semconv.ERROR_TYPE) == semconv.TOOL_ERROR_RESULT:
            span.set_status(Status(StatusCode.ERROR, "the tool returned an error result"))
        call.pending[semconv.RAG_TOOL_OUTCOME] = state.outcome
        builder = call.builder
        if builder is None:
            return
        if not state.evidence:
            builder.add_tool_call(self.name, failed=False)
        elif state.outcome == semconv.TOOL_OUTCOME_OK and state.text is not None:
            builder.add_tool_result(
                self.name, state.call_id, state.text, span.get_span_context().span_id
            )
            if state.cut:
                builder.too_large = True
        elif state.outcome == semconv.TOOL_OUTCOME_OK:
            # Its result could not be read: the request is not judged without it.
            builder.add_tool_call(self.name, failed=False, unreadable=True)
        else:
            builder.add_tool_call(self.name, failed=True)


@overload
def tool(func: F, /) -> F: ...
@overload
def tool(
    *,
    name: str | None = None,
    evidence: bool | None = None,
    call_id_arg: ArgSpec = None,
    result_from: ResultSpec = None,
    to_text: ToText | None = None,
) -> Callable[[F], F]: ...
def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    evidence: bool | None = None,
    call_id_arg: ArgSpec = None,
    result_from: ResultSpec = None,
    to_text: ToText | None = None,
) -> F | Callable[[F], F]:
    """Mark an agent's tool: each call is an ``execute_tool`` span, its result evidence.

    The tool's name is ``name``, else the function's name. Its result (text, a dict
    or list, read as JSON, an MCP ``CallToolResult``, or a stream of chunks joined when
    it ends) becomes a context of the enclosing ``@rag`` request, with the tool's name
    and its call id: the argument named by ``call_id_arg`` (a name or a callable taking
    the call's arguments), else a parameter called ``tool_call_id`` or ``call_id``.
    ``result_from`` picks the result's text out of a richer value (a key, an attribute
    name or a callable); ``to_text`` reads a type ragpulse does not know.

    ``evidence=False`` marks an acting tool (a calculator, a booking): traced, but its
    result is not evidence. Left ``None``, the ``action_tools`` and ``evidence_tools``
    settings decide by name (by default every tool is evidence). An evidence tool that
    raises, returns an error result (``isError``) or returns nothing is recorded in
    the request's ``failed_tools``: its answer is diagnosed ``tool_failure``.
    """

    def decorate(f: F) -> F:
        return instrument(f, _ToolHooks(f, name, evidence, call_id_arg, result_from, to_text))

    return decorate(func) if func is not None else decorate
