"""A rotel sink that can be stopped and started again on the same ports: a backend restart."""

from __future__ import annotations

import subprocess
import time

from ._process import stop_process
from .rotel_sink import POLL_INTERVAL_S, STARTUP_TIMEOUT_S, RotelSink, _port_open


class RestartableSink(RotelSink):
    """``RotelSink`` plus ``pause()`` (the backend goes away) and ``resume()`` (it is back).

    What arrived before the pause stays readable: the recording files are kept and appended to.
    """

    def pause(self) -> None:
        """Stop rotel, keep its ports and recordings; exporters now see connection errors."""
        process, self._process = self._process, None
        stop_process(process, timeout=5)

    def resume(self) -> None:
        """Start rotel again on the same ports; return once both receivers listen."""
        output = (self._workdir / "rotel.out").open("ab")
        self._process = subprocess.Popen(
            self.command(),
            env=self._environment(),
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        output.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"rotel exited with {self._process.returncode}: {self.output()}")
            if _port_open(self.grpc_port) and _port_open(self.http_port):
                return
            time.sleep(POLL_INTERVAL_S)
        raise RuntimeError(f"rotel did not listen again within {STARTUP_TIMEOUT_S}s")
