"""Units: the right number with another unit of the same kind is a different value.

"30 °F" where the passage says "30 °C", "5 MB" for "5 GB", "20 dollars" for "20 euros":
every word and number of the claim is stated, and the unit beside its number is not,
while the passage it restates gives that number another unit of the same kind. Units
are compared in their normalised forms (``_lexical_tokens``: "°C" and "Celsius",
"gigabytes" and "GB", "USD" and "dollars" are one word).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from ragpulse.judges._lexical_tokens import Token

__all__ = ["changed_unit"]

_KINDS = (
    frozenset({"fahrenheit", "celsius", "kelvin"}),
    frozenset({"kb", "mb", "gb", "tb", "pb"}),
    frozenset({"dollar", "euro", "yen", "gbp", "sterling", "franc", "rupee", "yuan"}),
    frozenset({"kilometer", "meter", "centimeter", "millimeter", "mile", "foot", "inch", "yard"}),
    frozenset({"kilogram", "gram", "pound", "ounce", "ton", "tonne"}),
    frozenset({"liter", "milliliter", "gallon"}),
)
_KIND_OF = {unit: kind for kind in _KINDS for unit in kind}


def changed_unit(
    claim_tokens: Sequence[Token], stated: Callable[[str], bool], passage: Collection[str]
) -> tuple[Token, str] | None:
    """The claim's unit token beside a number that no context states, and the unit of
    the same kind the ``passage`` (its normalised words) gives instead; None if none."""
    for i, token in enumerate(claim_tokens):
        kind = _KIND_OF.get(token.norm)
        if kind is None or stated(token.norm):
            continue
        beside = claim_tokens[max(0, i - 1) : i + 2]
        if not any(t.number for t in beside):
            continue
        other = sorted(kind & set(passage))
        if other:
            return token, other[0]
    return None
