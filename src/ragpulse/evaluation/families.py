"""Model families by name: is the judge of the same family as the generator it judges?

A judge from the generator's own family rates that family's answers higher (it shares
its training data, its style and its blind spots), which inflates faithfulness and
correctness together. ragpulse knows both names: the judge's model and the
generator's ``gen_ai.request.model`` / ``gen_ai.response.model`` on the trace. This
module says whether they are of one family, by the name's prefix, after dropping a
provider's path (``openai/``, ``meta-llama/``, ``us.anthropic.``, ``models/``) and a
version or date suffix: ``gpt-4o`` judging ``gpt-4o-mini`` is one family (OpenAI's GPT),
as are two Llama-3 models or two Claude models. Names it does not know have no family,
and no pair with them is called same-family.
"""

from __future__ import annotations

import re

__all__ = ["FAMILIES", "model_family", "same_family"]

FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("openai-gpt", ("gpt-", "gpt4", "gpt3", "chatgpt", "o1", "o3", "o4-", "davinci", "text-")),
    ("claude", ("claude",)),
    ("llama", ("llama", "meta-llama", "codellama")),
    ("gemini", ("gemini",)),
    ("gemma", ("gemma",)),
    ("mistral", ("mistral", "mixtral", "ministral", "codestral", "magistral", "pixtral")),
    ("qwen", ("qwen", "qwq")),
    ("deepseek", ("deepseek",)),
    ("phi", ("phi-",)),
    ("command", ("command-", "c4ai-command")),
    ("granite", ("granite",)),
    ("grok", ("grok",)),
    ("internlm", ("internlm",)),
    ("falcon", ("falcon",)),
    ("yi", ("yi-",)),
)
"""Family name, then the name prefixes (lowercase, provider path dropped) that mean it."""

# Provider paths and routing prefixes that are not part of a model's own name.
_PREFIXES = re.compile(
    r"^(?:(?:[a-z]{2}|global|apac)\.)?(?:anthropic|meta|mistral|cohere|amazon|ai21|google)\."
)


def _bare(name: str) -> str:
    text = name.strip().lower()
    text = text.rsplit("/", 1)[-1]  # openai/gpt-4o, meta-llama/Llama-3-8B, models/gemini-1.5
    text = text.split(":", 1)[0] if not text.startswith("ft:") else text.split(":", 2)[1]
    return _PREFIXES.sub("", text)


def model_family(name: str | None) -> str | None:
    """The family of model ``name`` (``gpt-4o-mini`` -> ``openai-gpt``); None if unknown."""
    if not name or not name.strip():
        return None
    bare = _bare(name)
    for family, prefixes in FAMILIES:
        if bare.startswith(prefixes):
            return family
    return None


def same_family(judge: str | None, generator: str | None) -> bool | None:
    """True when both models are of one known family, False when of two known ones;
    None when either name is missing or of no known family."""
    first, second = model_family(judge), model_family(generator)
    if first is None or second is None:
        return None
    return first == second
