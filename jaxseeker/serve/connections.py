"""Limits on the server's connections: a deadline for a request's headers, and a cap on open connections.

uvicorn (0.55) times only idle keep-alive connections: a client that connects and sends nothing, or half a request
line, or headers a byte a minute, holds its socket for ever, and enough of them exhaust the server's file
descriptors. `GuardedH11Protocol` closes a connection whose request headers are not complete `header_timeout_s`
after its first byte (or after the connection opened, or after the previous response), and closes at once a
connection beyond `max_connections` open ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """How long a request's headers may take, how long an idle keep-alive connection lives, how many may be open."""

    header_timeout_s: float = 10.0
    keep_alive_s: int = 5
    max_connections: int = 256

    def __post_init__(self) -> None:
        if self.header_timeout_s <= 0 or self.keep_alive_s < 1 or self.max_connections < 1:
            raise ValueError(
                f"ConnectionLimits: needs header_timeout_s > 0, keep_alive_s >= 1, max_connections >= 1; got {self}"
            )


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (see the module docstring)."""

    limits: ConnectionLimits = ConnectionLimits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept, unless `max_connections` are open already; the header deadline starts now."""
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        if len(self.connections) > self.limits.max_connections:
            transport.close()
            return
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        """Bytes of a request: the deadline runs until its headers are whole (a request cycle has started)."""
        if self._between_requests() and self._header_timer is None:
            self._arm_header_timer()
        super().data_received(data)
        if not self._between_requests():
            self._cancel_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadline, then uvicorn's clean-up."""
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if getattr(self, "_header_timer", None) is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._between_requests() and not self.transport.is_closing():
            self.transport.close()


def uvicorn_options(limits: ConnectionLimits) -> dict[str, Any]:
    """The `uvicorn.Config` / `uvicorn.run` keywords that apply `limits`."""
    protocol = type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})
    return {"http": protocol, "timeout_keep_alive": limits.keep_alive_s}
