"""Where a conversation's history came from: ``SeenResults``, the tool results ragpulse saw.

A chat history is what the client sent: any client that sends its own history can write a
``role = tool`` message saying whatever it likes, and an answer that repeats it would read
as grounded. A tool result in the history is *vouched for* when ragpulse saw it leave a
tool: as a tool span's result, or as a result handed to the model for a call the model made
in a trace ragpulse read (an LLM span whose output asked for that call id), in this trace or
an earlier trace of the same conversation. ``SeenResults`` remembers those results by a
digest of their text (whitespace runs as one space), per conversation, within
``MAX_CONVERSATIONS`` conversations and ``MAX_RESULTS_PER_CONVERSATION`` results each, the
least recently used forgotten first.

A history result nobody vouches for is still a context (the judge sees what the model saw),
but the record names it (``ragpulse.adapter.history_unvouched``): a claim whose only
evidence it is counts as not found (``ragpulse.evaluation.provenance``), unless the
application says its history is trusted (``trust_history``).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable

__all__ = [
    "MAX_CONVERSATIONS",
    "MAX_RESULTS_PER_CONVERSATION",
    "SeenResults",
    "result_digest",
]

MAX_CONVERSATIONS = 1024
"""Conversations whose tool results are remembered, the least recently used forgotten."""
MAX_RESULTS_PER_CONVERSATION = 64
"""Tool results remembered per conversation, the least recently seen forgotten: four times
the history results a turn takes as evidence (``MAX_HISTORY_RESULTS``)."""

Digest = bytes


def result_digest(passage: str) -> Digest:
    """The digest a tool result is remembered by: its text with whitespace runs as one space,
    so a result re-serialised between its span and the next request's history still matches."""
    normal = " ".join(passage.split())
    return hashlib.blake2b(normal.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class SeenResults:
    """Digests of the tool results seen per conversation, bounded in conversations and in
    results per conversation. Thread-safe: the processor's reader and serve's loop each
    have one, and nothing else calls it while they do."""

    def __init__(
        self,
        *,
        max_conversations: int = MAX_CONVERSATIONS,
        max_results: int = MAX_RESULTS_PER_CONVERSATION,
    ) -> None:
        if max_conversations < 1 or max_results < 1:
            raise ValueError("SeenResults bounds must be at least 1")
        self.max_conversations = max_conversations
        self.max_results = max_results
        self._seen: OrderedDict[str | None, OrderedDict[Digest, None]] = OrderedDict()
        self._forgotten = 0
        self._lock = threading.Lock()

    def note(self, conversation: str | None, digests: Iterable[Digest]) -> None:
        """Remember ``digests`` as seen in ``conversation`` (``None``: traces without one)."""
        with self._lock:
            results = self._seen.get(conversation)
            if results is None:
                if len(self._seen) >= self.max_conversations:
                    _, dropped = self._seen.popitem(last=False)
                    self._forgotten += len(dropped)
                results = self._seen[conversation] = OrderedDict()
            else:
                self._seen.move_to_end(conversation)
            for digest in digests:
                results[digest] = None
                results.move_to_end(digest)
                if len(results) > self.max_results:
                    results.popitem(last=False)
                    self._forgotten += 1

    def vouches(self, conversation: str | None, digest: Digest) -> bool:
        """Whether a tool result with ``digest`` was seen in ``conversation``."""
        with self._lock:
            results = self._seen.get(conversation)
            return results is not None and digest in results

    @property
    def conversations(self) -> int:
        """Conversations remembered now."""
        return len(self._seen)

    @property
    def forgotten(self) -> int:
        """Results forgotten so far to the bounds."""
        return self._forgotten
