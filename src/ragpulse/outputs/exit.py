"""What happens to ragpulse's buffers when the process ends.

- Normal exit (the script returns, ``sys.exit``): one ``atexit`` hook shuts the live
  handle down within ``shutdown_timeout`` (default 5 s): evaluations in flight get
  half of it, then held spans go out (``pending`` where no score came) and every
  queue is sent. The SDK's own exit hooks, which wait up to 30 s each, are off for
  the providers ragpulse builds.
- SIGTERM (by default; ``handle_sigterm=False`` or ``RAGPULSE_HANDLE_SIGTERM=0`` opts
  out): when the application installed its own handler first (a server's graceful
  shutdown), ragpulse flushes within the grace and calls it; the exit hook shuts down
  later, when the server has finished. With no handler of the application's, ragpulse
  shuts down within the grace and then re-raises SIGTERM with its default action, so
  the process ends as SIGTERM would have ended it (exit status 128 + 15 in a shell).
  An ignored SIGTERM stays ignored (after a flush). The handler is installed only from
  the main thread (the only one Python lets install it), and a handler the application
  installs after ragpulse's is never replaced: ragpulse says so in its log instead.
- SIGKILL, ``os._exit`` and crashes of the interpreter lose what is buffered.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

from ragpulse.settings import Settings

_logger = logging.getLogger("ragpulse.exit")


class _Shutdownable(Protocol):
    def force_flush(self, timeout: float = ...) -> bool: ...

    def shutdown(self, timeout: float | None = ...) -> None: ...


_live: _Shutdownable | None = None
_grace = Settings.shutdown_timeout
_sigterm_installed = False
_previous: Any = None


def set_live(handle: _Shutdownable | None, grace: float) -> None:
    """The handle that exit and SIGTERM act on (the latest ``configure()``)."""
    global _live, _grace
    _live, _grace = handle, grace
    # Registered again each time, so that it runs before the exit hooks of what this
    # configure() built (interpreters run them last-registered first): one grace for all.
    atexit.unregister(_at_exit)
    atexit.register(_at_exit)


def live() -> _Shutdownable | None:
    """The live handle, if any."""
    return _live


def clear_live(handle: _Shutdownable) -> None:
    """Forget ``handle`` if it is the live one (it was shut down)."""
    global _live
    if _live is handle:
        _live = None


def _at_exit() -> None:
    # No thread here: interpreters refuse new threads at shutdown, and no lock of ours can
    # be held by interrupted code. ``shutdown`` bounds itself by the grace.
    handle = _live
    if handle is not None:
        try:
            handle.shutdown(_grace)
        except Exception:
            _logger.warning("ragpulse: shutdown at exit failed", exc_info=True)


def install_sigterm_handler() -> bool:
    """Flush (or shut down) the live handle on SIGTERM, then chain the previous handler.

    True when ragpulse's handler is in place. Only the main thread may install signal
    handlers; from another thread this logs and returns False. A handler the application
    installed after ragpulse's stays: it is not replaced, and the log says so.
    """
    global _sigterm_installed, _previous
    if threading.current_thread() is not threading.main_thread():
        _logger.info("ragpulse: configure() ran outside the main thread; no SIGTERM flush")
        return False
    try:
        current = signal.getsignal(signal.SIGTERM)
        if _sigterm_installed:
            if current is _on_sigterm:
                return True
            _logger.warning(
                "ragpulse: the application replaced ragpulse's SIGTERM handler; it is kept, "
                "and spans are flushed at exit only if that handler lets the process exit"
            )
            return False
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError) as exc:  # no SIGTERM on this platform
        _logger.warning("ragpulse: could not install the SIGTERM flush (%s)", exc)
        return False
    _previous = current
    _sigterm_installed = True
    return True


def uninstall_sigterm_handler() -> None:
    """Put back the handler ragpulse chained to, if ragpulse's is still the one in place."""
    global _sigterm_installed, _previous
    if not _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not _on_sigterm:
            return  # the application's own handler came after ours: it stays as it is
        signal.signal(signal.SIGTERM, _previous if _previous is not None else signal.SIG_DFL)
    except (ValueError, OSError):
        return
    _previous = None
    _sigterm_installed = False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    handle = _live
    previous = _previous
    if handle is not None:
        if callable(previous):
            # A server's own handler starts its graceful shutdown; our exit hook runs after it.
            _bounded(lambda: handle.force_flush(_grace), _grace)
        else:
            _bounded(lambda: handle.shutdown(_grace), _grace)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:
        # The default action: end the process as SIGTERM would have, now that we flushed.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _bounded(work: Callable[[], object], grace: float) -> None:
    # A signal handler runs on the main thread between two bytecodes: it may have
    # interrupted code that holds one of our locks. The work runs on its own thread, and
    # the main thread waits for it no longer than the grace (plus a little for the join).
    def run() -> None:
        try:
            work()
        except Exception:
            _logger.warning("ragpulse: flushing at exit failed", exc_info=True)

    worker = threading.Thread(target=run, name="ragpulse-exit", daemon=True)
    worker.start()
    worker.join(grace + 1.0)
