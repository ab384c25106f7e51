"""Import the SDK's tracing module whatever ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` says.

``opentelemetry.sdk.trace`` reads that variable as it is imported (into a constant kept
for backward compatibility, which nothing reads) and raises ``ValueError`` on a value
that is not a count, so ``import ragpulse`` would fail on the application's first line.
For that one import, and only when the SDK would refuse the value, the variable is
hidden, then put back as it was; ``configure()`` reads it as it reads every other:
one warning, and its default. ``ragpulse/__init__.py`` imports this module first.
"""

from __future__ import annotations

import importlib
import os
import sys

__all__ = ["import_sdk_trace"]

_READ_AT_IMPORT = "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"


def _sdk_takes(text: str) -> bool:
    """Whether the SDK's reader takes ``text`` (``SpanLimits._from_env_if_absent``)."""
    text = text.strip().lower()
    if text == "unset":
        return True
    try:
        return int(text) >= 0
    except ValueError:
        return False


def import_sdk_trace() -> None:
    """Import ``opentelemetry.sdk.trace`` once, a bad ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``
    hidden from it."""
    if "opentelemetry.sdk.trace" in sys.modules:
        return
    raw = os.environ.get(_READ_AT_IMPORT)
    if raw is None or _sdk_takes(raw):
        importlib.import_module("opentelemetry.sdk.trace")
        return
    del os.environ[_READ_AT_IMPORT]
    try:
        importlib.import_module("opentelemetry.sdk.trace")
    finally:
        os.environ[_READ_AT_IMPORT] = raw


import_sdk_trace()
