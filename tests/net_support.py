"""A TCP port for a server another process starts later (the JAX coordinator, `jaxseeker serve`).

Such a port cannot be bound and held here until the server takes it, and a port the kernel handed out for
`bind(('…', 0))` and that was closed again is soon handed out again: to a loopback server or client socket of a test
running in parallel (pytest-xdist), which then holds it when the server comes to bind it. So the port is drawn at
random below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), which the kernel never hands
out on its own; only a server binding that very number explicitly could take it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


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


def unused_port() -> int:
    """A TCP port nobody has bound now, outside the kernel's ephemeral range where that leaves room."""
    low, high = _ephemeral_range()
    draw = random.SystemRandom()  # not the `random` module's generator: a test may have seeded it, in every worker
    ranges = [r for r in ((10_000, low - 1), (high + 1, 65_535)) if r[1] - r[0] >= 1_000]
    for _ in range(200):
        if not ranges:
            break
        start, end = draw.choice(ranges)
        port = draw.randint(start, end)
        if _free(port):
            return port
    with socket.socket() as s:  # no room outside the ephemeral range: any port free now
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
