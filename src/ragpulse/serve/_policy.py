"""The content policy of ``ragpulse serve``: what it writes obeys ``capture_content`` and redaction.

Everything ``ragpulse serve`` adds (a unit's ``ragpulse.eval.*`` attributes, the
claims JSON, explanations, evaluation log events) is made under the process's
``ContentPolicy``, as in an application that called ``configure()``: with
``RAGPULSE_CAPTURE_CONTENT=false`` (or ``--no-content``) no text, only lengths and
offsets; with ``--redact-pattern`` every match replaced by ``[REDACTED]``. The
spans it relays keep the attributes their sender wrote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragpulse.capture import ContentPolicy, set_policy
from ragpulse.settings import Settings

REDACTED = "[REDACTED]"


def compile_patterns(patterns: Sequence[str]) -> list[re.Pattern[str]]:
    """``--redact-pattern`` values compiled; raises ``ValueError`` naming a bad one."""
    compiled = []
    for text in patterns:
        try:
            compiled.append(re.compile(text))
        except re.error as exc:
            raise ValueError(
                f"--redact-pattern {text!r} is not a regular expression: {exc}"
            ) from None
    return compiled


class PatternRedactor:
    """Replaces every match of its patterns with ``[REDACTED]``."""

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self._patterns = tuple(patterns)

    def __call__(self, text: str) -> str:
        for pattern in self._patterns:
            text = pattern.sub(REDACTED, text)
        return text


def install_policy(settings: Settings, patterns: Sequence[re.Pattern[str]] = ()) -> ContentPolicy:
    """Make the policy of ``settings``, redacting ``patterns``, the process's; returns it."""
    policy = settings.content_policy(PatternRedactor(patterns) if patterns else None)
    set_policy(policy)
    return policy
