"""Malformed and hostile requests over loopback: each is a 4xx in OpenAI's error shape whose `param` names the bad
field, never a 500 or a hung connection, and the server answers the next request as before."""

import logging
import math
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from serve_support import MODEL_NAME, SHAPE

from jaxseeker.serve import protocol

MESSAGES = [{"role": "user", "content": "Where is the bridge?"}]


def _post(server, body, path: str = "/v1/chat/completions", **headers: str) -> httpx.Response:
    """POST `body` (bytes as they are, anything else as JSON) with Content-Type application/json by default."""
    content = body if isinstance(body, bytes) else httpx.Request("POST", "/", json=body).content
    headers = {"content-type": "application/json", **headers}
    return httpx.post(server.url + path, content=content, headers={k: v for k, v in headers.items() if v}, timeout=60)


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def _chat(**fields) -> dict:
    return {"model": MODEL_NAME, "messages": MESSAGES, "max_tokens": 4, **fields}


def _still_serving(server) -> None:
    r = _post(server, _chat(temperature=0))
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("length", "stop")


@pytest.mark.parametrize(
    ("messages", "param", "says"),
    [
        ([MESSAGES[0], "hi"], "messages[1]", "expected an object with 'role' and 'content', got a string"),
        ([{"role": "wizard", "content": "hi"}], "messages[0].role", "expected one of ['system', 'developer'"),
        ([{"content": "hi"}], "messages[0].role", "got None"),
        (
            [MESSAGES[0], {"role": "assistant", "content": "ok"}, {"role": "user", "content": 7}],
            "messages[2].content",
            "expected a string or a list of text parts, got an integer",
        ),
        ([{"role": "user", "content": {"text": "hi"}}], "messages[0].content", "got an object"),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}],
                }
            ],
            "messages[0].content[1]",
            "got a 'image_url' part",
        ),
        ([{"role": "user", "content": ["hi"]}], "messages[0].content[0]", "got a string"),
    ],
)
def test_a_bad_message_is_named_down_to_its_field(server, messages, param, says):
    error = _error(_post(server, _chat(messages=messages)), 400)
    assert error["param"] == param and error["message"].startswith(param + ":") and says in error["message"]


def test_fields_of_the_wrong_json_type_say_what_was_expected(server):
    for field, value, says in [
        ("max_tokens", "5", "'max_tokens' must be an integer, got a string '5'"),
        ("max_tokens", True, "must be an integer, got a boolean"),
        ("temperature", True, "'temperature' must be a number, got a boolean True"),
        ("n", 2.0, "'n' must be an integer, got a number 2.0"),
        ("seed", "7", "'seed' must be an integer, got a string"),
        ("stream", "yes", "'stream' must be a boolean, got a string"),
        ("stop", {"a": 1}, "'stop' must be a string or an array, got an object"),
    ]:
        error = _error(_post(server, _chat(**{field: value})), 400)
        assert (error["param"], error["type"]) == (field, "invalid_request_error") and says in error["message"]
    error = _error(_post(server, _chat(stream=True, stream_options={"include_usage": "yes"})), 400)
    assert error["param"] == "stream_options.include_usage"
    _still_serving(server)


def test_numbers_out_of_range_are_400s_never_500s(server):
    raw = b'{"model": "tiny-policy", "messages": [{"role": "user", "content": "hi"}], "%s": %s}'
    for field, literal in [
        ("temperature", b"NaN"),
        ("temperature", b"1" + b"0" * 400),
        ("top_p", b"0"),
        ("top_p", b"Infinity"),
        ("max_tokens", b"-1"),
        ("n", b"0"),
        ("n", b"1000"),
        ("seed", str(2**64).encode()),
    ]:  # 10**400 has no float; OpenAI's seed is an int64
        error = _error(_post(server, raw % (field.encode(), literal)), 400)
        assert error["param"] == field and len(error["message"]) < 300


