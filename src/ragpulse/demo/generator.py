"""Answer generators for the demo app, and the fault injector that makes some answers drift.

``ExtractiveGenerator`` works offline: it copies the 1-3 sentences of the
retrieved passages that share the most terms with the question. Its answers are
grounded by construction, so every drop in a score comes from an injected fault.

``OpenAIChatGenerator`` asks a real chat model through any OpenAI-compatible
endpoint (the ``openai`` package is an optional extra, imported only here).

``inject_fault`` turns a clean answer into a realistic wrong one and says
exactly what it changed, so the demo can check what the evaluator caught:

- ``changed_number``: a price, limit, percentage or version number is altered;
- ``foreign_date``: a date is swapped for a date taken from another document;
- ``unsupported_sentence``: a plausible sentence "from memory" is added that no
  passage supports;
- ``off_question``: the answer is replaced by a true sentence of a retrieved passage
  that is about something else (faithful, not relevant);
- ``omitted_part``: the sentence holding the question's required fact is dropped;
- ``wrong_citation``: a ``[N]`` marker is pointed at a passage that does not state
  its sentence;
- ``unwarranted_abstention``: the answer becomes "I don't know." although the
  passages hold the answer.

Two more kinds are the retriever's, injected into the search results (``SupportBot``):
``wrong_chunks`` (passages of other documents) and ``missing_chunks`` (nothing found).

``cite`` writes the ``[N]`` markers a cited assistant puts after each sentence
(1-based, passages in retrieval order).

``restate`` rewrites a clean answer the way a chat model writes one: other words for
the same facts ("costs" for "is priced at"), numbers restated ("ten" for "10", "99.9
percent" for "99.9%"), and two sentences summed up in one after a lead-in. The facts do
not change, so a restated answer is as correct as the verbatim one; a judge that pages on
it pages on healthy traffic.

An injected value never occurs in the passages the answer was built from, so the
fault is a real contradiction of the sources, not a lucky coincidence.
"""

from __future__ import annotations

import enum
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ragpulse.demo.corpus import DOCUMENTS, UNSUPPORTED
from ragpulse.demo.retriever import tokenize

EXTRACTIVE_MODEL = "larkspur-extractive-1"
"""The model name the offline generator reports on its generation spans."""

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9$])")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# "March 12, 2024" or "September 2025".
_DATE = re.compile(rf"\b(?:{_MONTHS})(?: \d{{1,2}},)? \d{{4}}\b")
# A free-standing figure: "$11", "50,000", "99.9%", "5.1.2", "16". Figures glued to
# letters or dashes ("FIDO2", "AES-256", "LSA-2025-004") and clock times are names,
# not quantities, and are left alone.
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_NUMBER = re.compile(r"(?<![\w.,:$-])(\$?)(\d+(?:[.,]\d+)*)(%?)(?![\w:-]|[.,]\d)")


def split_sentences(text: str) -> list[str]:
    """Split on sentence-final punctuation followed by a capital, digit or ``$``."""
    return [s.strip() for s in _SENTENCE_BREAK.split(text.strip()) if s.strip()]


@dataclass(frozen=True, slots=True)
class Source:
    """A retrieved passage as the generator receives it."""

    text: str
    id: str | None = None


class AnswerGenerator(Protocol):
    """Writes an answer to a question from retrieved passages."""

    model: str

    def generate(self, question: str, sources: Sequence[Source]) -> str:
        """The answer text."""
        ...


