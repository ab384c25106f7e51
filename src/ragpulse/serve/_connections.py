"""Connection deadlines of the OTLP/HTTP receiver: no client holds a connection by being slow.

uvicorn closes a keep-alive connection that stays idle after a response
(``timeout_keep_alive``, set from ``serve_idle_timeout``), but a connection that
sends nothing, or sends a request a few bytes at a time, it keeps for ever.
Here each request must arrive whole within ``serve_request_timeout`` of the
connection opening or of the previous response; otherwise the connection is
closed. The time the service takes to answer is not counted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class _DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on receiving each request."""

    request_timeout: float = 60.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.SEND_BODY and self.conn.their_state is not h11.IDLE:
            # The request is in (or the connection is ending): answering is not the client's time.
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.logger.info("closing a connection that did not send its request in time")
            self.transport.close()


def deadline_protocol(request_timeout: float) -> type[Any]:
    """The protocol class to give uvicorn (``Config(http=...)``) for ``request_timeout``."""
    return type("DeadlineH11Protocol", (_DeadlineProtocol,), {"request_timeout": request_timeout})