def test_a_prompt_longer_than_the_context_says_how_long_it_is(server):
    error = _error(_post(server, _chat(messages=[{"role": "user", "content": "river " * 300}], max_tokens=None)), 400)
    assert (error["code"], error["param"]) == ("context_length_exceeded", "messages")
    assert f"maximum context length is {SHAPE.max_len} tokens" in error["message"]
    assert "leaving no room for a completion" in error["message"] and "-" not in error["message"].split("However")[1]


def test_tool_fields_are_refused_rather_than_ignored(server):
    for field, value in [
        ("tools", [{"type": "function", "function": {"name": "search"}}]),
        ("tool_choice", "required"),
        ("tool_choice", {"type": "function", "function": {"name": "search"}}),
        ("function_call", {"name": "search"}),
    ]:
        error = _error(_post(server, _chat(**{field: value})), 400)
        assert error["param"] == field and "not supported" in error["message"]
    assert _post(server, _chat(tool_choice="none", temperature=0)).status_code == 200  # nothing to choose: harmless


def test_a_vanishing_temperature_or_top_p_samples_greedily_with_finite_logprobs(server):
    greedy = _post(server, _chat(temperature=0)).json()["choices"][0]["message"]["content"]
    for fields in ({"temperature": 1e-30}, {"temperature": 1.0, "top_p": 1e-300}):  # 1e-300 is 0 in float32
        r = _post(server, _chat(logprobs=True, seed=1, **fields))
        assert r.status_code == 200, r.text  # logits / 1e-30 overflowed into an infinite log-prob: a 500
        choice = r.json()["choices"][0]
        assert choice["message"]["content"] == greedy
        assert all(math.isfinite(t["logprob"]) for t in choice["logprobs"]["content"])


def test_only_a_json_content_type_is_read(server):
    # text/plain and a missing type are what a web page may post cross-origin without a CORS preflight
    for content_type in ("text/plain", "application/x-www-form-urlencoded", ""):
        error = _error(_post(server, _chat(), **{"content-type": content_type}), 415)
        assert error["code"] == "unsupported_media_type" and "application/json" in error["message"]
    assert _post(server, _chat(), **{"content-type": "application/json; charset=utf-8"}).status_code == 200


def test_a_body_over_the_limit_is_413_before_it_is_read_and_the_server_goes_on(server, monkeypatch):
    read = []
    monkeypatch.setattr(protocol, "parse_params", lambda body, **_: read.append(body))  # what a read body meets first
    limit = server.served.max_body_bytes
    body = b'{"model": "tiny-policy", "messages": [{"role": "user", "content": "' + b"a" * limit + b'"}]}'
    error = _error(_post(server, body), 413)
    assert error["code"] == "request_too_large" and str(limit) in error["message"]
    assert read == []  # answered from the Content-Length, the body neither decoded nor tokenized
    monkeypatch.undo()
    _still_serving(server)


def test_an_unexpected_failure_is_a_json_500_and_the_next_request_is_served(server, monkeypatch):
    def broken(body):
        raise RuntimeError("a bug")

    monkeypatch.setattr(protocol, "parse_messages", broken)
    error = _error(_post(server, _chat()), 500)
    assert error["type"] == "server_error" and "RuntimeError" in error["message"]
    monkeypatch.undo()
    _still_serving(server)


def _wait_for(value: Callable[[], Any]) -> Any:
    """The first true `value()`, polled (the server runs on its own thread)."""
    deadline = time.monotonic() + 60
    while not (got := value()):
        assert time.monotonic() < deadline, "the server did not get there in 60 s"
        time.sleep(0.01)
    return got


def test_a_client_that_leaves_while_sending_its_body_logs_no_error(server):
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = records.append
    logging.getLogger("uvicorn.error").addHandler(handler)
    try:
        earlier = set(server.state.tasks)
        with socket.create_connection((server.host, server.port)) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100000\r\n\r\n{"model": '
            )
            [request] = _wait_for(lambda: set(server.state.tasks) - earlier)  # the app is reading the body
        _wait_for(request.done)  # the app has seen the client leave and ended (after any error it logs)
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
    assert [r.getMessage() for r in records] == []
    _still_serving(server)
