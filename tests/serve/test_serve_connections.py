"""The server's connection limits, on uvicorn with a one-line ASGI app: a client that never finishes its request
headers is disconnected, and connections beyond the cap are closed at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from jaxseeker.serve.connections import ConnectionLimits, uvicorn_options

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


async def hello(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def serve(request) -> Iterator:
    servers = []

    def start(limits: ConnectionLimits) -> tuple[str, int]:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(hello, log_level="error", lifespan="off", **uvicorn_options(limits))
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        servers.append((server, thread, sock))
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.01)
        return sock.getsockname()

    yield start
    for server, thread, sock in servers:
        server.should_exit = True
        thread.join(30)
        sock.close()


def connect(address) -> socket.socket:
    conn = socket.create_connection(address)
    conn.settimeout(20)  # far beyond the header deadlines below: a connection left open fails the test
    return conn


def read_reply(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"ok"):
        chunk = conn.recv(4096)
        assert chunk, f"closed after {data!r}"
        data += chunk
    return data


@pytest.mark.parametrize("sent", [b"", b"GET / HT", b"GET / HTTP/1.1\r\nHost: x\r\n"])
def test_a_request_whose_headers_never_end_is_disconnected(serve, sent):
    address = serve(ConnectionLimits(header_timeout_s=0.5))
    with connect(address) as conn:
        conn.sendall(sent)
        assert conn.recv(4096) == b""  # closed by the server, not by the 20 s socket timeout


def test_the_next_request_on_a_kept_alive_connection_has_the_same_deadline(serve):
    address = serve(ConnectionLimits(header_timeout_s=0.5, keep_alive_s=30))
    with connect(address) as conn:
        conn.sendall(REQUEST)
        assert read_reply(conn).startswith(b"HTTP/1.1 200 OK")
        conn.sendall(b"GET / HTTP/1.1\r\n")
        assert conn.recv(4096) == b""


def test_connections_beyond_the_cap_are_closed_at_once(serve):
    address = serve(ConnectionLimits(header_timeout_s=60, max_connections=2))
    first, second = connect(address), connect(address)
    with first, second, connect(address) as third:
        assert third.recv(4096) == b""
        first.sendall(REQUEST)  # the two within the cap are served
        assert read_reply(first).startswith(b"HTTP/1.1 200 OK")
    for _ in range(100):  # once the server has seen them close (a moment later), a new connection is served
        with connect(address) as again:
            again.sendall(REQUEST)
            reply = again.recv(4096)
        if reply:
            break
        time.sleep(0.05)
    assert reply.startswith(b"HTTP/1.1 200 OK")