class ExtractiveGenerator:
    """Composes an answer from the passages' sentences that best match the question."""

    model: str = EXTRACTIVE_MODEL

    def __init__(self, max_sentences: int = 3, min_relative_score: float = 0.6) -> None:
        self.max_sentences = max_sentences
        # A sentence joins the best one only if it matches the question almost as well,
        # so short questions get short answers.
        self.min_relative_score = min_relative_score

    def generate(self, question: str, sources: Sequence[Source]) -> str:
        """1-3 verbatim sentences of ``sources``, in reading order; a refusal if none match."""
        wanted = set(tokenize(question))
        candidates: list[tuple[float, int, int, str]] = []
        for rank, source in enumerate(sources):
            # Earlier passages ranked higher; their sentences win ties.
            rank_weight = 1.0 / (1.0 + 0.25 * rank)
            for position, sentence in enumerate(split_sentences(source.text)):
                overlap = len(wanted & set(tokenize(sentence)))
                if overlap:
                    candidates.append((overlap * rank_weight, rank, position, sentence))
        if not candidates:
            return "I could not find this in the Larkspur documentation."
        candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
        best = candidates[0][0]
        chosen = [c for c in candidates if c[0] >= best * self.min_relative_score]
        chosen = chosen[: self.max_sentences]
        chosen.sort(key=lambda c: (c[1], c[2]))
        return " ".join(c[3] for c in chosen)


CHAT_SYSTEM_PROMPT = (
    "You answer questions about Larkspur, a file-sync service, for its support team. "
    "Use only the numbered passages. Answer in one to three sentences and copy figures, "
    "dates and names exactly as the passages write them."
)
"""The chat generator's system message."""


class OpenAIChatGenerator:
    """Answers with a chat model behind any OpenAI-compatible endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        # Imported here: the openai client is the optional ``openai`` extra.
        from openai import OpenAI

        self.model = model
        # Local servers (vLLM, Ollama, llama.cpp) accept any key; the client needs one.
        key = api_key if api_key is not None else ("unused" if base_url else None)
        self._client: Any = OpenAI(base_url=base_url, api_key=key, timeout=timeout)

    def generate(self, question: str, sources: Sequence[Source]) -> str:
        """The model's answer (temperature 0)."""
        passages = "\n\n".join(f"[{i + 1}] {s.text}" for i, s in enumerate(sources))
        response = self._client.chat.completions.create(
            model=self.model,
            temperature=0,
            messages=[
                {"role": "system", "content": CHAT_SYSTEM_PROMPT},
                {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {question}"},
            ],
        )
        content = response.choices[0].message.content
        return str(content or "").strip()


class FaultKind(str, enum.Enum):
    """The kinds of drift the demo injects."""

    CHANGED_NUMBER = "changed_number"
    FOREIGN_DATE = "foreign_date"
    UNSUPPORTED_SENTENCE = "unsupported_sentence"
    OFF_QUESTION = "off_question"
    OMITTED_PART = "omitted_part"
    WRONG_CITATION = "wrong_citation"
    UNWARRANTED_ABSTENTION = "unwarranted_abstention"
    WRONG_CHUNKS = "wrong_chunks"
    """Retrieval fault: the passages come from other documents (the answer follows them)."""
    MISSING_CHUNKS = "missing_chunks"
    """Retrieval fault: nothing is retrieved (the answer abstains)."""
    FAILED_TOOL = "failed_tool"
    """Agent fault: the agent's search tool fails, and it answers anyway, from memory."""


RETRIEVAL_FAULTS: frozenset[FaultKind] = frozenset(
    {FaultKind.WRONG_CHUNKS, FaultKind.MISSING_CHUNKS}
)
"""The faults of the retriever, not of the generator: injected into the search results."""

AGENT_FAULTS: frozenset[FaultKind] = frozenset({FaultKind.FAILED_TOOL})
"""The faults of an agent's tools: injected into the tool call, on the agent's path."""


ABSTENTION = "I don't know."
"""What the demo's assistant says when it abstains."""


def cite(answer: str, sources: Sequence[Source]) -> str:
    """``answer`` with a ``[N]`` marker closing each sentence a passage states verbatim."""
    cited = []
    for sentence in split_sentences(answer):
        number = next((i for i, s in enumerate(sources, 1) if sentence in s.text), None)
        cited.append(sentence if number is None else _with_marker(sentence, number))
    return " ".join(cited)


def _with_marker(sentence: str, number: int) -> str:
    if sentence[-1:] in (".", "!", "?"):
        return f"{sentence[:-1]} [{number}]{sentence[-1]}"
    return f"{sentence} [{number}]"


class Style(str, enum.Enum):
    """How the demo's assistant words a clean answer."""

    VERBATIM = "verbatim"
    """The passages' own sentences."""
    REWORDED = "reworded"
    """The same facts in other words, numbers restated."""
    SUMMARY = "summary"
    """Reworded, after a lead-in, its sentences summed up in one."""


# Other words for the same facts, as a chat model picks them (one pass: none chains).
_REWORDINGS = {
    "is priced at": "costs",
    "costs": "is priced at",
    "keeps": "retains",
    "kept": "retained",
    "deleted": "removed",
    "requires": "needs",
    "per month": "a month",
    "per device": "on each device",
    "automatically": "on its own",
    "customers": "clients",
    "expire": "run out",
    "begins": "starts",
    "was released on": "came out on",
    "is available": "is offered",
    "are available": "are offered",
    "includes": "comes with",
    "supports": "works with",
    "added": "brought",
    "introduced": "brought in",
    "removed": "dropped",
    "are answered within": "get a reply in no more than",
    "is answered within": "gets a reply in no more than",
    "within": "in no more than",
    "by default": "out of the box",
    "turned off": "disabled",
    "can be": "may be",
    "stays": "remains",
    "receives": "gets",
    "receive": "get",
    "are stored": "are kept",
    "uses": "relies on",
    "shows": "displays",
    "every": "each",
}
_REWORDING = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in _REWORDINGS) + r")\b")
_NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]
# A small count before a lowercase word ("10 single-use codes"), not a version ("10.2"),
# a marker ("[1]"), a price ("$5") or a figure of a name ("Windows 10 or later").
_SMALL_COUNT = re.compile(r"(?<![\w.\[$-])(\d{1,2})(?![\w.,:%\]-])(?= [a-z])")
_NAME_BEFORE = re.compile(r"[A-Z]\w*\s$")
_PERCENT = re.compile(r"(\d)%")
_LEAD_INS = ("According to the documentation, ", "In short, ", "To sum up, ")


