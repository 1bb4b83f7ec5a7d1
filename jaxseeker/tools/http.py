"""One HTTP request with bounded retries (capped backoff), a byte cap and a deadline per attempt that holds however
slowly the server answers: what every HTTP back-end sends (search, visit, the LLM client, synthesis's solvers)."""

from __future__ import annotations

import dataclasses
import email.utils
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from jaxseeker.tools.keys import cut, holds_key, redact

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Headers that carry a credential: dropped from a redirect to another origin, with any header holding a key read by
# `keys.read_key` (whatever the service calls it).
KEY_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"})


@dataclasses.dataclass(frozen=True)
class HttpConfig:
    """Timeouts, retries and size limits of an HTTP back-end."""

    timeout_s: float = 30.0  # the deadline of one attempt, headers and body; a call lasts at most (max_retries
    # + 1) * timeout_s plus the backoffs
    max_retries: int = 2  # further attempts after the first, on 429 / 5xx / connection or read errors / timeouts
    backoff_s: float = 0.5  # first wait; doubles each retry
    max_backoff_s: float = 8.0  # the longest wait between retries
    max_bytes: int = 2_000_000  # longer bodies are cut here (the reply says so)
    max_redirects: int = 3  # redirects followed (each hop passes the client's address guard); 0: a 3xx is an error

    def __post_init__(self):
        if (
            self.timeout_s <= 0
            or self.max_retries < 0
            or self.backoff_s < 0
            or self.max_backoff_s < 0
            or self.max_bytes < 1
            or self.max_redirects < 0
        ):
            raise ValueError(
                f"HttpConfig: needs timeout_s > 0, max_retries >= 0, backoff_s and max_backoff_s >= 0, "
                f"max_bytes >= 1, max_redirects >= 0; got {self}"
            )


def client(guard: Callable[[httpx.Request], None] | None = None) -> httpx.Client:
    """An httpx client that calls `guard` (which raises to refuse) on every request it sends; `request` follows the
    redirects itself (up to `HttpConfig.max_redirects`), so every hop, the first included, passes the guard."""
    hooks = {"request": [guard]} if guard is not None else {}
    return httpx.Client(follow_redirects=False, event_hooks=hooks)


class HttpError(Exception):
    """A request that failed after its retries; the message names the method, URL and status (never a key)."""

    def __init__(self, message: str, *, url: str, status: int | None = None):
        super().__init__(redact(message))
        self.url = url
        self.status = status


