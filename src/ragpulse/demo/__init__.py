"""``ragpulse demo``: a small, real RAG application whose answers drift, evaluated live.

A support bot for Larkspur, a fictional file-sync service: BM25 retrieval over a
few dozen documentation pages, an extractive (or, with an API key, a chat-model)
generator, and a seeded share of answers with injected faults. The app is
decorated with ragpulse's public decorators exactly as a user's would be, and the
demo prints which faults the evaluator caught.
"""

from __future__ import annotations

DEFAULT_MODEL = "gpt-4o-mini"
"""Chat model of the generator and the openai judge when ``--model`` names none."""
TINY_MODEL = "tiny"
"""``--judge nli|tokens --model tiny``: the demo builds the test suite's tiny model (word
overlap, not meaning: ``ragpulse.demo.tiny_model``) instead of reading an export."""
