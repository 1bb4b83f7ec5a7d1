"""Attacks on the HTTP tools over loopback: dot segments that would steer the reader to another target or to its own
paths, redirects that would carry a key to another origin, and keys cut before they are redacted. A loopback server
records what it received: the key must never reach another origin, and no piece of it may show in an error."""

import urllib.parse

import pytest
from loopback import SECRET, LoopbackServer, Reply

from jaxseeker.tools import (
    HttpConfig,
    HttpError,
    JinaReader,
    LLMClient,
    LLMConfig,
    LLMError,
    SerperSearch,
    ToolRegistry,
)
from jaxseeker.tools.http import client, request
from jaxseeker.tools.keys import MIN_FRAGMENT, REDACTED, cut, read_key
from jaxseeker.tools.search import search_tool
from jaxseeker.tools.visit import VisitOptions, visit_tool

FAST = HttpConfig(timeout_s=10.0, max_retries=0, max_bytes=1_000_000)
PUBLIC = "http://93.184.215.14"  # a public literal address: checked without DNS, never connected to


def fragments(key: str) -> list[str]:
    """Every piece of `key` as long as the shortest piece redaction removes."""
    return [key[i : i + MIN_FRAGMENT] for i in range(len(key) - MIN_FRAGMENT + 1)]


@pytest.fixture
def other():
    """A second loopback server: another origin (another port) than `server`."""
    s = LoopbackServer()
    yield s
    s.close()


# --- dot segments ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, sent",
    [
        # the form: the reader would be sent GET /http://169.254.169.254/latest/meta-data/ with its key
        (
            f"{PUBLIC}/../../../http://169.254.169.254/latest/meta-data/",
            f"{PUBLIC}/http://169.254.169.254/latest/meta-data/",
        ),
        (f"{PUBLIC}/../../../admin", f"{PUBLIC}/admin"),  # would reach the reader's own /admin
        (f"{PUBLIC}/%2e%2E/%2E./admin?x=1", f"{PUBLIC}/admin?x=1"),  # dot segments as a WHATWG server decodes them
        (f"{PUBLIC}/a/./b/../c", f"{PUBLIC}/a/c"),
    ],
)
def test_dot_segments_never_reach_the_reader_as_a_path(server, secret_keys, url, sent):
    server.route = lambda r: Reply(200, "Title: Page\n\nhello")
    reader = JinaReader(f"{server.url}/reader", "JINA_API_KEY", FAST)
    result = ToolRegistry([visit_tool(reader, options=VisitOptions(goal_extraction=False))]).call(
        "visit", {"url": url, "goal": "g"}
    )
    assert result.error is None and f"URL: {sent}\n" in result.text
    [received] = server.requests
    assert received.path == "/reader/" + urllib.parse.quote(sent, safe="")  # the checked URL, one path segment
    assert urllib.parse.unquote(received.path.removeprefix("/reader/")) == sent  # what the reader decodes
    assert urllib.parse.urlsplit(sent).hostname == "93.184.215.14"


def test_a_request_whose_path_the_client_would_change_is_refused_unsent(server, secret_keys):
    with client() as http:
        for path in ("/a/../admin", "/a/%2E%2e/admin", "/./admin", "/a/b/.."):
            with pytest.raises(HttpError, match="invalid URL .the path .* has a dot segment"):
                request(http, "GET", f"{server.url}{path}", FAST, headers={"X-API-KEY": SECRET})
    assert server.requests == []


# --- keys on redirects -----------------------------------------------------------------------------------------


def test_no_key_header_follows_a_redirect_to_another_origin(server, other, secret_keys):
    """The headers every HTTP tool sends its keys in, and a header of any name that holds a key, reach the
    configured origin and are dropped at a redirect to another one (a search API's 307 to another host)."""
    read_key("SERPER_API_KEY")
    keys = {"X-API-KEY": SECRET, "Authorization": f"Bearer {SECRET}", "X-Goog-Api-Key": SECRET, "Api-Key": SECRET}
    server.route = lambda r: (
        Reply(307, "", (("Location", f"{other.url}/search"),)) if r.path == "/search" else Reply(404)
    )
    other.route = lambda r: Reply(200, {"organic": []})
    with client() as http:
        reply = request(http, "POST", f"{server.url}/search", FAST, headers=keys, json_body={"q": "x"})
    assert reply.status == 200
    [first], [moved] = server.requests, other.requests
    assert first.headers["x-api-key"] == SECRET and first.headers["authorization"] == f"Bearer {SECRET}"
    assert moved.json() == {"q": "x"}  # a 307 keeps the body
    assert not {k for k, v in moved.headers.items() if SECRET in v}
    assert not {"x-api-key", "authorization", "x-goog-api-key", "api-key"} & set(moved.headers)


