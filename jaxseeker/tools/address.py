"""The address guard of the web back-ends: a URL may name only public hosts, however it is spelled or redirected.

A URL is refused when it is not http(s), when the WHATWG URL standard (what browsers and page readers follow,
through `ada_url`) and `urllib` parse it to different hosts (`http://127.0.0.1\\@example.com/` is 127.0.0.1 to the
one and example.com to the other), or when its host resolves to an address that is not globally routable:
loopback, private, link-local, carrier-grade NAT 100.64.0.0/10 (cloud metadata at 100.100.100.200), multicast,
IPv6 site-local fec0::/10, 6to4 2002::/16, IPv4-compatible ::/96, and NAT64 64:ff9b::/96 or IPv4-mapped addresses
that embed a refused IPv4 address. `redirect_guard` applies the same check to every hop an httpx client follows.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from collections.abc import Callable

import ada_url
import httpx

from jaxseeker.tools.base import ToolError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_REFUSED_V6 = tuple(ipaddress.ip_network(n) for n in ("2002::/16", "fec0::/10", "::/96"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def refused_address(ip: Address) -> bool:
    """Whether `ip` is not a public unicast address (see the module's list), itself or through an embedded IPv4."""
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in net for net in _REFUSED_V6):
            return True
        embedded = ip.ipv4_mapped or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
        if embedded is not None and refused_address(embedded):
            return True
    return not ip.is_global or ip.is_multicast


def _as_address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def url_host(url: str) -> str:
    """The host of `url` as the WHATWG standard reads it; ToolError when it has none or `urllib` reads another."""
    try:
        parts = urllib.parse.urlsplit(url)
        plain = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError on a port out of range
        if not plain:
            raise ValueError("no host")
        whatwg = ada_url.URL(url).hostname
    except ValueError as exc:
        raise ToolError(f"refused {url!r}: {exc}") from None
    same = _as_address(whatwg) == _as_address(plain) if _as_address(whatwg) else whatwg.lower() == plain.lower()
    if not same:
        raise ToolError(f"refused {url!r}: its host is {whatwg!r} to a browser and {plain!r} to urllib")
    return whatwg.strip("[]")


def _check_scheme(url: str) -> None:
    scheme = url.partition(":")[0].lower() if ":" in url else ""
    if scheme not in ("http", "https"):
        raise ToolError(f"refused {url!r}: scheme {scheme or '(none)'!r} is not http or https")


def check_url(url: str, *, allow_private: bool = False) -> None:
    """ToolError unless `url` is http(s), parses to one host, and that host resolves only to public addresses (or
    `allow_private`)."""
    url = url.strip()
    _check_scheme(url)
    host = url_host(url)
    if allow_private:
        return
    address = _as_address(host)
    if address is not None:
        addresses = [address]
    elif host == "localhost" or host.endswith(".localhost"):
        raise ToolError(f"refused {url!r}: host {host!r} is loopback")
    else:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ToolError(f"cannot resolve host {host!r} of {url!r}: {exc}") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    for ip in addresses:
        if refused_address(ip):
            raise ToolError(f"refused {url!r}: host {host!r} is not a public address ({ip})")


def checked_url(url: str, *, allow_private: bool = False) -> str:
    """`url` as the WHATWG standard writes it (dot segments resolved: "http://h/../../x" is "http://h/x", host lower
    case, spaces percent-encoded), passed by `check_url`: the one URL to fetch. ToolError for a URL holding a
    control character (the standard would drop a tab or newline unseen) or on which the parsers disagree."""
    url = url.strip()
    bad = next((c for c in url if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ToolError(f"refused {url!r}: it holds the control character {bad!r}")
    _check_scheme(url)
    url_host(url)  # the browser's and urllib's readings of this spelling agree
    href = ada_url.URL(url).href
    check_url(href, allow_private=allow_private)
    return href


def redirect_guard(service_url: str, *, allow_private: bool = False) -> Callable[[httpx.Request], None]:
    """An httpx `request` event hook: every request outside `service_url` (the configured API, which may be local),
    i.e. every redirect hop elsewhere, must pass `check_url`, else ToolError."""
    prefix = service_url.rstrip("/") + "/"

    def guard(request: httpx.Request) -> None:
        url = str(request.url)
        if not (url + "/").startswith(prefix):
            check_url(url, allow_private=allow_private)

    return guard
