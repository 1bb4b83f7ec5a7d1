"""`visit` over the local page store and over a Jina-compatible reader + LLM extractor on loopback, faults included."""

import json

import pytest
from loopback import SECRET, Reply

from jaxseeker.tools import (
    HttpConfig,
    JinaReader,
    LLMClient,
    LLMConfig,
    LocalPages,
    ToolError,
    ToolRegistry,
    VisitOptions,
    check_url,
    visit_tool,
)
from jaxseeker.tools.extract import overlap_extract

# Loopback replies come in milliseconds, but a loaded CI machine can stall a thread for a few tenths of a second:
# a timeout must be far longer than that unless the test is about timeouts (SHORT), or one stall breaks the test.
FAST = HttpConfig(timeout_s=10.0, max_retries=1, backoff_s=0.01, max_bytes=1_000_000)
SHORT = HttpConfig(timeout_s=0.3, max_retries=1, backoff_s=0.01, max_bytes=1_000_000)
PAGE = (
    "Title: Velmora bridge\n\nURL Source: http://93.184.216.34/bridge\n\n"
    "Markdown Content:\nThe bridge has nine arches.\n\nIt was rebuilt in 1876."
)
TARGET = "http://93.184.216.34/bridge"  # a public literal address: checked without DNS


def chat(text):
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}], "usage": {}}


def jina_registry(server_url, *, llm=True, options=VisitOptions(), allow_private=False, config=FAST, max_tokens=None):
    reader = JinaReader(server_url, "JINA_API_KEY", config, allow_private=allow_private)
    summarizer = LLMConfig(base_url=f"{server_url}/v1", model="m", timeout_s=10.0, max_retries=0, max_tokens=max_tokens)
    client = LLMClient(summarizer) if llm else None
    return ToolRegistry([visit_tool(reader, options=options, llm=client)])


def route(page_reply, llm_reply):
    return lambda r: llm_reply if r.path == "/v1/chat/completions" else page_reply


# --- local page store -------------------------------------------------------------------------


def test_local_visit_keeps_goal_relevant_paragraphs_and_lists_links(corpus):
    registry = ToolRegistry([visit_tool(LocalPages(corpus), options=VisitOptions(page_chars=60))])
    result = registry.call("visit", {"url": "https://world.test/velmora", "goal": "when was the bridge rebuilt"})
    assert result.text == (
        "Page: Velmora\nURL: https://world.test/velmora\nGoal: when was the bridge rebuilt\n\n"
        "Evidence in page:\nIts bridge has nine arches and was rebuilt in 1876.\n\n"
        "Links on this page:\n- Ostra (river): https://world.test/ostra\n- Ida Konst: https://world.test/ida-konst"
    )


def test_local_visit_with_goal_passages_keeps_only_the_best_even_when_the_page_fits(corpus):
    def evidence(goal_passages, goal):
        options = VisitOptions(page_chars=8000, goal_passages=goal_passages, max_links=0)
        registry = ToolRegistry([visit_tool(LocalPages(corpus), options=options)])
        return registry.call("visit", {"url": "https://world.test/velmora", "goal": goal}).text.split(
            "Evidence in page:\n"
        )[1]

    assert evidence(0, "when was the bridge rebuilt").count("\n\n") == 2  # the whole page fits: all of it
    assert evidence(1, "when was the bridge rebuilt") == "Its bridge has nine arches and was rebuilt in 1876."
    assert evidence(2, "the town Velmora founded by") == (
        "Velmora is a river town on the Ostra.\n\nThe town was founded in 1412 by the weaver Ida Konst."
    )


def test_the_goal_extract_breaks_ties_by_word_pairs_and_keeps_names_with_initials_whole():
    page = (
        "P. J. Walters died on 13 November 2009. P. J. Walters was born in Jersey City. "
        "P. J. Walters died in Plainview. St. Louis is the birthplace of P. J. Walters."
    )
    assert (
        overlap_extract(page, "the city P. J. Walters died in", 400, max_passages=1)
        == "P. J. Walters died in Plainview."
    )
    assert overlap_extract(page, "the birthplace of P. J. Walters", 400, max_passages=1) == (
        "St. Louis is the birthplace of P. J. Walters."
    )


