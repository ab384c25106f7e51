"""The parsers of ``Settings``: text (from the environment) or a keyword's value, checked.

Each returns the checked value or raises ``Invalid`` with the reason; ``Settings.load`` logs
the reason and keeps the default, so no parser's error reaches the application.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Final

from ragpulse.capture._content import CONVENTIONS
from ragpulse.judges._kinds import ESCALATION_KINDS, JUDGE_KINDS, parse_band
from ragpulse.metrics.correctness import CORRECTNESS_MODES

PROTOCOLS: Final = ("http/protobuf", "grpc")


class Invalid(ValueError):
    """A value that cannot be used; the message says why."""


# --- parsers: text (from the environment) or a keyword's value -> a checked value -------------


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise Invalid("not a boolean (true/false)")


def _number(
    kind: Callable[[Any], Any],
    minimum: float,
    *,
    strict: bool,
    maximum: float = math.inf,
) -> Callable[[object], Any]:
    def parse(value: object) -> Any:
        if isinstance(value, bool):
            raise Invalid("not a number")
        try:
            number = kind(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError, OverflowError):
            raise Invalid("not a number") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise Invalid("not a finite number")
        if number < minimum or (strict and number == minimum):
            raise Invalid(f"must be {'above' if strict else 'at least'} {minimum:g}")
        if number > maximum:
            raise Invalid(f"must be at most {maximum:g}")
        return number

    return parse


def _as_int(value: object) -> int:
    if isinstance(value, float) and not value.is_integer():
        raise Invalid("not a whole number")
    return int(value) if isinstance(value, int | float) else int(str(value).strip())


MAX_COUNT: Final = sys.maxsize
"""The largest count or size taken: the most a queue or a buffer can be sized by here."""
MAX_SECONDS: Final = threading.TIMEOUT_MAX
"""The longest duration taken: the most a thread can wait for."""

_positive = _number(float, 0.0, strict=True)
_count = _number(_as_int, 1, strict=False, maximum=MAX_COUNT)
_size = _number(_as_int, 0, strict=False, maximum=MAX_COUNT)

UNLIMITED: Final = -1
"""An OpenTelemetry limit of ``unset``: no limit (the SDK's ``SpanLimits.UNSET``)."""


def _limit(value: object) -> int:
    """An OpenTelemetry limit: a count (0 and up), or ``unset`` for none."""
    if isinstance(value, str) and value.strip().lower() == "unset":
        return UNLIMITED
    return int(_size(value))


def _port(value: object) -> int:
    port = int(_number(_as_int, 0, strict=False)(value))
    if port > 65535:
        raise Invalid("not a TCP port (0-65535)")
    return port


def _nice(value: object) -> int:
    nice = int(_number(_as_int, 0, strict=False)(value))
    if nice > 19:
        raise Invalid("not a nice value (0-19)")
    return nice


def _rate(value: object) -> float:
    rate = float(_number(float, 0.0, strict=False)(value))
    if rate > 1.0:
        raise Invalid("not a rate in [0, 1]")
    return rate


def _text(value: object) -> str:
    text = str(value).strip()
    if not text:
        raise Invalid("empty")
    return text


MIN_HASH_KEY_BYTES: Final = 16
"""The shortest ``hash_key`` taken: below 128 bits a key can be guessed, and with it the
texts behind the exported hashes."""


def _hash_key(value: object) -> str:
    text = _text(value)
    if len(text.encode("utf-8")) < MIN_HASH_KEY_BYTES:
        raise Invalid(f"shorter than {MIN_HASH_KEY_BYTES} bytes, a key that can be guessed")
    return text


def _url(value: object) -> str:
    text = _text(value)
    if not text.startswith(("http://", "https://")):
        raise Invalid("not an http:// or https:// URL")
    return text


def _protocol(value: object) -> str:
    text = _text(value).lower()
    if text not in PROTOCOLS:
        raise Invalid(f"not one of {', '.join(PROTOCOLS)}")
    return text


def _compression(value: object) -> str:
    text = _text(value).lower()
    if text not in ("gzip", "none"):
        raise Invalid("not gzip or none")
    return text


def _seconds(value: object) -> float:
    return float(_number(float, 0.0, strict=True, maximum=MAX_SECONDS)(value))


def _millis_as_seconds(value: object) -> float:
    seconds = float(_positive(value)) / 1000.0
    if seconds > MAX_SECONDS:
        raise Invalid(f"must be at most {MAX_SECONDS * 1000:g} ms")
    return seconds


def _names(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise Invalid("a collection of names, not one string")
    if not isinstance(value, Collection) or not all(isinstance(v, str) for v in value):
        raise Invalid("not a collection of names")
    return tuple(value)


def _attribute_names(value: object) -> tuple[str, ...]:
    """Attribute names: ``"service.version,gen_ai.request.model"`` or a collection of them."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return tuple(name.strip() for name in _names(value) if name.strip())


def _globs(value: object) -> tuple[str, ...]:
    """Tool-name patterns: ``"search_*,lookup"`` or a collection of them."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return tuple(name.strip() for name in _names(value) if name.strip())


def _conventions(value: object) -> tuple[str, ...]:
    names = (
        tuple(part.strip().lower() for part in value.split(",") if part.strip())
        if isinstance(value, str)
        else _names(value)
    )
    if not names or any(name not in CONVENTIONS for name in names):
        raise Invalid(f"not a comma-separated subset of {', '.join(CONVENTIONS)}")
    return names


def _metric_modules(value: object) -> tuple[str, ...]:
    """Files or module names of the user's metrics, imported as they are read."""
    from ragpulse.metrics._registry import load_metric_module

    modules = (
        tuple(part.strip() for part in value.split(",") if part.strip())
        if isinstance(value, str)
        else _names(value)
    )
    for module in modules:
        try:
            load_metric_module(module)
        except ImportError as exc:
            raise Invalid(str(exc)) from None
    return modules


def _metrics(value: object) -> tuple[str, ...]:
    from ragpulse.metrics._registry import known

    if isinstance(value, str):
        names = tuple(part.strip() for part in value.split(",") if part.strip())
    elif isinstance(value, Collection):
        # A metric object (RubricMetric) stands for its name; it registered itself.
        given = [getattr(getattr(v, "spec", None), "name", v) for v in value]
        if not all(isinstance(n, str) for n in given):
            raise Invalid("not a list of metric names")
        names = tuple(str(n) for n in given)
    else:
        raise Invalid("not a list of metric names")
    names = tuple(n if n in known() else n.lower() for n in names)
    unknown = sorted(set(names) - set(known()))
    if unknown or not names:
        raise Invalid(f"unknown metrics {unknown}; known: {list(known())}")
    return names


def _one_of(names: Collection[str]) -> Callable[[object], str]:
    def parse(value: object) -> str:
        text = _text(value).lower()
        if text not in names:
            raise Invalid(f"not one of {', '.join(names)}")
        return text

    return parse


SAMPLERS: Final = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)
"""The samplers ``OTEL_TRACES_SAMPLER`` names (the SDK's own)."""
EXEMPLAR_FILTERS: Final = ("trace_based", "always_on", "always_off")
"""The filters ``OTEL_METRICS_EXEMPLAR_FILTER`` names."""


def _entry_point(group: str) -> Callable[[object], str]:
    """The name of an installed entry point of ``group`` (what the API loads by it)."""

    def parse(value: object) -> str:
        from importlib.metadata import entry_points

        text = _text(value)
        if not entry_points(group=group, name=text):
            raise Invalid(f"no installed {group} of that name")
        return text

    return parse


_sampler = _one_of(SAMPLERS)
_exemplar_filter = _one_of(EXEMPLAR_FILTERS)
_correctness_mode = _one_of(CORRECTNESS_MODES)
_judge_kind = _one_of(JUDGE_KINDS)
_escalation_kind = _one_of(ESCALATION_KINDS)


def _device(value: object) -> str:
    from ragpulse.judges.local._device import requested_providers

    text = ",".join(value) if isinstance(value, list | tuple) else _text(value)
    try:
        requested_providers(text)
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    return text


def _band(value: object) -> tuple[float, float]:
    if not isinstance(value, str | tuple | list):
        raise Invalid("not LOW,HIGH")
    try:
        return parse_band(value if isinstance(value, str) else (value[0], value[1]))
    except (ValueError, IndexError, TypeError) as exc:
        raise Invalid(str(exc)) from None


def _thresholds(value: object) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise Invalid("not a mapping of metric to threshold")
    checked: dict[str, float] = {}
    for name, threshold in value.items():
        if not isinstance(name, str):
            raise Invalid("metric names must be strings")
        checked[name] = _rate(threshold)
    return checked


def _headers(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise Invalid("not a mapping of header names to strings")
    return dict(value)


def _path(value: object) -> Path:
    if isinstance(value, os.PathLike):
        return Path(value)
    return Path(_text(value))
