"""Credentials kept out of everything ragpulse writes: the registry of secrets and the scrubbing.

Anything shaped like a credential (the configured API keys, a bearer token, a key of a
known provider's shape) is replaced by ``[redacted secret]`` in every text and log message
that leaves the process, whatever the content policy says. Registering happens wherever a
key is given (a judge's ``api_key``); log records are scrubbed by a record factory installed
at import.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable

__all__ = ["REDACTED_SECRET", "known_secrets", "register_secret", "scrub_secrets", "scrubber"]


REDACTED_SECRET = "[redacted secret]"
"""What a credential found in a message is replaced with."""


# Environment variables whose values are credentials ragpulse or its judges may use.
SECRET_ENVIRONMENT_VARIABLES = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "PHOENIX_API_KEY",
    "RAGPULSE_JUDGE_API_KEY",
)


# Shorter values are not scrubbed as literals: replacing every "test" in a message would
# garble it and protect nothing a pattern below does not already catch.
_MIN_SECRET_LENGTH = 8


# Credential shapes, in one pattern so a text is scanned once: an Authorization scheme and
# its token, an OpenAI-style key (also the masked sk-abc1***wxyz of its 401 message), and
# key=value or "key": "value" for the usual credential names (with a scheme, if any).
_SHAPES = re.compile(
    r"(?i)\b(?P<name>(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|"
    r"authorization|x-api-key)[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic)\s+)?)"
    r"[^\s\"',;&)}\]]{4,}"
    r"|\b(?P<scheme>bearer|basic)\s+[A-Za-z0-9._~+/=*-]{6,}"
    r"|\bsk-[A-Za-z0-9_*-]{6,}"
)


def _shape_replacement(match: re.Match[str]) -> str:
    if match.group("name"):
        return match.group("name") + REDACTED_SECRET
    if match.group("scheme"):
        return f"{match.group('scheme')} {REDACTED_SECRET}"
    return REDACTED_SECRET


_registered: set[str] = set()


_registered_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a credential (an API key given in code) so it is scrubbed from messages."""
    if value and len(value) >= _MIN_SECRET_LENGTH:
        with _registered_lock:
            _registered.add(value)


def _known_secrets(extra: Iterable[str]) -> tuple[str, ...]:
    with _registered_lock:
        found = set(_registered)
    for name in SECRET_ENVIRONMENT_VARIABLES:
        value = os.environ.get(name)
        if value:
            found.add(value)
    found.update(extra)
    # Longest first, so a key that contains another is replaced whole.
    return tuple(sorted((s for s in found if len(s) >= _MIN_SECRET_LENGTH), key=len, reverse=True))


_known: tuple[tuple[object, ...], tuple[str, ...]] = ((), ())


def known_secrets() -> tuple[str, ...]:
    """The credentials scrubbed from messages now: registered keys and the environment's.

    A judge's process that scrubs an evaluation's texts is given these (its own
    environment is a copy from when it started, and registrations happen here).
    Asked once per evaluation, so the answer is kept until either source changes.
    """
    global _known
    # Registrations only add: their count tells a change.
    key = (len(_registered), *(os.environ.get(name) for name in SECRET_ENVIRONMENT_VARIABLES))
    seen, secrets = _known
    if key != seen:
        secrets = _known_secrets(())
        _known = (key, secrets)
    return secrets


@functools.lru_cache(maxsize=16)
def _literals(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(map(re.escape, secrets))) if secrets else None


def scrubber(extra: Iterable[str] = ()) -> Callable[[str], str]:
    """A scrub function for the credentials known now (read once, used for many texts)."""
    literals = _literals(_known_secrets(extra))

    def scrub(text: str) -> str:
        if literals is not None:
            text = literals.sub(REDACTED_SECRET, text)
        return _SHAPES.sub(_shape_replacement, text)

    return scrub


def scrub_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials replaced by ``[redacted secret]``.

    Replaced: the ``secrets`` given, keys registered with ``register_secret``, the
    values of ``OPENAI_API_KEY``, ``AZURE_OPENAI_API_KEY``, ``PHOENIX_API_KEY`` and
    ``RAGPULSE_JUDGE_API_KEY``, and anything shaped like a bearer token, an ``sk-…`` key
    or an ``api_key=…`` pair.
    """
    return scrubber(secrets)(text)


class _ScrubbedLogRecord(logging.LogRecord):
    """A ragpulse log record whose message is scrubbed when it is rendered.

    The template and arguments stay as logged, so filters that key on the template
    (the throttle of ``ragpulse._guard``) still see one kind per template.
    """

    def getMessage(self) -> str:
        return scrub_secrets(super().getMessage())

    # A data descriptor wins over the instance attribute LogRecord.__init__ set, so every
    # Formatter reads a scrubbed traceback, rendered only when a handler formats it (a
    # record the throttle drops costs no traceback).
    @property  # type: ignore[override]
    def exc_text(self) -> str | None:
        text: str | None = self.__dict__.get("exc_text")
        if text is None and self.exc_info and self.exc_info[0] is not None:
            text = self.__dict__["exc_text"] = scrub_secrets(
                _TRACEBACKS.formatException(self.exc_info)
            )
        return text

    @exc_text.setter
    def exc_text(self, value: str | None) -> None:
        self.__dict__["exc_text"] = None if value is None else scrub_secrets(value)


_TRACEBACKS = logging.Formatter()


class _ScrubbedMessage:
    """``getMessage`` for a record of another class (a custom record factory's)."""

    def __init__(self, record: logging.LogRecord) -> None:
        self.record = record

    def __call__(self) -> str:
        return scrub_secrets(type(self.record).getMessage(self.record))


class _ScrubbingRecordFactory:
    """Wraps the log record factory: ragpulse's records leave with credentials scrubbed.

    A record factory, not a filter: filters attach to one logger each, and an exception
    message from a judge's HTTP client can be logged by any ragpulse module.
    """

    def __init__(self, previous: Callable[..., logging.LogRecord]) -> None:
        self.previous = previous

    def __call__(self, *args: object, **kwargs: object) -> logging.LogRecord:
        record: logging.LogRecord = self.previous(*args, **kwargs)
        if not record.name.startswith("ragpulse"):
            return record
        try:
            if type(record) is logging.LogRecord:
                record.__class__ = _ScrubbedLogRecord
                return record
            record.getMessage = _ScrubbedMessage(record)  # type: ignore[method-assign]
            if record.exc_info and record.exc_info[0] is not None:
                # Rendered now, scrubbed, and cached where every Formatter looks first.
                record.exc_text = scrub_secrets(_TRACEBACKS.formatException(record.exc_info))
        except Exception:  # a log line must never fail the code that writes it
            pass
        return record


def _install_log_scrubbing() -> None:
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _ScrubbingRecordFactory):
        logging.setLogRecordFactory(_ScrubbingRecordFactory(factory))


_install_log_scrubbing()