def test_local_visit_without_extraction_truncates_to_the_budget(corpus):
    registry = ToolRegistry(
        [visit_tool(LocalPages(corpus), options=VisitOptions(page_chars=20, goal_extraction=False, max_links=0))]
    )
    text = registry.call("visit", {"url": ["https://world.test/ostra"], "goal": "length"}).text
    assert text.endswith("\nContent:\nThe Ostra is a river\n[… 39 more characters cut]")


def test_local_visit_of_several_urls_reports_a_missing_page_in_place(corpus):
    registry = ToolRegistry([visit_tool(LocalPages(corpus))])
    result = registry.call(
        "visit", {"url": ["https://world.test/tram", "https://world.test/nowhere"], "goal": "opening year"}
    )
    assert result.error is None
    tram, missing = result.text.split("\n=======\n")
    assert "The tramway of Pirn opened in 1899" in tram and "- https://world.test/unknown" in tram
    nowhere = "'https://world.test/nowhere'"
    assert missing == f"Could not visit {nowhere}: no page at {nowhere} (check the url against the search results)"
    single = registry.call("visit", {"url": "https://world.test/nowhere", "goal": "x"})
    assert single.error.startswith("Could not visit")


# --- url policy ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, problem",
    [
        ("file:///etc/passwd", "scheme 'file' is not http or https"),
        ("ftp://93.184.216.34/x", "scheme 'ftp' is not http or https"),
        ("javascript:alert(1)", "scheme 'javascript' is not http or https"),
        ("http://", "no host"),
        ("http://127.0.0.1:8080/admin", "host '127.0.0.1' is not a public address (127.0.0.1)"),
        ("http://10.1.2.3/", "(10.1.2.3)"),
        ("http://192.168.0.1/", "(192.168.0.1)"),
        ("http://169.254.169.254/latest/meta-data", "(169.254.169.254)"),
        ("http://[::1]/", "(::1)"),
        ("http://[::ffff:127.0.0.1]/", "(::ffff:7f00:1)"),
        ("http://0.0.0.0/", "(0.0.0.0)"),
        ("http://localhost:9000/", "host 'localhost' is loopback"),
        ("http://100.64.0.1/", "(100.64.0.1)"),  # carrier-grade NAT
        ("http://100.100.100.200/latest/meta-data", "(100.100.100.200)"),  # a cloud's metadata service in it
        ("http://[fec0::1]/", "(fec0::1)"),  # IPv6 site-local
        ("http://[2002:7f00:1::]/", "(2002:7f00:1::)"),  # 6to4 of 127.0.0.1
        ("http://[2002:808:808::1]/", "(2002:808:808::1)"),  # 6to4 of a public address: the whole prefix
        ("http://[64:ff9b::a01:203]/", "(64:ff9b::a01:203)"),  # NAT64 of 10.1.2.3
        ("http://[::7f00:1]/", "(::7f00:1)"),  # IPv4-compatible
        ("http://127.0.0.1\\@example.com/", "its host is '127.0.0.1' to a browser and 'example.com' to urllib"),
        ("http://0x7f.1/", "its host is '127.0.0.1' to a browser and '0x7f.1' to urllib"),
        ("http://%31%32%37.0.0.1/", "its host is '127.0.0.1' to a browser"),
    ],
)
def test_check_url_refuses_other_schemes_and_private_hosts(url, problem):
    with pytest.raises(ToolError, match="refused") as info:
        check_url(url)
    assert problem in str(info.value)


def test_check_url_allows_public_hosts_and_private_ones_when_configured():
    check_url("https://93.184.216.34/page")
    check_url("http://[64:ff9b::808:808]/")  # NAT64 of a public address
    check_url("HTTP://[2606:4700::1111]:80/a?b#c")
    check_url("http://127.0.0.1:8080/", allow_private=True)
    with pytest.raises(ToolError, match="scheme"):
        check_url("file:///etc/passwd", allow_private=True)