def restate(answer: str, style: Style) -> str:
    """``answer`` worded in ``style`` (see ``Style``); the facts and ``[N]`` markers stay.
    The same answer and style always give the same words."""
    if style is Style.VERBATIM or not answer.strip():
        return answer
    text = _REWORDING.sub(lambda m: _REWORDINGS[m.group(0)], answer)
    text = _PERCENT.sub(r"\1 percent", text)
    text = _SMALL_COUNT.sub(_count_in_words, text)
    if style is Style.SUMMARY:
        sentences = split_sentences(text)
        if len(sentences) >= 2:
            first, second = sentences[0], sentences[1]
            joined = f"{first.rstrip('.')}, and {_lower_first(second)}"
            text = " ".join([joined, *sentences[2:]])
        text = _LEAD_INS[len(answer) % len(_LEAD_INS)] + _lower_first(text)
    return text


def _count_in_words(match: re.Match[str]) -> str:
    value = int(match.group(1))
    if value > 12 or _NAME_BEFORE.search(match.string[max(0, match.start() - 20) : match.start()]):
        return match.group(1)
    return _NUMBER_WORDS[value]


def _lower_first(sentence: str) -> str:
    # "The Team plan ..." reads "the Team plan" inside a sentence; a name stays capitalised.
    first, _, rest = sentence.partition(" ")
    if first in ("The", "A", "An", "Each", "Every", "Files", "Folders", "You", "By", "On"):
        return f"{first.lower()} {rest}"
    return sentence


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """Ground truth of one injected fault: what changed, and where it sits in the answer."""

    kind: FaultKind
    original: str
    """The replaced text; empty for an added sentence."""
    injected: str
    """The text that is now in the answer at ``start:end``."""
    start: int
    end: int
    source_id: str | None = None
    """The document a foreign date or an unsupported sentence was taken from."""


