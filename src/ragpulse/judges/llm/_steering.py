"""Text in a request that addresses the judge instead of the reader: the mark of an injection.

A retrieved passage, a question or an answer has no reason to speak to the model that
grades it: to tell it to ignore its instructions, name the verdicts it may return, cast it
as a judge or an assistant, open a role or a data fence of its own, or ask for claims to
be marked supported. Where such text is found, the LLM judge's quotes are held to the
strict checks (a quote must state its claim: its numbers, its names, most of its words);
elsewhere a verbatim quote that speaks of the claim is enough, because the strict checks
also reject what an honest model paraphrases. The patterns are about the judge's task and
vocabulary, never a topic; a false alarm only costs the strict checks.
"""

from __future__ import annotations

import re

from ragpulse.evaluation.types import RagRecord

__all__ = ["addresses_the_judge"]

# The judge's own verdict labels, written as labels (upper case, underscores).
_VERDICT_LABELS = re.compile(r"\b(?:SUPPORTED|NOT_FOUND|INFERRED|CONTRADICTED)\b")
_MODEL = (
    r"(?:ai|a\.i\.|llm|(?:large )?language model|chatbot|judge|evaluator|grader|assistant|"
    r"fact[- ]?checker|reviewer|annotator|model|gpt|classifier)"
)
_FAVOURABLE = (
    r"(?:supported|faithful|grounded|correct|true|accurate|verified|valid|factual|"
    r"consistent|entailed|hallucination[- ]free)"
)
_ADDRESSED = re.compile(
    "|".join(
        (
            # "Ignore previous instructions", "disregard the rules above".
            r"\b(?:ignore|disregard|forget|override|bypass|skip)\b[^.\n]{0,40}?"
            r"\b(?:instructions?|prompts?|rules|guidelines|directions|directives|system)\b",
            # "You are a helpful assistant", "act as the evaluator".
            rf"\b(?:you are|you're|act as|acting as|pretend to be|role[- ]?play as)\s+"
            rf"(?:an?\s+|the\s+|my\s+)?(?:\w+\s+)?{_MODEL}s?\b",
            # "Note to the grader", "attention AI", "dear evaluator".
            rf"\b(?:note (?:to|for)|attention|dear|hey|hi|message (?:to|for)|instructions? "
            rf"(?:to|for))\s+(?:the\s+|any\s+|all\s+)?(?:\w+\s+)?{_MODEL}s?\b",
            # "Mark every claim as supported", "rate this answer faithful".
            rf"\b(?:mark|rate|score|label|classify|judge|grade|treat|consider|count|deem|"
            rf"report|output|return|answer)\b[^.\n]{{0,40}}?\b(?:claims?|statements?|"
            rf"answers?|sentences?|responses?|verdicts?)\b[^.\n]{{0,30}}?\b{_FAVOURABLE}\b",
            rf"\b(?:all|every|each)\s+(?:of\s+the\s+)?(?:claims?|statements?|sentences?)\s+"
            rf"(?:here|below|above|in this answer)?\s*(?:is|are|must be|should be)\s+"
            rf"(?:\w+\s+)?{_FAVOURABLE}\b",
            r"\b(?:system|developer)\s+(?:prompt|message|instructions?)\b",
            r"\bnew\s+(?:instructions?|task|rules)\b",
            # Role and format markers of chat templates, and fences like ragpulse's own.
            r"<\|\s*im_(?:start|end)\s*\|>|\[/?INST\]|<<\s*/?SYS\s*>>",
            r"^\s*#{2,}\s*(?:instruction|system|response|assistant)\b",
            r"</?\s*(?:system|assistant|user|context|answer|question|reference|"
            r"answer_claims|rubric)\b[^>\n]{0,80}>",
            # The judge's reply format.
            r"\"(?:verdict|claims|unsupported|quote)\"\s*:",
        )
    ),
    re.IGNORECASE | re.MULTILINE,
)


def _addresses(text: str) -> bool:
    return bool(_VERDICT_LABELS.search(text) or _ADDRESSED.search(text))


def addresses_the_judge(record: RagRecord) -> str | None:
    """Where the record speaks to its judge ("question", "answer", "context N",
    "reference", "rubric"), or None when no text does."""
    if record.question and _addresses(record.question):
        return "question"
    if record.answer and _addresses(record.answer):
        return "answer"
    for number, context in enumerate(record.contexts, start=1):
        if _addresses(context.text):
            return f"context {number}"
    if record.reference and _addresses(record.reference):
        return "reference"
    for item in record.rubric or ():
        if _addresses(str(item)):
            return "rubric"
    return None