def test_malformed_urls_are_reported_in_place(server, secret_keys):
    server.route = route(Reply(200, PAGE), Reply(500, "llm down"))
    urls = ["http://[::1/x", "http://93.184.216.34:99999/x", "http://93.184.216.34/a\nb", TARGET]
    result = jina_registry(server.url, llm=False).call("visit", {"url": urls, "goal": "arches"})
    ipv6, port, control, page = result.text.split("\n=======\n")
    assert result.error is None and "nine arches" in page
    assert ipv6 == "Could not visit 'http://[::1/x': refused 'http://[::1/x': Invalid IPv6 URL"
    assert port.endswith("Port out of range 0-65535")
    assert control == (
        "Could not visit 'http://93.184.216.34/a\\nb': refused 'http://93.184.216.34/a\\nb': "
        "it holds the control character '\\n'"
    )


def test_refused_url_never_reaches_the_reader(server, secret_keys):
    result = jina_registry(server.url).call("visit", {"url": f"{server.url}/secret", "goal": "g"})
    assert "is not a public address (127.0.0.1)" in result.error
    assert server.requests == []


# --- Jina reader + LLM extractor ------------------------------------------------------------------


def test_jina_page_reduced_by_the_llm_to_evidence_and_summary(server, secret_keys):
    extract = {"rational": "the bridge section", "evidence": "The bridge has nine arches.", "summary": "Nine arches."}
    server.route = route(Reply(200, PAGE), Reply(200, chat(json.dumps(extract))))
    result = jina_registry(server.url).call("visit", {"url": TARGET, "goal": "How many arches?"})
    assert result.text == (
        f"Page: Velmora bridge\nURL: {TARGET}\nGoal: How many arches?\n\n"
        "Evidence in page:\nThe bridge has nine arches.\n\nSummary:\nNine arches."
    )
    page_request, llm_request = server.requests
    assert (page_request.method, page_request.path) == ("GET", "/http%3A%2F%2F93.184.216.34%2Fbridge")
    assert page_request.headers["authorization"] == f"Bearer {SECRET}"
    prompt = llm_request.json()["messages"][0]["content"]
    assert "How many arches?" in prompt and "It was rebuilt in 1876." in prompt and '"rational"' in prompt
    assert llm_request.json()["max_tokens"] == 2048  # the extractor's cap where the summariser's config sets none


def test_the_summarizers_max_tokens_caps_the_extractors_reply(server, secret_keys):
    extract = {"rational": "r", "evidence": "The bridge has nine arches.", "summary": "Nine arches."}
    server.route = route(Reply(200, PAGE), Reply(200, chat(json.dumps(extract))))
    jina_registry(server.url, max_tokens=300).call("visit", {"url": TARGET, "goal": "How many arches?"})
    assert server.requests[1].json()["max_tokens"] == 300


def test_near_json_from_the_llm_is_repaired(server, secret_keys):
    reply = "Here you go:\n```json\n{'evidence': 'nine arches', 'summary': 'Nine.',}\n```"
    server.route = route(Reply(200, PAGE), Reply(200, chat(reply)))
    text = jina_registry(server.url).call("visit", {"url": TARGET, "goal": "arches"}).text
    assert text.endswith("Evidence in page:\nnine arches\n\nSummary:\nNine.")


@pytest.mark.parametrize(
    "llm_reply",
    [Reply(500, "llm down"), Reply(200, chat("I cannot help with that.")), Reply(200, "{bad"), Reply(200, chat(5))],
)
def test_llm_failure_falls_back_to_the_raw_page(server, secret_keys, llm_reply):
    server.route = route(Reply(200, PAGE), llm_reply)
    result = jina_registry(server.url).call("visit", {"url": TARGET, "goal": "arches"})
    assert result.error is None
    assert "[the summariser failed: " in result.text
    assert result.text.endswith("the start of the page follows]\n" + PAGE)


