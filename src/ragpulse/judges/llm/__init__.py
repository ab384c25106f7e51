"""The LLM judge: one call for claims, verdicts and quotes, checked before it counts."""
