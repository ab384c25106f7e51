"""Sentences of an answer that talk to the user or about the sources, not about the world.

"Sure!", "I hope this helps.", "(Passage 2)", "The passages do not say when it
opened." state no fact a context could support or contradict: a chat model wraps
its answer in them, and judging them as claims only adds false alarms. They are
recognised by their form (pleasantries, first and second person offers of help,
source references, statements that the sources are silent), never by topic.
"""

from __future__ import annotations

import re

__all__ = ["is_meta"]

_PLEASANTRY = re.compile(
    r"^(?:sure|certainly|of course|absolutely|okay|ok|great|hello|hi|yes|no problem|"
    r"great question|good question|thank you|thanks)\b[\w\s,']{0,20}[!.:]?$",
    re.IGNORECASE,
)
_OFFER = re.compile(
    r"\b(?:i hope (?:this|that|it)|hope (?:this|that) helps|let me know|feel free|"
    r"happy to help|glad to help|i can help|help you with (?:that|this)|i'?d be happy|"
    r"i would be happy|is there anything else|"
    r"if you have any (?:other|more|further) questions?)\b",
    re.IGNORECASE,
)
_SOURCE_REFERENCE = re.compile(
    r"^\(?(?:passage|context|document|source|question|reference)s?\s*\d+\)?[.:]?$",
    re.IGNORECASE,
)
_SOURCES = r"(?:passages?|contexts?|documents?|sources?|texts?|articles?|data|records?)"
# "The passages do not mention ...", "unable to answer ... based on the passages".
_SILENT_SOURCES = re.compile(
    r"\b(?:(?:unable|not able|impossible|not possible|cannot|can ?not|can't) to? ?"
    r"(?:answer|determine|say for certain|tell)|"
    r"(?:no|not enough|insufficient) (?:additional |further |specific |other )?"
    r"(?:information|details?|mention)|"
    rf"{_SOURCES}\b[^.]{{0,40}}\b(?:do(?:es)? not|don't|doesn't|did not|fail to) "
    r"(?:mention|provide|specify|say|state|include|contain|give|discuss|address))",
    re.IGNORECASE,
)


def is_meta(text: str) -> bool:
    """Whether the sentence talks about the conversation or its sources, not the world."""
    stripped = text.strip()
    if _PLEASANTRY.match(stripped) or _SOURCE_REFERENCE.match(stripped):
        return True
    return bool(_OFFER.search(stripped) or _SILENT_SOURCES.search(stripped))
