"""What every server harness here does with its child process: stop it, read its log."""

from __future__ import annotations

import contextlib
import socket
import subprocess
from pathlib import Path


def stop_process(process: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


def log_tail(path: Path, chars: int = 4000) -> str:
    """The end of a log file (for failure messages); empty when there is none."""
    if not path.exists():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")[-chars:]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """``count`` different TCP ports on 127.0.0.1 that nothing listens on right now (each
    held until all are picked: one after another, the same port can come back)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
