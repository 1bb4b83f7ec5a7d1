"""`tools.http.request`: its deadline holds against a server that trickles its reply."""

import socket
import threading
import time

import httpx
import pytest

from jaxseeker.tools.http import HttpConfig, HttpError, request


@pytest.fixture
def trickling_url():
    """A loopback server that answers the status line, then one header byte every 0.05 s (for 10 s at most):
    every read succeeds in time, the reply never completes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(200):
                try:
                    conn.sendall(b"a")
                except OSError:
                    return
                time.sleep(0.05)

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/"
    server.close()


def test_a_trickled_reply_ends_at_the_deadline(trickling_url):
    config = HttpConfig(timeout_s=0.5, max_retries=0)
    with httpx.Client() as client, pytest.raises(HttpError) as caught:
        request(client, "GET", trickling_url, config)
    assert str(caught.value) == f"GET {trickling_url} failed after 1 attempt: timed out after 0.5 s"
