"""A TCP port for a server another process starts later and that cannot report the port it bound (the JAX
coordinator). A server of ours binds port 0 and reports its port instead (`jaxseeker serve --port 0`, `Background`).

Such a port cannot be bound and held here until the server takes it, and a port the kernel handed out for
`bind(('…', 0))` and that was closed again is soon handed out again: to a loopback server or client socket of a test
running in parallel (pytest-xdist), which then holds it when the server comes to bind it. So the port is drawn at
random below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), which the kernel never hands
out on its own, and reserved: a lock file per port, held by this process until it exits, keeps every other test
process (another xdist worker, another session) from drawing the same one. What is left is a program binding that
very number explicitly; the server then fails with "address already in use".
"""

from __future__ import annotations

import fcntl
import random
import socket
import tempfile
from pathlib import Path
from typing import IO

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_RESERVED: list[IO] = []  # the lock files this process holds; closed (and unlocked) when it exits


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(v) for v in _RANGE.read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _free(port: int) -> bool:
    """Whether nothing is bound to `port` on any address, IPv4 or IPv6 (the JAX coordinator binds [::]:port)."""
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        address: tuple = ("::", port)
    except OSError:  # no IPv6
        sock, address = socket.socket(socket.AF_INET, socket.SOCK_STREAM), ("", port)
    with sock:
        try:
            sock.bind(address)
        except OSError:
            return False
    return True


def _reserve(port: int) -> bool:
    """Lock `port` for this process (True), unless another test process holds it (False)."""
    path = Path(tempfile.gettempdir()) / "jaxseeker-test-ports" / str(port)
    path.parent.mkdir(exist_ok=True)
    lock = path.open("a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return False
    _RESERVED.append(lock)
    return True


def unused_port() -> int:
    """A TCP port nobody has bound now and no other test process will be given, outside the kernel's ephemeral
    range where that leaves room (else anywhere above 10000)."""
    low, high = _ephemeral_range()
    draw = random.SystemRandom()  # not the `random` module's generator: a test may have seeded it, in every worker
    ranges = [r for r in ((10_000, low - 1), (high + 1, 65_535)) if r[1] - r[0] >= 1_000] or [(10_000, 65_535)]
    for _ in range(200):
        start, end = draw.choice(ranges)
        port = draw.randint(start, end)
        if _free(port) and _reserve(port):
            return port
    raise RuntimeError(f"no free TCP port found in {ranges} after 200 draws")
