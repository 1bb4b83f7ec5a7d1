"""The bounded queue (429, then served once the engine runs) and the API key, on a server whose engine
thread starts only when the test says so."""

import concurrent.futures
import json
import socket
import time

import httpx
import openai
import pytest
from serve_support import MODEL_NAME, SHAPE

from jaxseeker.generation import Engine
from jaxseeker.serve import Background, Scheduler, Served, eos_ids

KEY = "s3cret-test-key"


def _wait_for(server, key: str, value: int) -> None:
    deadline = time.monotonic() + 30
    while httpx.get(server.url + "/health").json()[key] != value:
        assert time.monotonic() < deadline, f"/health never showed {key}={value}"
        time.sleep(0.02)


def test_a_full_queue_answers_429_and_a_client_that_leaves_is_never_run(policy):
    cfg, params, tokenizer = policy
    engine = Engine(
        params,
        cfg,
        slots=SHAPE.slots,
        max_len=SHAPE.max_len,
        steps_per_call=SHAPE.steps_per_call,
        prefill_chunk=SHAPE.prefill_chunk,
    )
    scheduler = Scheduler(engine, eos_ids=eos_ids(tokenizer), max_queue=3)  # not started: nothing leaves the queue
    with Background(Served(scheduler, tokenizer, MODEL_NAME, SHAPE.max_len, api_key=KEY)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
        ask = {"model": MODEL_NAME, "prompt": "The river town", "max_tokens": 4, "temperature": 0}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            queued = pool.submit(client.completions.create, **ask, n=2)
            _wait_for(server, "waiting", 2)
            body = json.dumps(ask).encode()
            leaving = socket.create_connection((server.host, server.port))  # leaves when the test says
            leaving.sendall(
                f"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            _wait_for(server, "waiting", 3)
            with pytest.raises(openai.RateLimitError) as full:
                client.completions.create(**ask)
            assert full.value.status_code == 429 and full.value.code == "rate_limit_exceeded"
            with pytest.raises(openai.BadRequestError, match="exceed the 3 the server can queue"):
                client.completions.create(**ask, n=4)  # could never fit: a bad request, not a busy server
            leaving.close()  # before any answer
            _wait_for(server, "waiting", 2)  # the server saw the client leave and dropped its request
            scheduler.start()
            assert [c.finish_reason for c in queued.result(timeout=60).choices] in (["length"] * 2, ["stop"] * 2)
        _wait_for(server, "running", 0)
        health = httpx.get(server.url + "/health").json()
        assert (health["completed"], health["cancelled"], health["waiting"]) == (2, 1, 0)
        assert client.completions.create(**ask).choices[0].text == queued.result().choices[0].text


def test_an_api_key_guards_v1_but_not_health(policy):
    cfg, params, tokenizer = policy
    engine = Engine(params, cfg, slots=1, max_len=SHAPE.max_len)
    with Background(Served(Scheduler(engine).start(), tokenizer, MODEL_NAME, SHAPE.max_len, api_key=KEY)) as server:
        assert httpx.get(server.url + "/health").status_code == 200
        for key in ("wrong", None):
            headers = {} if key is None else {"Authorization": f"Bearer {key}"}
            r = httpx.get(server.url + "/v1/models", headers=headers)
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
            assert KEY not in r.text
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).models.list()
        good = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
        assert [m.id for m in good.models.list().data] == [MODEL_NAME]
        assert "s3cret" not in repr(server.served)
