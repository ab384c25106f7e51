"""Sentences of an answer that talk to the user or about the sources, not about the world.

"Sure!", "I hope this helps.", "(Passage 2)", "The passages do not say when it
opened." state no fact a context could support or contradict: a chat model wraps
its answer in them, and judging them as claims only adds false alarms. They are
recognised by their form (pleasantries, first and second person offers of help,
abstentions, source references, statements that the sources are silent), never by
topic.
"""

from __future__ import annotations

import re

__all__ = ["SOURCES", "is_meta"]

_PLEASANTRY = re.compile(
    r"^(?:sure|certainly|of course|absolutely|okay|ok|great|hello|hi|yes|no problem|"
    r"great question|good question|thank you|thanks)\b[\w\s,']{0,20}[!.:]?$",
    re.IGNORECASE,
)
_OFFER = re.compile(
    r"\b(?:i hope (?:this|that|it)|hope (?:this|that) helps|let me know|feel free|"
    r"happy to help|glad to help|i can help|help you with (?:that|this)|i'?d be happy|"
    r"i would be happy|is there anything else|how (?:can|may|could) i (?:help|assist)|"
    r"what can i do for you|"
    r"if you have any (?:other|more|further) questions?)\b",
    re.IGNORECASE,
)
_SOURCE_REFERENCE = re.compile(
    r"^\(?(?:(?:ref|refs|reference|source|sources|see|cf)\.?:?\s*)?"
    r"(?:passage|context|document|source|question|reference)s?\s*\d+"
    r"(?:\s*(?:,|and|&)\s*\d+)*\)?[.:]?$",
    re.IGNORECASE,
)
SOURCES = (
    r"(?:passages?|contexts?|documents?|documentation|docs|sources?|texts?|articles?|data|"
    r"records?|materials?|knowledge base|(?:provided |given )?information(?: provided| given)?)"
)
"""What an answer calls its sources, as a pattern ("the passages", "the documentation")."""
_SOURCES = SOURCES
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
# A clause whose subject (the passage) was left in the previous one: "... and does not
# provide a specific time."
_SILENT_CLAUSE = re.compile(
    r"^(?:it |they |which )?(?:do(?:es)?|did) not (?:provide|mention|specify|say|state|give|"
    r"include|contain|discuss|address)\b",
    re.IGNORECASE,
)
# "There are no side effects mentioned in the passages": a negation, then the sources
# as the place where something is (not) said.
_NOT_IN_SOURCES = re.compile(
    r"\b(?:no|not|none|nothing|neither|nor)\b[^.]{0,80}\b(?:mentioned|stated|provided|given|"
    r"listed|specified|discussed|found|included|covered|contained|available) (?:in|by|within) "
    rf"(?:the |these |any |your )?(?:given |provided )?{_SOURCES}\b",
    re.IGNORECASE,
)
# "Passage 3 provides the necessary information to answer the question", "the answer is
# based on the information provided in the passages": about where the answer comes from.
_ABOUT_SOURCES = re.compile(
    rf"^(?:{_SOURCES}|(?:the )?(?:passage|document|source)s? \d+) "
    r"(?:provides?|contains?|gives?|has|have|offers?) (?:the |all the )?(?:necessary |relevant |"
    r"required |needed )?information\b|"
    r"\b(?:this |the |my )?answer (?:to the question )?is based on (?:the )?(?:information|"
    rf"details?|{_SOURCES})\b",
    re.IGNORECASE,
)


# Advice to seek advice: "consult a healthcare professional before ...", "it's best to
# check the manufacturer's instructions". It tells the user what to do, not what is.
_REFERRAL = re.compile(
    r"\b(?:consult(?:ing)?|speak(?:ing)?|talk(?:ing)?|check(?:ing)?) (?:with )?"
    r"(?:a |an |your |the )?(?:[\w'’-]+ ){0,2}(?:professional|doctor|physician|expert|"
    r"specialist|pharmacist|dermatologist|veterinarian|vet|advisor|adviser|instructions|"
    r"manual|label)s?\b",
    re.IGNORECASE,
)


# An abstention states nothing about the world: "I don't know.", "I'm not sure.", and the
# speaker's own failed search, "I could not find this in the documentation." (what it
# looked through is the sources, not the world).
_ABSTENTION = re.compile(
    r"^(?:sorry[,.!]?\s*|unfortunately[,]?\s*)?(?:i (?:do not|don't|dont) know|"
    r"i(?:'m| am) (?:not sure|unsure|not certain|unable to (?:answer|say|tell|help))|"
    r"i (?:cannot|can't|can not) (?:answer|say|tell|help with) (?:that|this)|"
    r"i (?:could not|couldn't|cannot|can't|can not|did not|didn't|was unable to|"
    r"am unable to|'m unable to|was not able to|am not able to) (?:find|locate)|"
    r"i have no (?:idea|information|answer))\b[^.!?]{0,60}[.!?]?$",
    re.IGNORECASE,
)


def is_meta(text: str) -> bool:
    """Whether the sentence talks about the conversation or its sources, not the world."""
    stripped = text.strip()
    if (
        _PLEASANTRY.match(stripped)
        or _SOURCE_REFERENCE.match(stripped)
        or _ABSTENTION.match(stripped)
    ):
        return True
    return bool(
        _OFFER.search(stripped)
        or _SILENT_SOURCES.search(stripped)
        or _SILENT_CLAUSE.match(stripped)
        or _NOT_IN_SOURCES.search(stripped)
        or _ABOUT_SOURCES.search(stripped)
        or _REFERRAL.search(stripped)
    )
