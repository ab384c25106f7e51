"""An agent's conversation (OpenAI chat ``messages``) read as one record to evaluate.

A ``ragpulse eval`` line may carry ``messages`` instead of ``contexts``: the chat
history in the OpenAI Chat Completions format, with ``system``/``developer``,
``user``, ``assistant`` (its ``tool_calls``) and ``tool`` (its ``tool_call_id``)
roles. From it:

- the question is the latest user turn;
- the answer is the line's ``answer``, else the last assistant message without tool
  calls (intermediate text beside a tool call, "Let me look that up", is not judged);
- the contexts are the tool results, the most recent first, each with its tool's name
  (from the assistant's call of the same id, else the message's ``name``) and its call
  id, bounded in number (``MAX_TOOL_RESULTS``) and characters (``MAX_EVIDENCE_CHARS``);
  results of earlier turns count too: a later answer may rest on what they fetched;
- an evidence tool's result that is empty or says it is an error (``isError``, or a
  JSON object with an ``error`` and no result) names the tool in ``failed_tools``;
- acting tools (``ToolPolicy``: the ``action_tools`` globs) are read but are no evidence.

Reading is one pass over the list, so a history of thousands of turns costs its length,
never more; what is wrong is a ``ValueError`` naming the message and the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragpulse.adapters._tools import DEFAULT_POLICY
from ragpulse.capture._roles import EvidenceRule
from ragpulse.evaluation.types import Context

__all__ = [
    "MAX_EVIDENCE_CHARS",
    "MAX_MESSAGES",
    "MAX_TOOL_RESULTS",
    "UNNAMED_TOOL",
    "Conversation",
    "read_messages",
]

MAX_TOOL_RESULTS = 64
"""Tool results read as contexts, the most recent first; older ones are left out."""
MAX_EVIDENCE_CHARS = 1 << 20
"""Characters of tool results read as contexts, the most recent first."""
MAX_MESSAGES = 100_000
"""Messages one record may hold; more is an invalid line, not a long wait."""

UNNAMED_TOOL = "unnamed tool"
"""The tool of a result whose call names none."""
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_RESULT_KEYS = frozenset({"result", "content", "text", "data", "output", "results"})


@dataclass(frozen=True, slots=True)
class Conversation:
    """What one ``messages`` list says: the turn to evaluate and its evidence."""

    question: str | None
    answer: str | None
    contexts: tuple[Context, ...]
    """Evidence tools' results, the most recent first."""
    failed_tools: tuple[str, ...]
    tool_results: int
    """Tool messages in the history, evidence or not, read or left out."""
    omitted: int
    """Evidence tool results left out past ``MAX_TOOL_RESULTS`` or ``MAX_EVIDENCE_CHARS``."""


def _where(index: int, key: str | None = None) -> str:
    return f"messages[{index}]" + (f".{key}" if key else "")


def _content(message: Mapping[str, Any], index: int) -> str | None:
    """A message's text: a string, or the ``text`` of its content parts; ``None`` when absent."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for k, part in enumerate(content):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
                elif part.get("type") in (None, "text"):
                    raise ValueError(f"'{_where(index, f'content[{k}]')}' has no text")
                # other parts (an image, a file) carry no text to judge
            else:
                raise ValueError(f"'{_where(index, f'content[{k}]')}' must be an object")
        return "\n".join(texts)
    raise ValueError(f"'{_where(index, 'content')}' must be a string, a list of parts or null")


def _tool_calls(message: Mapping[str, Any], index: int, names: dict[str, str]) -> bool:
    """Note each call's id and function name; True when the message calls a tool."""
    calls = message.get("tool_calls")
    if calls is None:
        return False
    if not isinstance(calls, list):
        raise ValueError(f"'{_where(index, 'tool_calls')}' must be a list")
    for k, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise ValueError(f"'{_where(index, f'tool_calls[{k}]')}' must be an object")
        function = call.get("function")
        name = function.get("name") if isinstance(function, Mapping) else call.get("name")
        call_id = call.get("id")
        if isinstance(call_id, str) and isinstance(name, str):
            names[call_id] = name
    return bool(calls)


def _is_error(text: str) -> bool:
    """Whether a tool result says it failed: ``isError``, or an ``error`` and no result."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return False
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict):
        return False
    if value.get("isError") is True or value.get("is_error") is True:
        return True
    return bool(value.get("error")) and not (_RESULT_KEYS & value.keys())


def _holds_nothing(text: str | None) -> bool:
    return text is None or text.strip().lower() in ("", "null", "none", "[]", "{}", '""')


def read_messages(
    messages: object, roles: EvidenceRule | None = None, *, answer: str | None = None
) -> Conversation:
    """Read a ``messages`` list; raises ``ValueError`` saying which message is wrong.

    ``answer``: the record's own answer, which wins over the messages'.
    """
    if not isinstance(messages, list):
        raise ValueError("'messages' must be a list of chat messages")
    if len(messages) > MAX_MESSAGES:
        raise ValueError(f"'messages' has more than {MAX_MESSAGES} messages")
    roles = roles or DEFAULT_POLICY
    names: dict[str, str] = {}
    question: str | None = None
    final: str | None = None
    turn = -1  # the latest user turn: tools that failed after it failed this answer
    # (position, tool, call id, text) of each tool message, in order.
    results: list[tuple[int, str | None, str | None, str | None]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"'{_where(index)}' must be an object")
        role = message.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            raise ValueError(
                f"'{_where(index, 'role')}' must be one of {', '.join(sorted(_ROLES))}"
                f" (got {role!r:.40})"
            )
        text = _content(message, index)
        if role == "user":
            question = text
            turn = index
        elif role == "assistant":
            if not _tool_calls(message, index, names) and text is not None and text.strip():
                final = text
        elif role in ("tool", "function"):
            call_id = message.get("tool_call_id")
            if call_id is not None and not isinstance(call_id, str):
                raise ValueError(f"'{_where(index, 'tool_call_id')}' must be a string")
            name = message.get("name")
            results.append((index, name if isinstance(name, str) else None, call_id, text))
    contexts: list[Context] = []
    failed: list[str] = []
    budget = MAX_EVIDENCE_CHARS
    omitted = 0
    for position, name, call_id, text in reversed(results):
        tool = names.get(call_id, name) if call_id is not None else name
        if tool is not None and not roles.is_evidence(tool):
            continue
        if _holds_nothing(text) or _is_error(text or ""):
            # An earlier turn's failure is that turn's: this answer had other chances.
            label = tool or UNNAMED_TOOL
            if position > turn and label not in failed:
                failed.append(label)
            continue
        assert text is not None
        if len(contexts) >= MAX_TOOL_RESULTS or len(text) > budget:
            omitted += 1
            continue
        budget -= len(text)
        contexts.append(Context(text, call_id, tool=tool or UNNAMED_TOOL))
    return Conversation(
        question=question,
        answer=answer if answer is not None else final,
        contexts=tuple(contexts),
        failed_tools=tuple(failed),
        tool_results=len(results),
        omitted=omitted,
    )