def test_without_llm_the_fetched_page_is_extracted_offline(server, secret_keys):
    server.route = route(Reply(200, PAGE), Reply(500, "unused"))
    options = VisitOptions(page_chars=40)
    text = (
        jina_registry(server.url, llm=False, options=options)
        .call("visit", {"url": TARGET, "goal": "year rebuilt"})
        .text
    )
    assert text.endswith("Evidence in page:\nIt was rebuilt in 1876.")


def test_a_5mb_page_is_cut_at_the_byte_cap_and_the_budget(server, secret_keys):
    big = "Title: Big\n\n" + ("filler words about nothing. " * 200_000)[:5_000_000]
    server.route = route(Reply(200, big), Reply(500, "llm down"))
    options = VisitOptions(page_chars=2000, llm_input_chars=50_000)
    result = jina_registry(server.url, options=options).call("visit", {"url": TARGET, "goal": "anything"})
    assert "(the page was cut at the download limit)" in result.text
    assert len(result.text) < 3000
    assert len(server.requests[1].body) < 60_000  # the LLM saw at most llm_input_chars of the page


@pytest.mark.parametrize(
    "page_reply, message",
    [
        (Reply(500, "reader down"), "failed after 2 attempts: HTTP 500: 'reader down'"),
        (Reply(404, "no such page"), "failed after 1 attempt: HTTP 404"),
        (Reply(200, "   "), "the reader returned an empty page"),
        (Reply(200, PAGE, delay_s=1.0), "failed after 2 attempts: timed out after 0.3 s"),
        (Reply(200, b"not gzip", (("Content-Encoding", "gzip"),)), "reading the reply failed (DecodingError"),
    ],
)
def test_reader_faults_become_observations(server, secret_keys, page_reply, message):
    server.route = route(page_reply, Reply(200, chat("{}")))
    config = SHORT if page_reply.delay_s else FAST  # the late page: a short timeout
    result = jina_registry(server.url, config=config).call("visit", {"url": TARGET, "goal": "g"})
    assert message in result.error
    assert result.text.startswith(f"[tool error] visit: Could not visit '{TARGET}'")
    assert SECRET not in result.text


def test_reader_refused_connection(closed_port_url, secret_keys):
    result = jina_registry(closed_port_url, llm=False).call("visit", {"url": TARGET, "goal": "g"})
    assert "connection failed (ConnectError" in result.error


def test_allow_private_reaches_loopback_targets(server, secret_keys):
    server.route = route(Reply(200, "Title: Local\n\nhello"), Reply(200, chat("{}")))
    result = jina_registry(server.url, llm=False, allow_private=True).call(
        "visit", {"url": "http://127.0.0.1:1/x", "goal": "hello"}
    )
    assert result.error is None and "hello" in result.text
    assert SECRET not in repr(JinaReader(server.url))


def test_every_redirect_hop_outside_the_reader_is_checked(server, secret_keys):
    hops = {
        "/hop": Reply(302, "", (("Location", "/page"),)),  # within the reader: followed
        "/page": Reply(200, "Title: Moved\n\nhello after a redirect"),
    }
    server.route = lambda request: (
        hops.get(request.path.split("/http")[0]) or Reply(302, "", (("Location", f"{server.url}/hop"),))
    )
    result = jina_registry(server.url, llm=False).call("visit", {"url": TARGET, "goal": "hello"})
    assert result.error is None and "hello after a redirect" in result.text
    for location in ("http://169.254.169.254/latest/meta-data", "http://[2002:7f00:1::]/"):
        server.requests.clear()
        server.route = lambda request, location=location: Reply(302, "", (("Location", location),))
        result = jina_registry(server.url, llm=False).call("visit", {"url": TARGET, "goal": "g"})
        assert "refused" in result.error and len(server.requests) == 1  # the hop was never requested


def test_redirects_beyond_the_limit_are_an_error(server, secret_keys):
    server.route = lambda request: Reply(302, "", (("Location", f"{server.url}/again"),))
    config = HttpConfig(timeout_s=10.0, max_retries=0, max_redirects=2)
    result = jina_registry(server.url, llm=False, config=config).call("visit", {"url": TARGET, "goal": "g"})
    assert "more than 2 redirects" in result.error and len(server.requests) == 3
