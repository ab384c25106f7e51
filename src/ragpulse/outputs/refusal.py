"""Whether a backend refused an export for good, as OTLP tells the two kinds of failure apart.

OTLP/HTTP retries 429, 502, 503 and 504 (and a request that got no answer); any other
4xx or 5xx is the backend's last word: a traces-only backend answers 404 or 405 to logs
and metrics, a wrong token 401, a request it cannot parse 400. OTLP/gRPC retries
CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, OUT_OF_RANGE, UNAVAILABLE and
DATA_LOSS; any other code (UNIMPLEMENTED, INVALID_ARGUMENT, UNAUTHENTICATED, ...) is final.

The SDK's exporters return the same FAILURE for both. ``watch`` gives an exporter a
``Refusals`` that hears each answer its requests get (from the ``requests`` session
ragpulse builds for OTLP/HTTP, from an interceptor on the OTLP/gRPC channel);
``take_refusal`` then says, after a failed export, whether retrying it can help. A REST
API that is not OTLP (Phoenix's annotations) is read by ``rest_refusal``: there a 5xx,
408 and 429 are worth retrying, any other 4xx is final. An
exporter ragpulse did not build, or one it cannot watch, is never called refused: its
failures are retried, as before.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "Refusals",
    "grpc_refusal",
    "http_refusal",
    "refuses_the_signal",
    "rest_refusal",
    "take_refusal",
    "watch",
    "watch_grpc",
]

RETRYABLE_HTTP = frozenset({429, 502, 503, 504})
RETRYABLE_GRPC = frozenset(
    {
        "CANCELLED",
        "DEADLINE_EXCEEDED",
        "RESOURCE_EXHAUSTED",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNAVAILABLE",
        "DATA_LOSS",
    }
)


def http_refusal(status: int | None, reason: str | None = None) -> str | None:
    """Why an HTTP answer refuses an export for good; None when it succeeded or may be retried."""
    if status is None or status < 400 or status in RETRYABLE_HTTP:
        return None
    return f"HTTP {status} {reason}".rstrip() if reason else f"HTTP {status}"


RETRYABLE_REST = frozenset({408, 429})


def rest_refusal(status: int | None, reason: str | None = None) -> str | None:
    """Why a REST API's answer (Phoenix's annotations) refuses a request for good: a 4xx but
    408 and 429. A 5xx, 408 or 429 may be taken later, so it is retried."""
    if status is None or status < 400 or status >= 500 or status in RETRYABLE_REST:
        return None
    return f"HTTP {status} {reason}".rstrip() if reason else f"HTTP {status}"


def grpc_refusal(code: str | None, details: str | None = None) -> str | None:
    """Why a gRPC status (its name) refuses an export for good; None when OK or retryable."""
    if code is None or code == "OK" or code in RETRYABLE_GRPC:
        return None
    return f"gRPC {code}: {details}" if details else f"gRPC {code}"


# Answers that say the endpoint does not take this signal at all (a traces-only backend's
# to logs and metrics), rather than that this export failed (401, 403, 400...).
_SIGNAL_NOT_TAKEN = ("HTTP 404", "HTTP 405", "gRPC UNIMPLEMENTED")


def refuses_the_signal(why: str) -> bool:
    """Whether a refusal says the endpoint takes no export of this signal (404, 405,
    UNIMPLEMENTED), not that this export failed."""
    return why.startswith(_SIGNAL_NOT_TAKEN)


class Refusals:
    """The last answer an exporter's requests got, noted per sending thread."""

    def __init__(self) -> None:
        self._local = threading.local()

    def note(self, refusal: str | None) -> None:
        """Record the answer of the request just made (None: success, retryable or none)."""
        self._local.last = refusal

    def take(self) -> str | None:
        """The refusal of this thread's last request, once."""
        last: str | None = getattr(self._local, "last", None)
        self._local.last = None
        return last


_watched: weakref.WeakKeyDictionary[Any, Refusals] = weakref.WeakKeyDictionary()


def watch(exporter: Any, refusals: Refusals) -> None:
    """Let ``take_refusal(exporter)`` read ``refusals``."""
    try:
        _watched[exporter] = refusals
    except TypeError:  # an object that cannot be weakly referenced: not watched
        return


def take_refusal(exporter: Any) -> str | None:
    """After a failed export of ``exporter`` on this thread: why the backend refused it for
    good, or None (a failure worth retrying, or an exporter nobody watches)."""
    try:
        refusals = _watched.get(exporter)
    except TypeError:
        return None
    return None if refusals is None else refusals.take()


def watch_grpc(exporter: Any) -> bool:
    """Watch the answers of an SDK OTLP/gRPC exporter through an interceptor on its channel.

    The exporter builds its stub from ``_stub`` whenever it (re)connects; the stub is
    built here on an intercepted channel instead. False (nothing changed) when the
    exporter is not shaped so.
    """
    import grpc

    stub = getattr(exporter, "_stub", None)
    channel = getattr(exporter, "_channel", None)
    if not callable(stub) or channel is None or not hasattr(exporter, "_client"):
        return False
    refusals = Refusals()

    class _Noting(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
        def intercept_unary_unary(
            self, continuation: Callable[..., Any], details: Any, request: Any
        ) -> Any:
            refusals.note(None)
            outcome = continuation(details, request)
            try:
                code = outcome.code()
                name = getattr(code, "name", None)
                refusals.note(grpc_refusal(name, outcome.details()))
            except Exception:  # an outcome without a status: retried as before
                refusals.note(None)
            return outcome

    def intercepted(raw: Any) -> Any:
        return stub(grpc.intercept_channel(raw, _Noting()))

    exporter._stub = intercepted
    exporter._client = intercepted(channel)
    watch(exporter, refusals)
    return True
