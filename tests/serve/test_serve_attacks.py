"""Attacks on `jaxseeker serve` over loopback, each beside a normal client that is answered: request bodies that
drip in until every connection slot is held, a Host header of another name (DNS rebinding), megabyte prompts that
would hold the one tokenizing thread, and a keyless server bound off loopback."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from serve_support import MODEL_NAME, SHAPE

import jaxseeker.data.chat
from jaxseeker.cli import build_parser
from jaxseeker.serve import Background, Served, build_served
from jaxseeker.serve.bound import PromptBound, prompt_bound
from jaxseeker.serve.connections import ConnectionLimits
from jaxseeker.serve.hosts import host_allowed

SLOTS = 4  # connections the guarded server keeps open at most
ASK = {"model": MODEL_NAME, "max_tokens": 2, "temperature": 0}


@pytest.fixture(scope="module")
def guarded(policy):
    """A server with a 1 s request deadline, 4 connections at most, and one extra Host name allowed."""
    served = build_served(*policy, model_name=MODEL_NAME, shape=SHAPE, allowed_hosts=("models.internal",))
    limits = ConnectionLimits(header_timeout_s=60, request_timeout_s=1.0, max_connections=SLOTS)
    with Background(served, limits=limits) as running:
        yield running


def _chat(server, content: str, **headers: str) -> httpx.Response:
    body = {**ASK, "messages": [{"role": "user", "content": content}]}
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=60)


def _answered(r: httpx.Response) -> None:
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] in ("length", "stop")


# --- slow bodies ------------------------------------------------------------------------------------------------


def _drip(conn: socket.socket, head: bytes) -> None:
    """Send `head`, then one body byte every 0.05 s until the server closes the connection (or 20 s pass)."""
    conn.sendall(head)
    for _ in range(400):
        try:
            conn.sendall(b" ")
        except OSError:
            return
        time.sleep(0.05)


def test_bodies_dripping_into_every_slot_are_cut_at_the_deadline_and_a_client_is_answered(guarded):
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n" + b'{"model": "tiny-policy", "messages": [{"role": "user", "content": "'
    )
    conns = [socket.create_connection((guarded.host, guarded.port), timeout=20) for _ in range(SLOTS)]
    threads = [threading.Thread(target=_drip, args=(c, head), daemon=True) for c in conns]
    for thread in threads:
        thread.start()
    replies = []
    for conn in conns:
        with conn:
            data = b""
            while chunk := conn.recv(4096):  # the server closes it; a socket timeout (20 s) fails the test
                data += chunk
            replies.append(data)
    for thread in threads:
        thread.join(30)
    assert all(r.startswith(b"HTTP/1.1 408 ") and b"request_timeout" in r for r in replies), replies
    for _ in range(100):  # once the server has seen them close (a moment later), a new client is served
        try:
            reply = _chat(guarded, "Where is the bridge?")
            break
        except httpx.TransportError:  # closed at once: the server has not yet counted the closed ones out
            time.sleep(0.05)
    _answered(reply)


# --- Host -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["attacker.example", "attacker.example:8000", "localhost.attacker.example", "10.9.8.7"]
)
def test_a_host_of_another_name_is_refused_before_the_model_runs(guarded, host):
    completed = httpx.get(f"{guarded.url}/health").json()["completed"]
    for r in (
        _chat(guarded, "Where is the bridge?", Host=host),
        httpx.get(f"{guarded.url}/v1/models", headers={"Host": host}),
    ):
        assert r.status_code == 400
        error = r.json()["error"]
        assert error["code"] == "invalid_host" and "--allowed-host" in error["message"]
    assert httpx.get(f"{guarded.url}/health").json()["completed"] == completed


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST.:{port}", "app.localhost:{port}", "127.0.0.1:{port}", "models.internal:{port}"]
)
def test_localhost_names_this_address_and_allowed_names_are_answered(guarded, host):
    _answered(_chat(guarded, "Where is the bridge?", Host=host.format(port=guarded.port)))


@pytest.mark.parametrize(
    "header, local, allowed, ok",
    [
        ("[::1]:8000", "::1", (), True),
        ("127.3.2.1", "127.0.0.1", (), True),  # all of 127.0.0.0/8 is this machine
        ("10.0.0.5:8000", "10.0.0.5", (), True),  # the address the client dialled (a server bound to 0.0.0.0)
        ("10.0.0.5:8000", "::ffff:10.0.0.5", (), True),  # on a dual-stack socket
        ("10.0.0.6", "10.0.0.5", (), False),
        ("gpu-box:8000", "10.0.0.5", (), False),
        ("GPU-box.:8000", "10.0.0.5", ("gpu-box",), True),
        ("anything.example", "10.0.0.5", ("*",), True),
    ],
)
def test_host_allowed(header, local, allowed, ok):
    assert host_allowed(header, local, allowed) is ok


def test_a_keyless_server_is_refused_off_loopback_before_the_model_loads(monkeypatch):
    monkeypatch.delenv("JAXSEEKER_API_KEY", raising=False)
    args = build_parser().parse_args(["serve", "--model", "no/such/model", "--host", "0.0.0.0"])
    with pytest.raises(SystemExit) as refused:
        args.func(args)  # the model path does not exist: reaching the loader would fail otherwise
    assert str(refused.value.code).startswith("jaxseeker serve: --host 0.0.0.0 is reachable from other machines")
    assert "$JAXSEEKER_API_KEY" in str(refused.value.code)


# --- megabyte prompts -------------------------------------------------------------------------------------------


@pytest.fixture
def tokenizer_calls(monkeypatch) -> list[str]:
    """Every prompt the server renders or tokenizes, counted (the real functions still run)."""
    calls: list[str] = []
    render, encode = jaxseeker.data.chat.render_generation_prompt, Served.encode
    monkeypatch.setattr(
        jaxseeker.data.chat, "render_generation_prompt", lambda m, t: calls.append("render") or render(m, t)
    )
    monkeypatch.setattr(Served, "encode", lambda self, text: calls.append("encode") or encode(self, text))
    return calls


def test_a_megabyte_prompt_is_refused_before_tokenization_and_a_small_one_is_served(guarded, tokenizer_calls):
    big = "river " * 170_000  # 1,020,000 bytes: within the body limit, far over what 128 tokens can hold
    bound = guarded.served.prompt_bound
    chat = _chat(guarded, big)
    completion = httpx.post(f"{guarded.url}/v1/completions", json={**ASK, "prompt": ["The town", big]}, timeout=60)
    for r, param in ((chat, "messages"), (completion, "prompt")):
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert (error["code"], error["param"]) == ("context_length_exceeded", param)
        assert f"has {len(big)} bytes of text, more than {bound.max_units} bytes" in error["message"]
    assert tokenizer_calls == []  # neither prompt reached the tokenizer (nor the small one sent beside the big one)
    _answered(_chat(guarded, "Where is the bridge?"))
    assert tokenizer_calls == ["render"]


def test_the_bound_is_the_longest_token_times_the_context(policy):
    tokenizer = policy[2]
    longest = max(len(t) for t in tokenizer.get_vocab())  # "</tool_response>": one special token of 16 bytes
    assert longest == 16
    assert prompt_bound(tokenizer, SHAPE.max_len) == PromptBound(SHAPE.max_len * longest, True, "NFC")


def test_a_prompt_at_the_bound_is_tokenized_and_one_over_is_not(guarded, tokenizer_calls):
    """128 copies of the longest token fill the bound exactly: tokenized (128 tokens, no room left), never refused
    unseen; one byte more cannot fit and is refused unseen."""
    at_bound = "</tool_response>" * SHAPE.max_len
    r = httpx.post(f"{guarded.url}/v1/completions", json={**ASK, "prompt": at_bound, "max_tokens": None}, timeout=60)
    assert r.json()["error"]["message"].endswith(
        f"However, your prompt has {SHAPE.max_len} tokens, leaving no room for a completion. "
        "Please reduce the prompt or the completion length."
    )
    assert tokenizer_calls == ["encode"]
    r = httpx.post(f"{guarded.url}/v1/completions", json={**ASK, "prompt": at_bound + "a"}, timeout=60)
    assert "bytes of text" in r.json()["error"]["message"] and tokenizer_calls == ["encode"]


def test_composed_text_is_counted_as_the_tokenizer_composes_it():
    bound = PromptBound(2048, byte_level=True, compose="NFC")
    decomposed = "e\u0301"  # 3 bytes; NFC makes it "é", 2 bytes
    assert bound.oversized([decomposed * 1000]) is None  # 3000 bytes as sent, 2000 once composed: may fit
    assert bound.oversized([decomposed * 1100]) == 2200
    assert PromptBound(None).oversized(["x" * 10**6]) is None  # a tokenizer without a sound bound: never refused
