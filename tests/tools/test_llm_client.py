"""LLMClient against an OpenAI-format chat server on loopback: reply, usage, retries, faults, concurrency, key."""

import threading

import pytest
from loopback import SECRET, Reply

from jaxseeker.tools import LLMClient, LLMConfig, LLMError


def chat_reply(text, **usage):
    return {
        "model": "tiny-judge",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9, **usage},
    }


def client_for(url, **overrides):
    # A long timeout unless a test is about timeouts: a loaded CI machine can stall a loopback reply for tenths of
    # a second, and a spurious timeout adds a request or changes the error.
    config = dict(base_url=f"{url}/v1", model="tiny-judge", timeout_s=10.0, max_retries=1, backoff_s=0.01)
    return LLMClient(LLMConfig(**{**config, **overrides}))


def test_chat_sends_the_openai_request_and_reads_text_and_usage(server, secret_keys):
    server.route = lambda r: Reply(200, chat_reply("Paris"))
    with client_for(server.url) as llm:
        result = llm.chat([{"role": "user", "content": "Capital of France?"}], max_tokens=5, stop=["\n"])
        assert llm.complete([{"role": "user", "content": "again"}]) == "Paris"
    assert (result.text, result.finish_reason, result.model) == ("Paris", "stop", "tiny-judge")
    assert result.usage == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.json() == {
        "model": "tiny-judge",
        "messages": [{"role": "user", "content": "Capital of France?"}],
        "temperature": 0.0,
        "max_tokens": 5,
        "stop": ["\n"],
    }


def test_no_key_in_the_environment_sends_no_authorization(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.route = lambda r: Reply(200, chat_reply("ok"))
    assert client_for(server.url).complete([{"role": "user", "content": "hi"}]) == "ok"
    assert "authorization" not in server.requests[0].headers


def test_5xx_and_429_are_retried_with_backoff(server, secret_keys):
    replies = iter([Reply(503, "busy"), Reply(429, "slow"), Reply(200, chat_reply("done"))])
    server.route = lambda r: next(replies)
    assert client_for(server.url, max_retries=2).complete([{"role": "user", "content": "x"}]) == "done"
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    "reply, status, message",
    [
        (Reply(500, "down"), 500, "failed after 2 attempts: HTTP 500: 'down'"),
        (Reply(400, "bad model"), 400, "failed after 1 attempt: HTTP 400: 'bad model'"),
        (Reply(200, "{not json"), 200, "malformed JSON from "),
        (Reply(200, {"choices": []}), 200, "no choices[0].message.content"),
        (Reply(200, {"choices": [{"message": {"content": [{"text": "x"}]}}]}), 200, "no choices[0].message.content"),
        (Reply(200, chat_reply("late"), delay_s=1.0), None, "failed after 2 attempts: timed out after 0.3 s"),
    ],
)
def test_faults_raise_llm_error_naming_status_and_url(server, secret_keys, reply, status, message):
    server.route = lambda r: reply
    llm = client_for(server.url, **({"timeout_s": 0.3} if reply.delay_s else {}))  # the late reply: a short timeout
    with pytest.raises(LLMError) as info:
        llm.complete([{"role": "user", "content": "x"}])
    assert info.value.status == status
    assert info.value.url == f"{server.url}/v1/chat/completions"
    assert message in str(info.value)
    assert SECRET not in str(info.value)


def test_usage_that_is_not_an_object_is_ignored(server, secret_keys):
    server.route = lambda r: Reply(200, {**chat_reply("fine"), "usage": [7, 2]})
    result = client_for(server.url).chat([{"role": "user", "content": "x"}])
    assert (result.text, result.usage) == ("fine", {})


def test_refused_connection(closed_port_url, secret_keys):
    with pytest.raises(LLMError, match="connection failed") as info:
        client_for(closed_port_url).complete([{"role": "user", "content": "x"}])
    assert info.value.status is None


def test_401_names_the_key_variable_but_not_the_key(server, secret_keys):
    server.route = lambda r: Reply(401, f"Incorrect API key provided: {r.headers['authorization']}")
    with pytest.raises(LLMError) as info:
        client_for(server.url).complete([{"role": "user", "content": "x"}])
    assert str(info.value).endswith("(is $OPENAI_API_KEY set?)")
    assert "[redacted]" in str(info.value) and SECRET not in str(info.value)
    assert SECRET not in repr(client_for(server.url))


def test_concurrency_limit_bounds_requests_in_flight(server, secret_keys):
    two = threading.Event()

    def route(request):  # the first request waits for a second one in flight with it, then each takes a moment
        if server.in_flight >= 2:
            two.set()
        two.wait(60)
        return Reply(200, chat_reply("ok"), delay_s=0.1)

    server.route = route
    llm = client_for(server.url, max_concurrency=2)
    threads = [threading.Thread(target=llm.complete, args=([{"role": "user", "content": "x"}],)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(server.requests) == 6
    assert server.max_in_flight == 2
