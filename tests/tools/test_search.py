"""`search` over the local BM25 index and over a Serper-compatible server on loopback, faults included."""

import threading

import pytest
from loopback import SECRET, Reply

from jaxseeker.tools import HttpConfig, LocalSearch, SerperSearch, ToolRegistry, search_tool

# Loopback replies come in milliseconds, but a loaded CI machine can stall a thread for a few tenths of a second:
# a timeout that is not what a test is about must be far longer than that, or one stall breaks the test.
FAST = HttpConfig(timeout_s=10.0, max_retries=1, backoff_s=0.01)


def serper_registry(server_url, config=FAST, top_k=2):
    return ToolRegistry([search_tool(SerperSearch(server_url, "SERPER_API_KEY", config), top_k=top_k)])


def organic(query):
    return {
        "organic": [
            {"title": f"{query} one", "link": "https://a.example/1", "snippet": "first"},
            {"title": f"{query} two", "link": "https://a.example/2", "snippet": "second"},
            {"title": f"{query} three", "link": "https://a.example/3", "snippet": "third"},
        ]
    }


def test_local_search_lists_the_best_page_first_for_each_query(corpus):
    registry = ToolRegistry([search_tool(LocalSearch(corpus), top_k=2)])
    result = registry.call("search", {"query": ["weaver who founded Velmora", "blue glass"]})
    assert result.error is None
    first, second = result.text.split("\n=======\n")
    assert first.startswith("Search results for 'weaver who founded Velmora':\n\n[1] ")
    assert "https://world.test/ida-konst" in first or "https://world.test/velmora" in first
    assert "[3]" not in first
    assert second.startswith(
        "Search results for 'blue glass':\n\n[1] Glassworks of Pirn\nhttps://world.test/glass\nPirn is known"
    )


def test_local_search_says_when_nothing_matches(corpus):
    registry = ToolRegistry([search_tool(LocalSearch(corpus))])
    assert (
        registry.call("search", {"query": "zeppelin"}).text
        == "No results for 'zeppelin'. Try a shorter or different query."
    )


def test_serper_request_and_reply_format(server, secret_keys):
    server.route = lambda request: Reply(200, organic(request.json()["q"]))
    result = serper_registry(server.url).call("search", {"query": ["velmora bridge"]})
    assert result.error is None
    assert result.text == (
        "Search results for 'velmora bridge':\n\n"
        "[1] velmora bridge one\nhttps://a.example/1\nfirst\n\n"
        "[2] velmora bridge two\nhttps://a.example/2\nsecond"
    )
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/search")
    assert request.headers["x-api-key"] == SECRET
    assert request.json() == {"q": "velmora bridge", "num": 2}


def test_serper_failure_of_one_query_is_reported_in_place(server, secret_keys):
    server.route = lambda r: Reply(500, "boom") if r.json()["q"] == "bad" else Reply(200, organic(r.json()["q"]))
    result = serper_registry(server.url).call("search", {"query": ["good", "bad"]})
    assert result.error is None
    good, bad = result.text.split("\n=======\n")
    assert good.startswith("Search results for 'good'")
    assert bad.startswith("Search for 'bad' failed: POST ") and "after 2 attempts: HTTP 500: 'boom'" in bad


def test_serper_500_is_retried_then_reported(server, secret_keys):
    server.route = lambda r: Reply(500, "overloaded")
    result = serper_registry(server.url).call("search", {"query": "x"})
    assert "failed after 2 attempts: HTTP 500: 'overloaded'" in result.error
    assert len(server.requests) == 2


def test_serper_retry_recovers_from_one_429(server, secret_keys):
    replies = iter([Reply(429, "slow down", (("Retry-After", "0"),)), Reply(200, organic("x"))])
    server.route = lambda r: next(replies)
    assert serper_registry(server.url).call("search", {"query": "x"}).text.startswith("Search results for 'x'")


def test_serper_unreadable_retry_after_falls_back_to_the_backoff(server, secret_keys):
    replies = iter([Reply(503, "busy", (("Retry-After", "soon"),)), Reply(200, organic("x"))])
    server.route = lambda r: next(replies)
    assert serper_registry(server.url).call("search", {"query": "x"}).text.startswith("Search results for 'x'")
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "reply, message",
    [
        (Reply(200, b"not gzip", (("Content-Encoding", "gzip"),)), "reading the reply failed (DecodingError"),
        (Reply(200, "[" * 100_000), "malformed JSON from "),
    ],
)
def test_serper_undecodable_bodies_fail_in_place(server, secret_keys, reply, message):
    server.route = lambda r: reply if r.json()["q"] == "bad" else Reply(200, organic(r.json()["q"]))
    result = serper_registry(server.url).call("search", {"query": ["good", "bad"]})
    good, bad = result.text.split("\n=======\n")
    assert result.error is None and good.startswith("Search results for 'good'")
    assert bad.startswith("Search for 'bad' failed: ") and message in bad