def plan_faults(requests: int, drift: float, seed: int) -> frozenset[int]:
    """The request indexes (of ``range(requests)``) that get a fault: ``round(drift * n)``."""
    share = min(max(drift, 0.0), 1.0)
    return frozenset(random.Random(seed).sample(range(requests), round(share * requests)))


def inject_fault(
    answer: str,
    sources: Sequence[Source],
    rng: random.Random,
    kind: FaultKind | None = None,
    *,
    question: str | None = None,
    required: str | None = None,
) -> tuple[str, InjectedFault]:
    """Make ``answer`` drift from ``sources``; return the new answer and its ground truth.

    With ``kind`` unset, the kind is drawn from those that apply to this answer
    (an answer without a date cannot get a foreign date; an off-question answer needs
    the ``question``, an omitted part the ``required`` fact). An added sentence
    always applies, so a fault is always injected.
    """
    context_text = "\n".join(s.text for s in sources)
    injectors: dict[FaultKind, Callable[[], tuple[str, InjectedFault] | None]] = {
        FaultKind.CHANGED_NUMBER: lambda: _change_number(answer, context_text, rng),
        FaultKind.FOREIGN_DATE: lambda: _swap_date(answer, sources, context_text, rng),
        FaultKind.UNSUPPORTED_SENTENCE: lambda: _add_sentence(answer, sources, context_text, rng),
        FaultKind.OFF_QUESTION: lambda: _off_question(answer, sources, question),
        FaultKind.OMITTED_PART: lambda: _omit_part(answer, required),
        FaultKind.WRONG_CITATION: lambda: _miscite(answer, sources, rng),
        FaultKind.UNWARRANTED_ABSTENTION: lambda: _abstain(answer),
    }
    order = [k for k in FaultKind if k not in RETRIEVAL_FAULTS and k not in AGENT_FAULTS]
    rng.shuffle(order)
    if kind is None and _DATE.search(answer) and rng.random() < 0.6:
        # Few answers carry a date; when one does, prefer the fault only it allows.
        kind = FaultKind.FOREIGN_DATE
    if kind is not None and kind not in RETRIEVAL_FAULTS and kind not in AGENT_FAULTS:
        order.remove(kind)
        order.insert(0, kind)
    for candidate in order:
        result = injectors[candidate]()
        if result is not None:
            return result
    # Unreachable in practice: _add_sentence falls back to a generic sentence.
    raise RuntimeError("no fault could be injected")


def _off_question(
    answer: str, sources: Sequence[Source], question: str | None
) -> tuple[str, InjectedFault] | None:
    """A true sentence of a retrieved passage sharing no term with the question."""
    if not question:
        return None
    asked = set(tokenize(question))
    for number, source in reversed(list(enumerate(sources, 1))):
        for sentence in split_sentences(source.text):
            words = set(tokenize(sentence))
            if len(words) >= 4 and not words & asked and sentence[:-1] not in answer:
                injected = _with_marker(sentence, number)
                fault = InjectedFault(
                    FaultKind.OFF_QUESTION, answer, injected, 0, len(injected), source.id
                )
                return injected, fault
    return None


_CLAUSE_BREAK = re.compile(r",\s+|;\s+|\s+and\s+")


