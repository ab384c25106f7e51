"""A tool-calling agent (the OpenAI SDK, instrumented by OpenInference), evaluated by ragpulse.

The agent answers product questions over several turns of one conversation. The model
decides to call ``search_docs`` (a function tool); ``@ragpulse.tool`` traces the call as a
GenAI ``execute_tool`` span and hands its result to the enclosing ``@ragpulse.rag`` unit
as evidence; the model's final answer, the assistant message without tool calls, is
judged against it. The OpenAI calls themselves are traced by
``openinference-instrumentation-openai``, as they would be in an app that already uses it.

    python examples/agent.py        # offline: an in-process stand-in model
    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_MODEL=qwen2.5 python examples/agent.py

Four turns show what ragpulse makes of an agent:

1. a grounded answer from the tool's result (groundedness 1.0);
2. a follow-up in the same conversation ("And the fast charger?"), answered from a new
   search; both turns carry ``gen_ai.conversation.id``;
3. a search that finds nothing, after which the model answers anyway: the tool is named in
   ``ragpulse.tools.failed`` and the answer is judged with nothing to stand on;
4. a sum worked out with ``calculator``, an acting tool (``action_tools``): no evidence, so
   the answer is not judged (``skipped``, ``no_evidence``).

Without ``OPENAI_BASE_URL`` the real ``openai`` client and its instrumentation run
unchanged, but the HTTP exchange is answered in-process by a transport that speaks the
Chat Completions protocol, tool calls included: it calls the tool the question needs, then
answers with the first sentence the tool returned (or, when it returned nothing, with
what a model that guesses would say). The last line printed is each turn's result as JSON.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
from openai import OpenAI
from openinference.instrumentation.openai import OpenAIInstrumentor

import ragpulse
from ragpulse import Evaluation
from ragpulse.settings.options import EvaluationOptions

DOCUMENTS = {
    "warranty": "The X200 comes with a 2-year limited warranty covering parts and labour.",
    "charger": "The X200 fast charger fills the battery to 80 percent in 30 minutes.",
    "battery": "The X200 battery lasts up to 14 hours of video playback.",
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_docs",
            "description": "Search the product documentation.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression such as 17 * 23.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    },
]


# --- the offline stand-in model -------------------------------------------------------------


def _completion(model: str, message: dict[str, Any], finish: str) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-offline",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        },
    )


def offline_model(request: httpx.Request) -> httpx.Response:
    """Chat Completions as a small tool-calling model would answer: a tool call for a new
    question, then an answer from what the tool returned."""
    body = json.loads(request.content)
    last = body["messages"][-1]
    if last["role"] == "user":
        question = last["content"]
        digits = [word for word in question.replace("?", "").split() if word.isdigit()]
        if len(digits) == 2:
            name, arguments = "calculator", {"expression": f"{digits[0]} * {digits[1]}"}
        else:
            name, arguments = "search_docs", {"query": question}
        call = {
            "id": f"call_{len(body['messages'])}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return _completion(body["model"], message, "tool_calls")
    result = last.get("content") or ""
    if not result.strip():
        text = "Yes, the X200 is fully waterproof to a depth of 50 metres."  # a guess
    elif result.isdigit():
        text = f"That makes {result}."
    else:
        text = result.split(". ")[0].rstrip(".") + "."
    return _completion(body["model"], {"role": "assistant", "content": text}, "stop")


# --- the agent ---------------------------------------------------------------------------------

results: dict[str, Evaluation] = {}
handle = ragpulse.configure(
    service_name="agent-example",
    sample_rate=1.0,
    on_evaluation=lambda record, evaluation: results.__setitem__(record.question or "", evaluation),
    # a calculator acts: its result is no evidence (or @ragpulse.tool(evidence=False))
    evaluation=EvaluationOptions(action_tools=["calculator"]),
)
OpenAIInstrumentor().instrument()
base_url = os.environ.get("OPENAI_BASE_URL")
client = OpenAI(
    base_url=base_url or "http://offline.invalid/v1",
    api_key=os.environ.get("OPENAI_API_KEY", "local"),
    http_client=None if base_url else httpx.Client(transport=httpx.MockTransport(offline_model)),
)
MODEL = os.environ.get("OPENAI_MODEL", "local-model")


@ragpulse.tool
def search_docs(query: str, tool_call_id: str | None = None) -> str:
    """The documentation passages whose topic the query names ('' when none does)."""
    words = query.lower()
    return "\n".join(text for topic, text in DOCUMENTS.items() if topic in words)


@ragpulse.tool
def calculator(expression: str) -> str:
    """An acting tool (``action_tools`` above): its result is arithmetic, not evidence."""
    left, _, right = expression.partition("*")
    return str(int(left) * int(right))


def run_tool(call: Any) -> str:
    arguments = json.loads(call.function.arguments or "{}")
    if call.function.name == "calculator":
        return calculator(arguments.get("expression", ""))
    return search_docs(arguments.get("query", ""), tool_call_id=call.id)


@ragpulse.rag(name="product-agent")
def ask(question: str, conversation_id: str, history: list[dict[str, Any]]) -> str:
    """One turn: the model calls tools until it answers without one (at most four rounds)."""
    messages = [*history, {"role": "user", "content": question}]
    for _ in range(4):
        reply = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            answer = message.content or ""
            history.extend(
                [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            )
            return answer
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call)})
    return "I could not finish looking that up."


def main() -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer questions about the X200 from the documentation."}
    ]
    turns = [
        ("What warranty does the X200 have?", "conv-1"),
        ("And how fast is the charger?", "conv-1"),
        ("Is the X200 waterproof?", "conv-1"),
        ("What is 17 times 23?", "conv-2"),
    ]
    answers = {question: ask(question, conversation, history) for question, conversation in turns}
    handle.force_flush()
    rows = []
    for question, answer in answers.items():
        evaluation = results.get(question)
        rows.append(
            {
                "question": question,
                "answer": answer,
                "status": evaluation.status.value if evaluation else "not evaluated",
                "groundedness": evaluation.score("groundedness") if evaluation else None,
                "diagnosis": evaluation.diagnosis if evaluation else None,
            }
        )
    return rows


if __name__ == "__main__":
    rows = main()
    for row in rows:
        print(f"{row['status']:8} {row['groundedness']!s:5} {row['question']} -> {row['answer']}")
    print(json.dumps(rows))
    handle.shutdown()
