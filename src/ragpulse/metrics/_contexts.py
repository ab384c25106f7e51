"""What the context metrics share: the per-passage attributes and the explanations' lists."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragpulse import semconv
from ragpulse.evaluation.types import ContextJudgement, ContextSource, Evaluation

__all__ = ["RELEVANT_SHARE", "contexts_attribute", "document_attributes", "listed"]

DocumentRow = tuple[int, float | None, bool | None, bool]
"""``(context index, relevance, relevant, used)``: ``ragpulse.signals.emit.Signals.documents``."""

RELEVANT_SHARE = 0.5
"""Relevance to the question from which a passage counts as relevant (no reference)."""
_LISTED = 5
_MAX_JSON = 16384


def contexts_attribute(evaluation: Evaluation) -> Mapping[str, Any]:
    """``ragpulse.eval.contexts``: per retrieved passage (index and id as in
    ``gen_ai.retrieval.documents``), its relevance, whether it helps, whether it was used."""
    if not evaluation.contexts:
        return {}
    rows = []
    for judged in evaluation.contexts:
        row: dict[str, Any] = {"index": judged.index, "id": judged.id}
        if judged.relevance is not None:
            row[semconv.CONTEXT_RELEVANCE] = round(judged.relevance, 3)
        if judged.relevant is not None:
            row[semconv.CONTEXT_RELEVANT] = judged.relevant
        row[semconv.CONTEXT_USED] = judged.used
        rows.append(json.dumps(row, ensure_ascii=False))
    text = "[" + ", ".join(rows) + "]"
    while len(text) > _MAX_JSON and rows:
        rows.pop()
        text = "[" + ", ".join([*rows, json.dumps({"truncated": True})]) + "]"
    return {semconv.EVAL_CONTEXTS: text}


def document_attributes(
    documents: Iterable[DocumentRow], sources: Iterable[ContextSource]
) -> dict[int, dict[str, Any]]:
    """Each retrieval span's per-document attributes, by span id.

    ``ragpulse.eval.context_relevance.documents.N.{score,relevant,used}``, N the
    document's position in that span, for every judged passage ``sources`` says
    the span returned. Numbers and flags only: nothing here can carry a passage's text.
    """
    rows = {row[0]: row for row in documents}
    if not rows:
        return {}
    spans: dict[int, dict[str, Any]] = {}
    for source in sources:
        span_id, first_document, first_context, length = source
        attributes = spans.setdefault(span_id, {})
        for offset in range(length):
            row = rows.get(first_context + offset)
            if row is None:
                continue
            _, relevance, relevant, used = row
            document = first_document + offset
            if relevance is not None:
                attributes[semconv.eval_document(document, semconv.DOCUMENT_SCORE)] = relevance
            if relevant is not None:
                attributes[semconv.eval_document(document, semconv.DOCUMENT_RELEVANT)] = relevant
            attributes[semconv.eval_document(document, semconv.DOCUMENT_USED)] = used
    return {span_id: attributes for span_id, attributes in spans.items() if attributes}


def listed(items: Sequence[ContextJudgement], what: str) -> str:
    """``; least relevant: #3 (0.00), #5 (0.10)``: passages by number, never their text."""
    if not items:
        return ""
    shown = ", ".join(
        f"#{c.index + 1}" + (f" ({c.relevance:.2f})" if c.relevance is not None else "")
        for c in items[:_LISTED]
    )
    more = len(items) - _LISTED
    return f"; {what}: {shown}" + (f" and {more} more" if more > 0 else "")
