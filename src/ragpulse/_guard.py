"""One guard for ragpulse's internal errors: log them throttled, never raise them.

ragpulse runs inside other people's requests and on its own threads; a bug or a
broken hook there must neither reach the application nor flood its logs. Every
internal ``except`` goes through ``Guard``: the first failure of a kind is logged
with its traceback, repeats of the same message within ``window`` seconds are
counted instead of logged, and the count is reported with the next one let
through. This is the duplicate filter OpenTelemetry's SDK puts on its own export
loggers, with a count so nothing is silently lost.

    _guard = Guard(__name__)
    with _guard("the on_evaluation hook raised"):
        hook(record, evaluation)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import ClassVar

__all__ = ["DEFAULT_WINDOW", "Guard", "ThrottleFilter"]

DEFAULT_WINDOW = 60.0
"""Seconds within which a repeated message is counted rather than logged."""


class ThrottleFilter(logging.Filter):
    """Lets one record per (level, message template) through per ``window`` seconds.

    The records held back are counted; the next record of that kind let through
    says how many were suppressed. Thread-safe.
    """

    def __init__(self, window: float = DEFAULT_WINDOW, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self._window = window
        self._clock = clock
        self._lock = threading.Lock()
        # (level, template) -> (time let through, suppressed since)
        self._seen: dict[tuple[int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """True for the first record of its kind in the window; False (counted) for repeats."""
        key = (record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < self._window:
                self._seen[key] = (last[0], last[1] + 1)
                return False
            suppressed = 0 if last is None else last[1]
            self._seen[key] = (now, 0)
            if len(self._seen) > 1024:
                # Bounded: forget the oldest kinds (their counts are lost, not the records).
                for old in sorted(self._seen, key=lambda k: self._seen[k][0])[:512]:
                    del self._seen[old]
        if suppressed:
            record.msg = f"{record.msg} ({suppressed} more like this suppressed)"
        return True


class Guard:
    """Catches, throttles and logs internal errors on a ragpulse logger.

    ``with guard("what failed"):`` swallows any ``Exception`` raised in the block and
    logs ``what failed`` with the traceback, at most once per window per message.
    ``guard.warning(...)`` is the same throttled logger for expected trouble.
    """

    # One filter per logger name, however many guards share the logger.
    _filters: ClassVar[dict[str, ThrottleFilter]] = {}
    _filters_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, name: str, window: float = DEFAULT_WINDOW) -> None:
        self.logger = logging.getLogger(name)
        with Guard._filters_lock:
            if name not in Guard._filters:
                Guard._filters[name] = ThrottleFilter(window)
                self.logger.addFilter(Guard._filters[name])

    def __call__(self, what: str, *args: object) -> _Guarded:
        """Run the block; an ``Exception`` in it is logged as ``what % args`` and swallowed."""
        # A plain object, not a generator: the evaluation path enters several per result.
        return _Guarded(self.logger, what, args)

    def exception(self, what: str, *args: object) -> None:
        """Log the exception being handled, throttled (call from an ``except`` block)."""
        self.logger.exception(what, *args)

    def warning(self, what: str, *args: object, exc_info: bool = False) -> None:
        """A throttled warning."""
        self.logger.warning(what, *args, exc_info=exc_info)

    def debug(self, what: str, *args: object, exc_info: bool = False) -> None:
        """A debug line (not throttled: off by default)."""
        self.logger.debug(what, *args, exc_info=exc_info)


class _Guarded:
    """The context of one ``with guard(...)`` block."""

    __slots__ = ("args", "logger", "what")

    def __init__(self, logger: logging.Logger, what: str, args: tuple[object, ...]) -> None:
        self.logger = logger
        self.what = what
        self.args = args

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if kind is None or not issubclass(kind, Exception):
            return False
        self.logger.exception(self.what, *self.args, exc_info=value)
        return True
