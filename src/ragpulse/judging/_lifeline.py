"""A judge process ends with the process that started it, whatever that process did.

A judge process reads its records from a pipe and ends at its end of input; but while it is
busy (a user's metric that hangs, a wait on a metric's own process) it reads nothing, and a
parent that is killed, exits without ``shutdown()`` or ends it with ``SIGKILL`` (a timeout)
would leave it running, and its own children with it, for good. So each judge process
watches its parent:

- on Linux, when it was started from the parent's main thread, the kernel sends it
  ``SIGKILL`` the moment the parent ends (``PR_SET_PDEATHSIG``). Only from the main thread:
  the kernel counts the *thread* that started the process as its parent, and a thread that
  ends (a worker's, a pool's) would take a healthy judge process with it;
- everywhere, a daemon thread looks at the parent's pid twice a second and ends the process
  once it changed (the parent ended and the process was handed to ``init`` or a subreaper).

Both check the parent once they are in place: a parent that ended before is seen at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ["LOOK_EVERY", "die_with_parent"]

LOOK_EVERY = 0.5
"""Seconds between two looks at the parent's pid."""

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int, *, kernel_signal: bool) -> None:
    """End this process when ``parent`` ends; ``kernel_signal``: ask Linux to do it too."""
    if kernel_signal and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)  # the parent ended before this process could watch it
    threading.Thread(
        target=_watch, args=(parent,), name="ragpulse-parent-watch", daemon=True
    ).start()


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(LOOK_EVERY)
    # No cleanup to wait for: the parent that would read our answers is gone.
    os._exit(0)
