"""Limits on the server's connections: deadlines for a request's headers and for the whole request, and a cap on
open connections.

uvicorn (0.55) times only idle keep-alive connections: a client that connects and sends nothing, or half a request
line, or headers a byte a minute, or a body a byte a second, holds its socket for ever, and enough of them take
every connection the server allows. `GuardedH11Protocol` closes a connection whose request headers are not
complete `header_timeout_s` after its first byte (or after the connection opened, or after the previous response),
answers 408 and closes one whose request, body included, is not complete `request_timeout_s` after that same start,
and closes at once a connection beyond `max_connections` open ones.

The 408 is followed by a lingering close (RFC 9112 §9.6): the server ends its side, then reads and drops what the
client still sends for `LINGER_S` (or until the client closes). A socket closed with unread bytes answers them with a
reset, which can reach the client before it has read the 408.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

LINGER_S = 1.0  # how long a connection answered 408 still reads (and drops) the client's bytes before it closes


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """How long a request's headers, and the whole request, may take to arrive; how long an idle keep-alive
    connection lives; how many may be open."""

    header_timeout_s: float = 10.0
    request_timeout_s: float = 30.0  # headers and body; the answer may take as long as the completion does
    keep_alive_s: int = 5
    max_connections: int = 256

    def __post_init__(self) -> None:
        if (
            self.header_timeout_s <= 0
            or self.request_timeout_s <= 0
            or self.keep_alive_s < 1
            or self.max_connections < 1
        ):
            raise ValueError(
                "ConnectionLimits: needs header_timeout_s > 0, request_timeout_s > 0, keep_alive_s >= 1, "
                f"max_connections >= 1; got {self}"
            )


def _timeout_reply(seconds: float) -> bytes:
    """A whole HTTP 408 response in OpenAI's error shape, written as is before the connection closes."""
    error = {
        "message": f"The request was not received in full within {seconds:g} s.",
        "type": "invalid_request_error",
        "param": None,
        "code": "request_timeout",
    }
    body = json.dumps({"error": error}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header and a request deadline and a connection cap (see the module docstring)."""

    limits: ConnectionLimits = ConnectionLimits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept, unless `max_connections` are open already; the deadlines start now."""
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._request_timer: asyncio.TimerHandle | None = None
        self._lingering = False  # answered 408: the client's bytes are read and dropped until the close
        if len(self.connections) > self.limits.max_connections:
            transport.close()
            return
        self._arm_timers()

    def data_received(self, data: bytes) -> None:
        """Bytes of a request: the header deadline runs until its headers are whole (a request cycle has started),
        the request deadline until its body is."""
        if self._lingering:
            return
        if self._between_requests() and self._header_timer is None and self._request_timer is None:
            self._arm_timers()
        super().data_received(data)
        if not self._between_requests():
            self._cancel_header_timer()
        if self.cycle is not None and not self.cycle.more_body:
            self._cancel_request_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadlines, then uvicorn's clean-up."""
        self._cancel_header_timer()
        self._cancel_request_timer()
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm_timers(self) -> None:
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)
        self._request_timer = self.loop.call_later(self.limits.request_timeout_s, self._request_too_slow)

    def _cancel_header_timer(self) -> None:
        if getattr(self, "_header_timer", None) is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cancel_request_timer(self) -> None:
        if getattr(self, "_request_timer", None) is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._between_requests() and not self.transport.is_closing():
            self.transport.close()

    def _request_too_slow(self) -> None:
        """The deadline of the whole request: a 408 unless the app has begun its answer, then the connection closes
        (the app reading the body sees the client leave)."""
        self._request_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_started and self.transport.can_write_eof():
            self.transport.write(_timeout_reply(self.limits.request_timeout_s))
            self.transport.write_eof()
            self._lingering = True
            self._request_timer = self.loop.call_later(LINGER_S, self.transport.close)  # cancelled if the client leaves
            return
        self.transport.close()


def uvicorn_options(limits: ConnectionLimits) -> dict[str, Any]:
    """The `uvicorn.Config` / `uvicorn.run` keywords that apply `limits`."""
    protocol = type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})
    return {"http": protocol, "timeout_keep_alive": limits.keep_alive_s}