def _omit_part(answer: str, required: str | None) -> tuple[str, InjectedFault] | None:
    """The answer without the part holding the required fact: its sentence, or its clause.

    A sentence is dropped when another one is left; in a one-sentence answer the clause
    holding the fact ("..., for 180 days on the Team plan and ...") is cut instead.
    """
    if required is None or answer.count(required) != 1:
        return None
    sentences = split_sentences(answer)
    at = next(i for i, s in enumerate(sentences) if required in s)
    if len(sentences) >= 2:
        kept = sentences[:at] + sentences[at + 1 :]
        # Ground truth: where the sentence was, and the text that would put it back.
        if at == 0:
            original, position = sentences[0] + " ", 0
        else:
            original, position = " " + sentences[at], len(" ".join(sentences[:at]))
        fault = InjectedFault(FaultKind.OMITTED_PART, original, "", position, position)
        return " ".join(kept), fault
    fact_at = answer.index(required)
    breaks = list(_CLAUSE_BREAK.finditer(answer))
    before = [m for m in breaks if m.end() <= fact_at]
    after = [m for m in breaks if m.start() >= fact_at + len(required)]
    if not before:
        return None  # the fact is in the sentence's subject clause: nothing sensible is left
    # From the break before the fact to the break after it (or the sentence's end).
    start = before[-1].start()
    end = after[0].start() if after else _clause_end(answer)
    new_answer = answer[:start] + answer[end:]
    original = answer[start:end]
    if len(new_answer.split()) < 4:
        return None
    return new_answer, InjectedFault(FaultKind.OMITTED_PART, original, "", start, start)


def _clause_end(answer: str) -> int:
    """Where the last clause ends: before a closing marker and punctuation."""
    match = re.search(r"(?:\s*\[\d+\])?[.!?]?\s*$", answer)
    return match.start() if match else len(answer)


def _miscite(
    answer: str, sources: Sequence[Source], rng: random.Random
) -> tuple[str, InjectedFault] | None:
    """One ``[N]`` marker pointed at another passage that does not state its sentence."""
    candidates = []
    for sentence in split_sentences(answer):
        marker = re.search(r"\[(\d+)\](?=[.!?]?$)", sentence)
        if marker is None:
            continue
        text = (sentence[: marker.start()].rstrip() + sentence[marker.end() :]).strip()
        for number, source in enumerate(sources, 1):
            if number != int(marker.group(1)) and text not in source.text:
                candidates.append((sentence, marker, number))
    if not candidates:
        return None
    sentence, marker, number = rng.choice(candidates)
    replaced = sentence[: marker.start()] + f"[{number}]" + sentence[marker.end() :]
    start = answer.index(sentence)
    new_answer = answer[:start] + replaced + answer[start + len(sentence) :]
    at = start + marker.start()
    fault = InjectedFault(
        FaultKind.WRONG_CITATION, marker.group(0), f"[{number}]", at, at + len(f"[{number}]")
    )
    return new_answer, fault


def _abstain(answer: str) -> tuple[str, InjectedFault] | None:
    if not answer.strip():
        return None
    return ABSTENTION, InjectedFault(
        FaultKind.UNWARRANTED_ABSTENTION, answer, ABSTENTION, 0, len(ABSTENTION)
    )


def _context_figures(context_text: str) -> set[str]:
    """Every figure a judge could read in the passages, so an injected one is truly new.

    Deliberately broader than ``_NUMBER``: digits glued to names ("FIDO2") count,
    and so do month names, which judges commonly read as numbers ("September" = 9).
    """
    figures = {match.group(0).replace(",", "") for match in _DIGITS.finditer(context_text)}
    for number, month in enumerate(_MONTHS.split("|"), start=1):
        if month in context_text:
            figures.add(str(number))
    return figures


def _change_number(
    answer: str, context_text: str, rng: random.Random
) -> tuple[str, InjectedFault] | None:
    dates = [m.span() for m in _DATE.finditer(answer)]
    # "1" is left alone: changing it would break the grammar ("within 3 hour") and
    # give the fault away to a reader.
    figures = [
        m
        for m in _NUMBER.finditer(answer)
        if m.group(2) != "1"
        and not any(start <= m.start() < end for start, end in dates)
        and answer[m.start() - 1 : m.start()] != "["  # a citation marker is not a figure
    ]
    if not figures:
        return None
    match = rng.choice(figures)
    prefix, digits, suffix = match.groups()
    taken = _context_figures(context_text)
    for _ in range(20):
        new_digits = _nearby_figure(digits, rng)
        if new_digits != digits and new_digits.replace(",", "") not in taken:
            break
    else:
        return None
    injected = f"{prefix}{new_digits}{suffix}"
    start = match.start()
    new_answer = answer[:start] + injected + answer[match.end() :]
    fault = InjectedFault(
        FaultKind.CHANGED_NUMBER, match.group(0), injected, start, start + len(injected)
    )
    return new_answer, fault