@dataclasses.dataclass(frozen=True)
class HttpReply:
    """A successful (2xx) reply: status, body (at most `max_bytes`) and whether it was cut."""

    status: int
    body: bytes
    truncated: bool

    def text(self) -> str:
        """The body decoded as UTF-8 (undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self, url: str) -> Any:
        """The body parsed as JSON; HttpError naming `url` when it is not JSON."""
        try:
            return json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            excerpt = cut(self.text(), 120)
            raise HttpError(
                f"malformed JSON from {url} (HTTP {self.status}): {exc}; body starts {excerpt!r}",
                url=url,
                status=self.status,
            ) from exc


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date; anything else is ignored (the usual backoff applies)
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _read_capped(response: httpx.Response, max_bytes: int, deadline: float, url: str) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= max_bytes:
            return b"".join(chunks)[:max_bytes], True
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout(f"body of {url} still arriving at the deadline")
    return b"".join(chunks), False


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


def _dot_segment(path: str) -> bool:
    """Whether `path` holds a "." or ".." segment, literal or percent-encoded (a WHATWG server decodes "%2e")."""
    return any(part.lower().replace("%2e", ".") in (".", "..") for part in path.split("/"))


def _exact_request(client: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Request:
    """The request `client` would send for `url`, refused (InvalidURL) unless it asks for exactly the path and query
    written in `url`: the client resolves dot segments ("/a/../b" is sent as "/b"), a server decodes "%2e%2e" into
    them, and either would reach another path than the one checked."""
    parts = urllib.parse.urlsplit(url)
    written = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request = client.build_request(method, url, **kwargs)
    sent = request.url.raw_path.decode("ascii")
    if _dot_segment(parts.path) or sent != written:
        raise httpx.InvalidURL(f"the path {written!r} has a dot segment or is not sent as written ({sent!r})")
    return request


def _without_keys(hop: httpx.Request, origin: tuple[str, str, int | None]) -> httpx.Request:
    """A redirect's request as httpx builds it, less every key header once it leaves `origin`, the first request's
    scheme, host and port (httpx drops only Authorization, and keeps it from http to https)."""
    if _origin(hop.url) != origin:
        for name in [k for k, v in hop.headers.items() if k.lower() in KEY_HEADERS or holds_key(v)]:
            del hop.headers[name]
    return hop


def _attempt(
    client: httpx.Client, method: str, url: str, config: HttpConfig, **kwargs: Any
) -> tuple[int, bytes, bool, httpx.Headers]:
    deadline = time.monotonic() + config.timeout_s
    request = _exact_request(client, method, url, timeout=config.timeout_s, **kwargs)
    origin, hops = _origin(request.url), 0
    while True:
        response = client.send(request, stream=True, follow_redirects=False)
        try:
            if response.next_request is None or config.max_redirects == 0:  # 0: the 3xx is the reply
                limit = config.max_bytes if 200 <= response.status_code < 300 else 2000
                body, truncated = _read_capped(response, limit, deadline, url)
                return response.status_code, body, truncated, response.headers
        finally:
            response.close()
        if hops == config.max_redirects:
            raise httpx.TooManyRedirects(f"more than {config.max_redirects} redirects", request=request)
        request, hops = _without_keys(response.next_request, origin), hops + 1


def _attempt_by_deadline(
    client: httpx.Client, method: str, url: str, config: HttpConfig, **kwargs: Any
) -> tuple[int, bytes, bool, httpx.Headers]:
    """`_attempt` given `config.timeout_s` in all. httpx times each read, not the whole reply, so a server that
    trickles its headers a byte at a time would hold a plain call for hours: the attempt runs on a daemon thread,
    and at the deadline the caller leaves it (it ends at the server's next stall or close)."""
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append(_attempt(client, method, url, config, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome.append(exc)

    worker = threading.Thread(target=work, name="jaxseeker-http", daemon=True)
    worker.start()
    worker.join(config.timeout_s)
    if not outcome:
        raise httpx.TimeoutException(f"no complete reply from {url} within {config.timeout_s:g} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def request(
    client: httpx.Client,
    method: str,
    url: str,
    config: HttpConfig,
    *,
    headers: Mapping[str, str] | None = None,
    json_body: Any = None,
) -> HttpReply:
    """Send `method url`, retrying 429 / 5xx / connection or read errors / timeouts with backoff; else HttpError."""
    attempts = config.max_retries + 1
    problem = ""
    status: int | None = None
    for attempt in range(attempts):
        wait = min(config.max_backoff_s, config.backoff_s * 2**attempt)
        try:
            status, body, truncated, reply_headers = _attempt_by_deadline(
                client, method, url, config, headers=headers, json=json_body
            )
        except httpx.TooManyRedirects:
            raise HttpError(f"{method} {url} failed: more than {config.max_redirects} redirects", url=url) from None
        except httpx.TimeoutException:
            status, problem = None, f"timed out after {config.timeout_s:g} s"
        except httpx.TransportError as exc:
            status, problem = None, f"connection failed ({type(exc).__name__}: {exc})"
        except httpx.RequestError as exc:  # e.g. a body that does not decode as its Content-Encoding says
            status, problem = None, f"reading the reply failed ({type(exc).__name__}: {exc})"
        except httpx.InvalidURL as exc:
            raise HttpError(f"{method} {url} failed: invalid URL ({exc})", url=url) from None
        else:
            if 200 <= status < 300:
                return HttpReply(status, body, truncated)
            excerpt = cut(body.decode("utf-8", errors="replace"), 200)
            problem = f"HTTP {status}: {excerpt!r}"
            if status not in RETRY_STATUSES:
                break
            wait = min(config.max_backoff_s, max(wait, _retry_after(reply_headers) or 0.0))
        if attempt + 1 < attempts:
            time.sleep(wait)
    tries = "1 attempt" if attempt == 0 else f"{attempt + 1} attempts"
    raise HttpError(f"{method} {url} failed after {tries}: {problem}", url=url, status=status)
