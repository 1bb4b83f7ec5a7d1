"""The server's connection limits, on uvicorn with one-line ASGI apps: a client that never finishes its request
headers is disconnected, one whose body still drips in at the request deadline is answered 408 and disconnected,
and connections beyond the cap are closed at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvicorn

from jaxseeker.serve.connections import ConnectionLimits, uvicorn_options

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


async def hello(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def read_then_hello(scope, receive, send):
    """Read the whole body, as the server's routes do, then answer "ok"."""
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        more = message.get("more_body", False)
    await hello(scope, receive, send)


@pytest.fixture
def serve(request) -> Iterator:
    servers = []

    def start(limits: ConnectionLimits, app: Callable = hello) -> tuple[str, int]:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(app, log_level="error", lifespan="off", **uvicorn_options(limits))
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


def drip(conn: socket.socket, head: bytes) -> threading.Thread:
    """Send `head`, then one body byte every 0.02 s until the server closes the connection (or 20 s pass): each
    byte arrives long before any idle timeout, the body never ends."""

    def run() -> None:
        conn.sendall(head)
        for _ in range(1000):
            try:
                conn.sendall(b"a")
            except OSError:
                return
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def read_until_closed(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    return data


def test_bodies_that_drip_in_are_answered_408_at_the_request_deadline_and_free_their_slots(serve):
    limits = ConnectionLimits(header_timeout_s=60, request_timeout_s=0.5, max_connections=2)
    address = serve(limits, read_then_hello)
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    first, second = connect(address), connect(address)  # every slot the server allows
    with first, second:
        threads = [drip(first, head), drip(second, head)]
        replies = [read_until_closed(first), read_until_closed(second)]  # the 20 s socket timeout fails the test
        for thread in threads:
            thread.join(30)
    for reply in replies:
        assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert b'"code": "request_timeout"' in reply and b"within 0.5 s" in reply
    for _ in range(100):  # once the server has seen them close (a moment later), a new client is served
        with connect(address) as again:
            again.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            reply = again.recv(4096)
        if reply:
            break
        time.sleep(0.05)
    assert reply.startswith(b"HTTP/1.1 200 OK")
