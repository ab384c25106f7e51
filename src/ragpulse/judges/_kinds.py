"""The names of the built-in judges and the cascade's band: what settings may name."""

from __future__ import annotations

__all__ = ["DEFAULT_BAND", "ESCALATION_KINDS", "JUDGE_KINDS", "parse_band"]

JUDGE_KINDS = ("lexical", "openai", "nli", "tokens", "cascade")
"""``--judge`` and ``RAGPULSE_JUDGE`` values."""
ESCALATION_KINDS = ("openai", "nli", "tokens")
"""The judges a cascade may escalate to."""
DEFAULT_BAND = (0.35, 0.85)
"""Claim confidences a cascade's screen is unsure of, by default."""


def parse_band(text: str | tuple[float, float]) -> tuple[float, float]:
    """``"0.35,0.85"`` (or a pair) as ``(0.35, 0.85)``; ``ValueError`` if out of order."""
    if isinstance(text, str):
        parts = [p for p in text.replace(" ", "").split(",") if p]
        if len(parts) != 2:
            raise ValueError(f"{text!r} is not LOW,HIGH (e.g. 0.35,0.85)")
        low, high = float(parts[0]), float(parts[1])
    else:
        low, high = (float(v) for v in text)
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"{text!r}: a band needs 0 <= LOW <= HIGH <= 1")
    return low, high
