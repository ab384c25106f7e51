"""The worked example of the metric definitions, as a record both judges evaluate.

A leaflet lists three side effects and the dose with its frequency. The answer names
the three real side effects (in three claims: two in one sentence, one in the next),
invents a fourth (hair loss, which the reference confirms but no retrieved passage
states), gives the right dose and omits the frequency. Expected: faithfulness 0.75,
groundedness 0.75, correctness 1.0, relevancy 1.0, completeness 0.67 (2 of 3 points).
"""

from __future__ import annotations

from ragpulse.evaluation.types import Context, RagRecord
from ragpulse.metrics import METRICS

QUESTION = "What are the side effects of Lumarex and what dose should I take?"
CONTEXTS = (
    Context("Lumarex side effects: it can cause nausea, headache and dizziness.", id="leaflet"),
    Context(
        "Dosage: the recommended dose of Lumarex is 200 mg, taken once daily with food.",
        id="dosage",
    ),
)
ANSWER = (
    "Lumarex can cause nausea and headache [1]. It can also cause dizziness [1]. "
    "Hair loss is also common [2]. The recommended dose is 200 mg [2]."
)
REFERENCE = (
    "Lumarex can cause nausea, headache, dizziness and hair loss. The recommended dose is 200 mg."
)
RUBRIC = ("side effects: nausea, headache, dizziness", "dose: 200 mg", "frequency: once daily")
EXPECTED = {
    "faithfulness": 0.75,
    "groundedness": 0.75,
    "correctness": 1.0,
    "relevancy": 1.0,
    "completeness": 2 / 3,
}
# The answer's claims as an LLM judge would decompose them: (claim, context number, quote).
JUDGED_CLAIMS = (
    ("Lumarex can cause nausea and headache", 1, "it can cause nausea, headache"),
    ("It can also cause dizziness", 1, "dizziness"),
    ("Hair loss is also common", None, None),
    ("The recommended dose is 200 mg", 2, "the recommended dose of Lumarex is 200 mg"),
)


def record() -> RagRecord:
    """The worked example's record, with every metric's input."""
    return RagRecord(
        question=QUESTION,
        contexts=CONTEXTS,
        answer=ANSWER,
        reference=REFERENCE,
        rubric=RUBRIC,
    )


ALL = METRICS
