"""The `Host` check: a request must name this server as a client on this machine, or one the operator allowed, does.

A web page can drive a server on localhost through DNS rebinding: its own name (attacker.example) first resolves to
the attacker's address, then to 127.0.0.1, and the browser, which sees one origin, lets the page read the answers.
Every such request still carries `Host: attacker.example`. So a request is answered only when its Host is
`localhost` or a name under `.localhost` (browsers resolve those to loopback themselves), a loopback address, the
address the connection arrived on (a client that dialled this server by its address), or a name given with
`--allowed-host` (`*`: any name, e.g. behind a proxy that checks it); anything else gets a 400 in OpenAI's
error shape. A request without Host (HTTP/1.0; a browser always sends one) passes.

Starlette's `TrustedHostMiddleware` takes a list of names and answers a plain-text 400; this one also admits the
address the connection arrived on, which no list fixed at start-up can name for a server bound to 0.0.0.0.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from jaxseeker.serve.protocol import APIError, show


def _host_name(header: str) -> str:
    """The name or address of a Host header, without its port or IPv6 brackets, lower case, no final dot."""
    if header.startswith("["):
        return header[1 : header.find("]")].lower() if "]" in header else header.lower()
    return header.rpartition(":")[0].lower().rstrip(".") if ":" in header else header.lower().rstrip(".")


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None
    return (ip.ipv4_mapped or ip) if isinstance(ip, ipaddress.IPv6Address) else ip


def host_allowed(header: str, local_address: str | None, allowed: Iterable[str] = ()) -> bool:
    """Whether a request with `Host: header` that arrived on `local_address` names this server (module docstring)."""
    name = _host_name(header)
    names = {a.lower().rstrip(".") for a in allowed}
    if "*" in names or name in names or name == "localhost" or name.endswith(".localhost"):
        return True
    ip = _address(name)
    if ip is None:
        return False
    return ip.is_loopback or (local_address is not None and ip == _address(local_address))


class HostCheck:
    """ASGI middleware: a 400 for an HTTP request whose Host `host_allowed` refuses, else the wrapped app."""

    def __init__(self, app: Any, allowed: Iterable[str] = ()):
        self.app, self.allowed = app, tuple(allowed)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Check the Host of an HTTP request, then pass it on."""
        if scope["type"] == "http":
            host = Headers(scope=scope).get("host")
            server = scope.get("server")
            if host is not None and not host_allowed(host, server[0] if server else None, self.allowed):
                error = APIError(
                    400,
                    f"The Host header {show(host)} does not name this server: reach it as localhost or by its "
                    "address, or start it with --allowed-host for that name.",
                    code="invalid_host",
                )
                await JSONResponse(error.body(), status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)
