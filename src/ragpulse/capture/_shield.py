"""The one guard around capture code: a failure of ours never reaches the user's request.

What capture runs on the request path (reading arguments and results, writing
attributes) may meet user objects that raise anything, ``BaseException``
subclasses included. Everything is swallowed, logged through ragpulse's
throttled guard (once per kind of failure and window, then counted) and
recorded on the span,
except ``KeyboardInterrupt`` and ``SystemExit``: they ask the program to stop,
so they go on after the span has been ended.
"""

from __future__ import annotations

from opentelemetry.trace import Span

from ragpulse import semconv
from ragpulse._guard import Guard
from ragpulse.capture._text import PROPAGATE

_guard = Guard("ragpulse.capture")


def swallow(exc: BaseException) -> None:
    """Re-raise ``exc`` if it must reach the program (``KeyboardInterrupt``, ``SystemExit``)."""
    if isinstance(exc, PROPAGATE):
        raise exc


def log_failure(what: str, exc: BaseException) -> None:
    """Log a capture failure with its traceback, throttled per kind."""
    # The message names the failure, so the guard's throttle counts each kind
    # apart; the logger carries that throttle, whatever method logs through it.
    _guard.logger.warning(
        f"ragpulse: could not capture {what} ({type(exc).__name__})", exc_info=exc
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
