"""An agent's trace: which answer is the unit, what counts as evidence, which turn is asked.

- **The answers** are the agent's final ones to the user (``final_calls``): the output of
  an LLM call that asked for no tool (an output that calls tools is a step, and text beside
  the calls, "Let me look that up", is not judged), not made inside a tool (a nested agent
  answering its caller, not the user). The last such call of a trace gives its last answer;
  an earlier one is a final answer too when the conversation went on from it: a later call
  of the trace was given its text as the assistant's turn, with a user turn after it. Each
  final answer is one unit; several model calls, parallel tool calls and handoffs within a
  turn give one.
- **The evidence** is every evidence tool's result in the trace (its span, and the message
  that handed it to the model: the same text counted once), then the results the
  conversation history carries from earlier turns, most recent first, within
  ``MAX_HISTORY_RESULTS`` and ``MAX_HISTORY_CHARS``.
- **The question** is the latest user turn. A follow-up that leans on an earlier turn
  ("And with the fast charger?") is judged with the previous user turn in front of it
  (``resolve_question``), within ``MAX_RESOLVED_CHARS``.
- **The conversation** is ``gen_ai.conversation.id`` or OpenInference's ``session.id``, on
  the root or any span read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ragpulse import semconv
from ragpulse.adapters._common import as_id, attributes_of
from ragpulse.adapters._messages import Turn

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "MAX_HISTORY_CHARS",
    "MAX_HISTORY_RESULTS",
    "MAX_RESOLVED_CHARS",
    "conversation_id",
    "final_calls",
    "is_follow_up",
    "latest_user",
    "nested_in",
    "resolve_question",
]

MAX_HISTORY_RESULTS = 16
"""Tool results of earlier turns taken as evidence for a later one, the most recent first."""
MAX_HISTORY_CHARS = 64 * 1024
"""Characters of those results together (the document bound of one span)."""
MAX_RESOLVED_CHARS = 1000
"""Characters of the earlier user turn put in front of a follow-up question."""
# A follow-up names too little to be read alone: few content words, or it opens by
# continuing ("and", "what about") or points back ("it", "that").
_FOLLOW_UP_WORDS = 2
# A turn this long carries its own context (a prompt with passages pasted in).
_MAX_FOLLOW_UP_CHARS = 300
_WORD = re.compile(r"\w+")
_OPENERS = ("and", "but", "or", "also", "so", "then", "what about", "how about")
_POINTERS = frozenset(
    [
        "it",
        "its",
        "it's",
        "that",
        "those",
        "these",
        "this",
        "they",
        "them",
        "their",
        "there",
        "he",
        "she",
        "his",
        "her",
        "one",
        "ones",
    ]
)
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "do",
        "does",
        "did",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "when",
        "where",
        "why",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "about",
        "also",
        "so",
        "then",
        "i",
        "you",
        "we",
        "me",
        "my",
        "your",
        "our",
        "us",
        "please",
        "tell",
        "have",
        "has",
        "had",
    ]
)
_USER = frozenset({"user", "human"})
_ASSISTANT = frozenset({"assistant", "ai", "model"})


def latest_user(turns: Sequence[Turn]) -> int | None:
    """Index of the latest user turn with text; ``None`` when there is none."""
    for index in range(len(turns) - 1, -1, -1):
        turn = turns[index]
        if turn.role in _USER and turn.text is not None:
            return index
    return None


def is_follow_up(question: str) -> bool:
    """Whether ``question`` leans on an earlier turn to be understood."""
    lowered = question.strip().lower()
    if len(lowered) > _MAX_FOLLOW_UP_CHARS:
        return False
    words = _WORD.findall(lowered)
    if not words:
        return False
    if lowered.startswith(_OPENERS) and (
        len(lowered) == len(words[0]) or not lowered[len(words[0])].isalnum()
    ):
        return True
    if any(word in _POINTERS for word in words):
        return True
    return sum(1 for word in words if word not in _STOPWORDS) < _FOLLOW_UP_WORDS


def resolve_question(turns: Sequence[Turn], latest: int) -> str | None:
    """The user turn at ``latest``, with the previous user turn in front of it when it is a
    follow-up (``is_follow_up``); the earlier turn is cut to ``MAX_RESOLVED_CHARS``."""
    question = turns[latest].text
    if question is None or not is_follow_up(question):
        return question
    for index in range(latest - 1, -1, -1):
        turn = turns[index]
        if turn.role in _USER and turn.text is not None:
            earlier = turn.text.strip()
            if len(earlier) > MAX_RESOLVED_CHARS:
                earlier = earlier[-MAX_RESOLVED_CHARS:]
            return f"{earlier}\n{question.strip()}"
    return question


def conversation_id(spans: Sequence[ReadableSpan]) -> str | None:
    """``gen_ai.conversation.id`` or ``session.id`` of the first span (root first) with one."""
    for span in spans:
        attributes = attributes_of(span)
        for key in (semconv.GEN_AI_CONVERSATION_ID, semconv.OI_SESSION_ID):
            found = as_id(attributes.get(key))
            if found is not None and found.strip():
                return found
    return None


def nested_in(span: ReadableSpan, tools: Sequence[ReadableSpan]) -> bool:
    """Whether ``span`` ran inside one of the tool spans ``tools`` (a nested agent's call):
    a descendant by parent id, or within a tool span's time in the same trace."""
    parent = span.parent.span_id if span.parent is not None else None
    start, end = span.start_time or 0, span.end_time or 0
    for tool in tools:
        context = tool.context
        if context is None:
            continue
        if parent == context.span_id:
            return True
        tool_start, tool_end = tool.start_time or 0, tool.end_time or 0
        if tool_end and tool_start <= start and end <= tool_end and tool is not span:
            return True
    return False


def final_calls(
    llm_spans: Sequence[ReadableSpan],
    steps: Callable[[ReadableSpan], bool],
    tool_spans: Sequence[ReadableSpan],
    output_of: Callable[[ReadableSpan], str | None],
    turns_of: Callable[[ReadableSpan], Sequence[Turn]],
) -> list[ReadableSpan]:
    """The LLM calls whose outputs are final answers to the user, in the order they ended.

    A candidate is a call that asked for no tool (``steps`` says which did) and did not run
    inside one of ``tool_spans``. The last candidate to end gives the trace's last answer. An
    earlier candidate gives a final answer too when a later call (not inside a tool) was
    given its output as an assistant turn followed by a user turn: the user read it and
    asked again. A call that only rewrote the question, or a nested agent's answer handed
    back as a tool result, never appears so and stays out. Inputs are read (``turns_of``)
    only when there is more than one candidate.
    """
    ordered = sorted(llm_spans, key=lambda span: span.end_time or span.start_time or 0)
    callers = [span for span in ordered if not (tool_spans and nested_in(span, tool_spans))]
    candidates = [span for span in callers if not steps(span)]
    if len(candidates) <= 1:
        return candidates
    last = candidates[-1]
    earlier = {id(span) for span in candidates[:-1]}
    finals: list[ReadableSpan] = [last]
    # Walking back from the end, ``answered`` holds what the calls ending later were given
    # as answers the user replied to: one pass, each input read once.
    answered: set[str] = set()
    for span in reversed(callers):
        if id(span) in earlier:
            output = output_of(span)
            if output is not None and _normal(output) in answered:
                finals.append(span)
        answered |= replied_answers(turns_of(span))
    finals.reverse()
    return finals


def replied_answers(turns: Sequence[Turn]) -> set[str]:
    """The assistant turns without tool calls that a user turn follows, as normalised text:
    answers given to the user, who then asked again."""
    found: set[str] = set()
    replied = False
    for turn in reversed(turns):
        if turn.role in _USER and turn.text is not None:
            replied = True
        elif replied and turn.role in _ASSISTANT and not turn.calls and turn.text:
            found.add(_normal(turn.text))
    return found


def _normal(value: str) -> str:
    """``value`` with its whitespace runs as single spaces: the same answer whether read
    from the call's output or from the history a later call was given."""
    return " ".join(value.split())
