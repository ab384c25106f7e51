"""The one guard around capture code: a failure of ours never reaches the user's request.

What capture runs on the request path (reading arguments and results, writing
attributes) may meet user objects that raise anything, ``BaseException``
subclasses included. Everything is swallowed, logged (once per kind of failure,
then counted, as the SDK's duplicate filter does) and recorded on the span,
except ``KeyboardInterrupt`` and ``SystemExit``: they ask the program to stop,
so they go on after the span has been ended.
"""

from __future__ import annotations

import logging
import threading

from opentelemetry.trace import Span

from ragpulse import semconv
from ragpulse.capture._text import PROPAGATE

_logger = logging.getLogger("ragpulse.capture")

_LOG_EVERY = 1000
_seen: dict[tuple[str, str], int] = {}
_seen_lock = threading.Lock()


def swallow(exc: BaseException) -> None:
    """Re-raise ``exc`` if it must reach the program (``KeyboardInterrupt``, ``SystemExit``)."""
    if isinstance(exc, PROPAGATE):
        raise exc


def log_failure(what: str, exc: BaseException) -> None:
    """Log a capture failure: the first of its kind with a traceback, then every 1000th."""
    key = (what, type(exc).__name__)
    with _seen_lock:
        count = _seen.get(key, 0) + 1
        _seen[key] = count
    if count == 1:
        _logger.warning("ragpulse: could not capture %s", what, exc_info=exc)
    elif count % _LOG_EVERY == 0:
        _logger.warning(
            "ragpulse: could not capture %s (%s), %d times so far",
            what,
            type(exc).__name__,
            count,
        )


def capture_failed(span: Span, what: str, exc: BaseException) -> None:
    """Record on ``span`` that capturing ``what`` failed; never raises."""
    try:
        log_failure(what, exc)
        span.set_attributes(
            {
                semconv.RAG_CAPTURE_STATUS: semconv.CAPTURE_STATUS_ERROR,
                semconv.RAG_CAPTURE_WARNING: f"could not capture {what} ({type(exc).__name__})",
            }
        )
    except Exception:  # logging or a span in a strange state: nothing more to do
        pass