def test_keys_follow_a_redirect_within_the_origin(server, secret_keys):
    server.route = lambda r: (
        Reply(302, "", (("Location", "/search/v2"),)) if r.path == "/search" else Reply(200, {"organic": []})
    )
    registry = ToolRegistry([search_tool(SerperSearch(server.url, "SERPER_API_KEY", FAST))])
    assert registry.call("search", {"query": "x"}).error is None
    assert [(r.path, r.headers.get("x-api-key")) for r in server.requests] == [
        ("/search", SECRET),
        ("/search/v2", SECRET),
    ]


def test_the_llm_client_follows_no_redirect(server, other, secret_keys):
    server.route = lambda r: Reply(307, "", (("Location", f"{other.url}/v1/chat/completions"),))
    llm = LLMClient(LLMConfig(base_url=f"{server.url}/v1", model="m", timeout_s=10.0, max_retries=0))
    with pytest.raises(LLMError, match="HTTP 307") as caught:
        llm.complete([{"role": "user", "content": "x"}])
    assert caught.value.status == 307 and other.requests == []


# --- redaction before the cut ----------------------------------------------------------------------------------


@pytest.mark.parametrize("inside", [MIN_FRAGMENT, 10, 30, len(SECRET) - 1])
def test_a_key_across_the_cut_of_an_error_shows_no_piece(server, secret_keys, inside):
    """A 401 body that echoes the key so that the 200-character excerpt ends `inside` characters into it."""
    server.route = lambda r: Reply(401, "." * (200 - inside) + r.headers["x-api-key"] + " is not a valid key")
    backend = SerperSearch(server.url, "SERPER_API_KEY", FAST)
    with pytest.raises(HttpError) as caught:
        backend.search("x", 3)
    message = str(caught.value)
    assert f"HTTP 401: '{'.' * (200 - inside)}{REDACTED}" in message  # redacted, then cut
    assert [f for f in fragments(SECRET) if f in message] == []


def test_the_llm_clients_401_shows_no_piece_of_the_key(server, secret_keys):
    server.route = lambda r: Reply(401, "Incorrect API key provided: " + "x" * 142 + r.headers["authorization"])
    llm = LLMClient(LLMConfig(base_url=f"{server.url}/v1", model="m", timeout_s=10.0, max_retries=0))
    with pytest.raises(LLMError, match="HTTP 401") as caught:
        llm.complete([{"role": "user", "content": "x"}])
    assert [f for f in fragments(SECRET) if f in str(caught.value)] == []


def test_a_page_echoing_the_key_at_the_page_budget_shows_no_piece(server, secret_keys):
    server.route = lambda r: Reply(200, "Title: Echo\n\n" + "y" * 80 + r.headers["authorization"] + " tail")
    reader = JinaReader(server.url, "JINA_API_KEY", FAST)
    options = VisitOptions(page_chars=120, goal_extraction=False, max_links=0)
    text = ToolRegistry([visit_tool(reader, options=options)]).call("visit", {"url": PUBLIC, "goal": "g"}).text
    assert REDACTED in text and [f for f in fragments(SECRET) if f in text] == []


def test_cut_redacts_whole_keys_before_the_cut_and_their_start_at_it(monkeypatch):
    monkeypatch.setenv("JAXSEEKER_TEST_KEY", "sk-cut-0123456789")
    key = read_key("JAXSEEKER_TEST_KEY")
    assert cut(f"ab {key} cd", 100) == f"ab {REDACTED} cd"
    assert cut(f"ab {key} cd", 10) == f"ab {REDACTED}"  # the cut does not split the marker
    assert cut(f"ab {key[:9]}", 100) == f"ab {REDACTED}"  # text that ends with 9 characters of the key
    assert cut(f"ab {key[: MIN_FRAGMENT - 1]}", 100) == f"ab {key[: MIN_FRAGMENT - 1]}"  # too few to redact
    assert cut("plain text", 5) == "plain"
