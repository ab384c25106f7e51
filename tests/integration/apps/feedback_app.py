"""A RAG app set up with ``ragpulse.configure()`` whose users give feedback, run as its own process.

argv[1] is a JSON list of requests, each ``{"grounded": bool, "groundedness": score or null,
"overall": score or null, "label": str or null, "comment": str or null, "target": form}``:
a grounded request answers from its passage (the judge passes it), the other contradicts it
(the judge fails it). Then, for each request, the feedback asked for is given on its span
in the ``target`` form: ``span`` (the span context), ``ids`` (hex span id and trace id) or
``trace`` (the trace id alone). Where the output goes is configured by the environment.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext

import ragpulse
from ragpulse.settings.options import BoundsOptions

PASSAGE = "Support is open from 9am to 5pm on weekdays. The L2 router costs $129."
GROUNDED = "Support is open from 9am to 5pm on weekdays."
DRIFTED = "Support is open from 8am to 11pm on Sundays. It glows in the dark."


@ragpulse.retrieval
def search(query: str) -> list[dict[str, str]]:
    return [{"id": "hours", "content": PASSAGE}]


SPANS: list[SpanContext] = []
"""The span of each request, as an app keeps it (say, beside the answer it sent) for feedback."""


@ragpulse.rag(name="support-bot")
def handle(question: str, grounded: bool) -> str:
    search(question)
    SPANS.append(trace.get_current_span().get_span_context())
    return GROUNDED if grounded else DRIFTED


def _target(form: str, context: SpanContext) -> dict[str, Any]:
    if form == "span":
        return {"target": context}
    if form == "ids":
        return {
            "target": format(context.span_id, "016x"),
            "trace_id": format(context.trace_id, "032x"),
        }
    return {"target": format(context.trace_id, "032x")}


def main() -> None:
    plan = json.loads(sys.argv[1])
    # People judge groundedness here; the offline judge scores it unlabelled, so the app sets
    # the threshold its labels (and the judge's verdicts beside people's) are read against.
    handle_ = ragpulse.configure(
        service_name="feedback-app",
        thresholds={"groundedness": 0.7},
        bounds=BoundsOptions(hold_timeout=30.0),
    )
    for item in plan:
        handle("When is support open?", item["grounded"])
    contexts = list(SPANS)
    for item, context in zip(plan, contexts, strict=True):
        target = _target(item["target"], context)
        if item.get("groundedness") is not None:
            ragpulse.feedback(**target, score=item["groundedness"], metric="groundedness")
        if item.get("overall") is not None or item.get("label") is not None:
            ragpulse.feedback(
                **target,
                score=item.get("overall"),
                label=item.get("label"),
                comment=item.get("comment"),
            )
    print(json.dumps([format(c.span_id, "016x") for c in contexts]), flush=True)
    handle_.force_flush()
    handle_.shutdown()


if __name__ == "__main__":
    main()
