"""The tool results a model was given, as evidence: this turn's, and the conversation's.

One reading for every way a conversation reaches ragpulse: an instrumented agent's LLM span
(``_read``) and ragpulse's own ``@generation`` given its ``messages`` (``capture``). The
results after the latest user turn are this turn's: all of them are evidence, and a failed
one names its tool as failed. The results before it are the history's: evidence for a
follow-up, most recent first, within ``MAX_HISTORY_RESULTS`` and ``MAX_HISTORY_CHARS``; a
failed one is only skipped (that turn was answered already). Nothing here raises.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ragpulse.adapters._agent import MAX_HISTORY_CHARS, MAX_HISTORY_RESULTS
from ragpulse.adapters._common import Issues
from ragpulse.adapters._messages import Turn
from ragpulse.adapters._tools import result_passages

__all__ = ["GivenEvidence", "GivenResult", "given_results"]


@dataclass(frozen=True, slots=True)
class GivenResult:
    """One passage of a tool result the model was given."""

    passage: str
    call_id: str | None
    name: str | None
    position: int
    """The index of the message that carried it, in the model's input."""
    history: bool
    """It came from an earlier turn of the conversation."""


@dataclass(slots=True)
class GivenEvidence:
    """What ``given_results`` found: the passages in order, and this turn's failed tools."""

    results: list[GivenResult] = field(default_factory=list)
    failed: list[str | None] = field(default_factory=list)


def given_results(
    turns: Sequence[Turn],
    latest: int | None,
    is_evidence: Callable[[str | None], bool],
    issues: Issues,
    *,
    names: Mapping[str, str] | None = None,
    known: Collection[str] = (),
) -> GivenEvidence:
    """The tool results in ``turns`` (a model's input; ``latest``: the index of its latest
    user turn) that are evidence: this turn's all, in order, then the history's, most recent
    first, within the history bounds.

    ``is_evidence`` says by name which tools fetch evidence; ``names`` gives tool names by
    call id where the messages give only the id (the trace's tool spans); ``known`` holds
    passages the caller has already, which cost the history bound nothing.
    """
    found = GivenEvidence()
    called: dict[str, str | None] = {}
    for turn in turns:
        for call_id, name in turn.calls:
            if call_id is not None:
                called[call_id] = name
    names = names or {}
    start = 0 if latest is None else latest + 1
    for position in range(start, len(turns)):
        turn = turns[position]
        if turn.is_tool_result:
            _read_turn(turn, position, found, called, names, is_evidence, issues, history=False)
    history = [i for i in range(start - 1, -1, -1) if turns[i].is_tool_result]
    seen = set(known)
    seen.update(result.passage for result in found.results)
    chars = 0
    for taken, position in enumerate(history):
        if taken >= MAX_HISTORY_RESULTS or chars >= MAX_HISTORY_CHARS:
            issues.append(
                f"history: {len(history) - taken} earlier tool results past the history bounds"
            )
            break
        before = len(found.results)
        _read_turn(
            turns[position], position, found, called, names, is_evidence, issues, history=True
        )
        for result in found.results[before:]:
            if result.passage not in seen:
                seen.add(result.passage)
                chars += len(result.passage)
    return found


def _read_turn(
    turn: Turn,
    position: int,
    found: GivenEvidence,
    called: Mapping[str, str | None],
    names: Mapping[str, str],
    is_evidence: Callable[[str | None], bool],
    issues: Issues,
    *,
    history: bool,
) -> None:
    call_id = turn.call_id
    name = turn.name
    if name is None and call_id is not None:
        name = called.get(call_id) or names.get(call_id)
    if call_id is not None and call_id not in called and call_id not in names:
        # Still what the model was given: evidence, but worth a note.
        issues.append(f"tool result for call {call_id[:40]!r} that no call in the trace made")
    if not is_evidence(name):
        return
    passages, failed = result_passages(turn.result, f"tool message {position}", issues)
    if failed:
        if not history:
            found.failed.append(name)
        return
    if history:
        # An earlier turn's result may have been cut to bound the history.
        passages = tuple(passage[:MAX_HISTORY_CHARS] for passage in passages)
    for passage in passages:
        found.results.append(GivenResult(passage, call_id, name, position, history))
