"""The judge process's side of ``ProcessJudge``: receive records, send evaluations.

Started by ``ProcessJudge`` as ``python -c`` with two inherited pipe descriptors;
it imports nothing of the application (no ``__main__`` re-run, unlike
``multiprocessing``'s spawn). The first message is the pickled judge; each next
one is ``(record, metrics)`` and is answered with one ``Evaluation``. End of input
(the parent closed the pipe or died) ends the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from multiprocessing.connection import Connection

from ragpulse import errors
from ragpulse.judges.base import Judge, call_judge, failed


def main(read_fd: int, write_fd: int, nice: int) -> None:
    """Serve evaluations until the parent closes the pipe."""
    # Ctrl-C in a terminal reaches the whole process group: the parent decides when we end.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        # Evaluation is background work: the application's own processes go first.
        with contextlib.suppress(OSError):
            os.nice(nice)
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    loop = asyncio.new_event_loop()
    try:
        judge: Judge = inbox.recv()
        outbox.send("ready")
        while True:
            try:
                record, metrics = inbox.recv()
            except EOFError:
                return
            result = loop.run_until_complete(call_judge(judge, record, metrics))
            try:
                outbox.send(result)
            except Exception as exc:  # an Evaluation a third-party judge filled oddly
                outbox.send(failed(judge, errors.INVALID_RESULT, f"not picklable: {exc}"))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return
    finally:
        loop.close()