def _nearby_figure(digits: str, rng: random.Random) -> str:
    """A plausible wrong value for a figure: close enough to be believed."""
    if digits.count(".") >= 1 and "," not in digits:
        parts = digits.split(".")
        if len(parts) > 2 or (len(parts[-1]) == 1 and int(parts[0]) < 20):
            # A version number such as 5.1 or 5.1.2: bump or drop a component.
            last = int(parts[-1])
            parts[-1] = str(max(0, last + rng.choice((-2, -1, 1, 2, 3))))
            return ".".join(parts)
        # A decimal such as 99.9: change its last digit.
        last_digit = int(digits[-1])
        return digits[:-1] + str((last_digit + rng.randint(1, 8)) % 10)
    value = int(digits.replace(",", ""))
    if value <= 12:
        new = max(1, value + rng.choice((-2, -1, 1, 2, 3, 4)))
    elif value in range(1900, 2100):
        new = value + rng.choice((-2, -1, 1, 2))
    elif len(digits) >= 4 and "," not in digits:
        # An identifier-like figure (a port): one digit is off.
        position = rng.randrange(1, len(digits))
        digit = str((int(digits[position]) + rng.randint(1, 9)) % 10)
        return digits[:position] + digit + digits[position + 1 :]
    else:
        new = round(value * rng.choice((0.5, 0.75, 1.5, 2.0, 3.0)))
    return f"{new:,}" if "," in digits else str(new)


def _swap_date(
    answer: str, sources: Sequence[Source], context_text: str, rng: random.Random
) -> tuple[str, InjectedFault] | None:
    dates = list(_DATE.finditer(answer))
    if not dates:
        return None
    match = rng.choice(dates)
    with_day = "," in match.group(0)
    # Only dates whose month the passages never name: "September 2, 2025" next to a
    # passage's "September 2025" would be a near miss, not a clear foreign date.
    source_ids = {s.id for s in sources}
    foreign = [
        (doc.id, found.group(0))
        for doc in DOCUMENTS
        if doc.id not in source_ids
        for found in _DATE.finditer(doc.text)
        if ("," in found.group(0)) == with_day and found.group(0).split()[0] not in context_text
    ]
    if not foreign:
        return None
    doc_id, injected = rng.choice(foreign)
    start = match.start()
    new_answer = answer[:start] + injected + answer[match.end() :]
    fault = InjectedFault(
        FaultKind.FOREIGN_DATE, match.group(0), injected, start, start + len(injected), doc_id
    )
    return new_answer, fault


def _add_sentence(
    answer: str, sources: Sequence[Source], context_text: str, rng: random.Random
) -> tuple[str, InjectedFault]:
    # Prefer a statement about the topic of the best passage: that is what a model
    # "remembers" when it embellishes an answer.
    topical = [s.id for s in sources if s.id in UNSUPPORTED][:1]

    def unused(doc_ids: Sequence[str | None]) -> list[tuple[str, str]]:
        return [
            (doc_id, sentence)
            for doc_id in doc_ids
            if doc_id is not None
            for sentence in UNSUPPORTED[doc_id]
            if sentence not in context_text
        ]

    pool = unused(topical) or unused(sorted(UNSUPPORTED))
    doc_id, injected = rng.choice(pool)
    sentences = split_sentences(answer)
    # Either appended, or slipped in after the first sentence.
    at = len(sentences) if len(sentences) < 2 or rng.random() < 0.5 else 1
    head = " ".join(sentences[:at])
    tail = " ".join(sentences[at:])
    start = len(head) + 1 if head else 0
    new_answer = " ".join(part for part in (head, injected, tail) if part)
    fault = InjectedFault(
        FaultKind.UNSUPPORTED_SENTENCE, "", injected, start, start + len(injected), doc_id
    )
    return new_answer, fault