def test_serper_timeout_is_an_observation_and_does_not_hang(server, secret_keys):
    release, replied = threading.Event(), threading.Event()

    def held(request):  # the reply waits until the call has returned (or 30 s)
        release.wait(30)
        replied.set()
        return Reply(200, organic("x"))

    server.route = held
    try:
        result = serper_registry(server.url, HttpConfig(timeout_s=0.3, max_retries=0)).call("search", {"query": "x"})
        assert not replied.is_set()  # the call gave up without waiting for the reply
    finally:
        release.set()
    assert result.error.endswith("failed after 1 attempt: timed out after 0.3 s")


def test_serper_refused_connection(closed_port_url, secret_keys):
    result = serper_registry(closed_port_url).call("search", {"query": "x"})
    assert "failed after 2 attempts: connection failed (ConnectError" in result.error


def test_serper_malformed_json_and_missing_organic(server, secret_keys):
    server.route = lambda r: Reply(200, '{"organic": [')
    assert "malformed JSON from " in serper_registry(server.url).call("search", {"query": "x"}).error
    server.route = lambda r: Reply(200, {"organic": "nope"})
    assert "no 'organic' list" in serper_registry(server.url).call("search", {"query": "x"}).error


def test_serper_without_key_names_the_variable(server, monkeypatch):
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    result = serper_registry(server.url).call("search", {"query": "x"})
    assert result.error.endswith("search needs an API key in the environment variable SERPER_API_KEY")
    assert server.requests == []


def test_the_key_never_appears_in_observations_or_reprs(server, secret_keys):
    # A server that echoes the key back in its error body (as some APIs do).
    server.route = lambda r: Reply(401, f"invalid key {r.headers['x-api-key']}")
    backend = SerperSearch(server.url, "SERPER_API_KEY", FAST)
    registry = ToolRegistry([search_tool(backend)])
    result = registry.call("search", {"query": ["a", "b"]})
    assert "HTTP 401: 'invalid key [redacted]'" in result.error
    for text in (result.text, result.error, repr(result), repr(backend), repr(registry["search"])):
        assert SECRET not in text
    assert len(server.requests) == 2  # 401 is not retried


def test_title_first_lists_the_page_of_the_name_searched_for_first():
    from jaxseeker.world.corpus import Corpus, Page

    pages = [
        Page("u/airport", "Lowell Airport", "Lowell Airport serves Lowell. Lowell Airport lies near Lowell."),
        Page("u/field", "Taylor Field (Lowell)", "Taylor Field is an airfield in Lowell, next to Lowell Airport."),
        Page("u/lowell", "Lowell", "A city of 9,276 people on the river."),
        Page("u/st", "St Louis", "A city on the Mississippi."),
    ]
    corpus = Corpus(pages)
    plain = [h.url for h in corpus.search("Lowell", 2)]
    assert plain == ["u/airport", "u/field"]  # BM25 alone: the pages that repeat the name
    assert [h.url for h in corpus.search("Lowell", 2, title_first=True)] == ["u/lowell", "u/airport"]
    assert [h.url for h in corpus.search("st. louis", 1, title_first=True)] == ["u/st"]  # case and dots aside
    assert [h.url for h in corpus.search("Lowell river", 2, title_first=True)] == [
        h.url for h in corpus.search("Lowell river", 2)
    ]  # no page has that title: BM25's order
    assert corpus.search("zeppelin", 3, title_first=True) == []
    registry = ToolRegistry([search_tool(LocalSearch(corpus, title_first=True), top_k=1)])
    assert registry.call("search", {"query": "Lowell"}).text.startswith(
        "Search results for 'Lowell':\n\n[1] Lowell\nu/lowell"
    )


def test_title_first_is_refused_for_a_corpus_without_a_title_index():
    class Sharded:
        title_index = False

    with pytest.raises(ValueError, match="tools.title_first: Sharded keeps no title index"):
        LocalSearch(Sharded(), title_first=True)


def test_http_config_refuses_limits_no_request_could_run_under():
    with pytest.raises(ValueError, match="max_retries >= 0"):
        HttpConfig(max_retries=-1)
    with pytest.raises(ValueError, match="timeout_s > 0"):
        HttpConfig(timeout_s=0)


def test_a_serper_redirect_to_a_refused_address_is_not_followed(server, secret_keys):
    server.route = lambda request: Reply(307, "", (("Location", "http://100.100.100.200/latest/meta-data"),))
    result = serper_registry(server.url).call("search", {"query": "x"})
    assert "refused 'http://100.100.100.200/latest/meta-data'" in result.error and len(server.requests) == 1
