"""A real HTTP server on loopback whose replies each test scripts (Serper, Jina reader and OpenAI chat stand-ins)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Every 4-character piece holds a letter: none can be part of a port number or an address in a message's URL.
SECRET = "sk-test-5ecret-Key-k0e1y2q3w4z5x6v7"


@dataclasses.dataclass(frozen=True)
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The request body as JSON."""
        return json.loads(self.body)


@dataclasses.dataclass(frozen=True)
class Reply:
    """What the server answers: status, body (bytes, str or a JSON-able object), headers, and a delay before it."""

    status: int = 200
    body: Any = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1; `route(request) -> Reply` decides every answer."""

    def __init__(self) -> None:
        self.route: Callable[[Request], Reply] = lambda request: Reply(404, "no route")
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)
                )
                with server._lock:
                    server.requests.append(request)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server.route(request)
                    time.sleep(reply.delay_s)
                finally:
                    # Counted out before the reply is written: once the client has read it, it may send the next
                    # request, and that one must not overlap this one in the count.
                    with server._lock:
                        server.in_flight -= 1
                try:
                    body = reply.body
                    if not isinstance(body, (bytes, str)):
                        body = json.dumps(body)
                    data = body.encode() if isinstance(body, str) else body
                    self.send_response(reply.status)
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers:
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
