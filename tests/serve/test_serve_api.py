"""The server through the official `openai` client over loopback: chat and completions, plain and streamed,
stops, greedy equality with `generation.generate`, seeds and `n`, 32 concurrent clients, a client that
leaves mid-stream, and OpenAI-shaped errors."""

import concurrent.futures
import json
import time

import httpx
import openai
import pytest
from serve_support import MODEL_NAME, SHAPE

from jaxseeker.data.chat import render_generation_prompt
from jaxseeker.generation import generate
from jaxseeker.serve import eos_ids

MESSAGES = [{"role": "user", "content": "How many arches has the bridge of the river town?"}]


def _decode(tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_models_and_health(client, server):
    assert [m.id for m in client.models.list().data] == [MODEL_NAME]
    assert client.models.retrieve(MODEL_NAME).id == MODEL_NAME
    health = httpx.get(server.url + "/health").json()
    assert (health["status"], health["slots"], health["max_len"]) == ("ok", SHAPE.slots, SHAPE.max_len)


def test_greedy_chat_and_completions_equal_generate(client, policy):
    cfg, params, tokenizer = policy
    chat_prompt = render_generation_prompt(MESSAGES, tokenizer).tolist()
    text_prompt = "The bridge of the river town"
    prompts = [chat_prompt, tokenizer(text_prompt, add_special_tokens=False)["input_ids"]]
    want = generate(
        params,
        cfg,
        prompts,
        max_new_tokens=24,
        eos_ids=eos_ids(tokenizer),
        slots=SHAPE.slots,
        steps_per_call=SHAPE.steps_per_call,
    )
    expected = []
    for result in want:
        ended = result.reason == "eos"
        expected.append(
            (
                _decode(tokenizer, result.tokens[:-1] if ended else result.tokens),
                "stop" if ended else "length",
                len(result.tokens),
            )
        )
    assert len(set(want[1].tokens)) > 4, "a constant continuation would make the comparison vacuous"

    chat = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=24, temperature=0)
    assert (chat.choices[0].message.content, chat.choices[0].finish_reason, chat.usage.completion_tokens) == expected[0]
    assert chat.usage.prompt_tokens == len(chat_prompt) and chat.choices[0].message.role == "assistant"

    text = client.completions.create(model=MODEL_NAME, prompt=text_prompt, max_tokens=24, temperature=0, logprobs=0)
    assert (text.choices[0].text, text.choices[0].finish_reason, text.usage.completion_tokens) == expected[1]
    n_out = len(text.choices[0].logprobs.token_logprobs)
    assert text.choices[0].logprobs.token_logprobs == pytest.approx(want[1].logprobs[:n_out], abs=1e-4)
    by_ids = client.completions.create(model=MODEL_NAME, prompt=prompts[1], max_tokens=24, temperature=0)
    assert by_ids.choices[0].text == expected[1][0]


def test_a_resent_conversation_shares_the_pages_its_first_turn_left(client, server, policy):
    """A client sends a question, then the conversation with the answer and a new question: the second request takes
    the first prompt's tokens from the pages the first request left, and answers as `generate` does."""
    cfg, params, tokenizer = policy
    engine = server.served.scheduler.engine
    question = [{"role": "user", "content": "Which town has the bridge?"}]
    first = client.chat.completions.create(model=MODEL_NAME, messages=question, max_tokens=8, temperature=0)
    history = [
        *question,
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "How long is it?"},
    ]
    before = engine.shared_tokens
    second = client.chat.completions.create(model=MODEL_NAME, messages=history, max_tokens=8, temperature=0)
    assert engine.shared_tokens - before >= first.usage.prompt_tokens - 1  # at least the first prompt's
    prompt = render_generation_prompt(history, tokenizer).tolist()
    (want,) = generate(params, cfg, [prompt], max_new_tokens=8, eos_ids=eos_ids(tokenizer), slots=SHAPE.slots)
    ended = want.reason == "eos"
    assert second.choices[0].message.content == _decode(tokenizer, want.tokens[:-1] if ended else want.tokens)


def test_streamed_chat_equals_the_plain_answer(client):
    plain = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=20, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model=MODEL_NAME,
            messages=MESSAGES,
            max_tokens=20,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == plain.choices[0].message.content
    finished = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finished == [plain.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_a_stop_sequence_cuts_plain_and_streamed_text(client):
    kw = {
        "model": MODEL_NAME,
        "prompt": "The glass village",
        "max_tokens": 40,
        "temperature": 0,
        "extra_body": {"ignore_eos": True},
    }
    full = client.completions.create(**kw).choices[0].text
    stop = next(
        full[i : i + 3] for i in range(4, len(full) - 3) if full.find(full[i : i + 3]) == i and full[i : i + 3].strip()
    )
    cut = full[: full.index(stop)]
    plain = client.completions.create(**kw, stop=[stop, "never-sampled"]).choices[0]
    assert (plain.text, plain.finish_reason) == (cut, "stop")
    streamed = list(client.completions.create(**kw, stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in streamed) == cut
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_seeds_reproduce_and_n_choices_differ(client):
    kw = {"model": MODEL_NAME, "messages": MESSAGES, "max_tokens": 12, "temperature": 1.0, "n": 3, "seed": 11}
    first = client.chat.completions.create(**kw)
    again = client.chat.completions.create(**kw)
    texts = [c.message.content for c in first.choices]
    assert [c.index for c in first.choices] == [0, 1, 2]
    assert texts == [c.message.content for c in again.choices]
    assert len(set(texts)) == 3


def test_32_concurrent_clients_are_all_answered(client, server):
    prompts = [f"The {w} of the river town" for w in ("bridge", "chapel", "market", "tower")]

    def ask(i: int) -> str:
        out = client.completions.create(model=MODEL_NAME, prompt=prompts[i % 4], max_tokens=8, temperature=0)
        return out.choices[0].text

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(ask, range(32)))
    assert all(answers[i] == answers[i % 4] for i in range(32)), "batching must not change greedy answers"
    health = httpx.get(server.url + "/health").json()
    assert (health["running"], health["waiting"], health["slots_free"]) == (0, 0, SHAPE.slots)


def test_a_client_leaving_mid_stream_frees_its_slot(server):
    before = httpx.get(server.url + "/health").json().get("cancelled", 0)
    body = {
        "model": MODEL_NAME,
        "prompt": "The river",
        "max_tokens": 120,
        "temperature": 1.0,
        "stream": True,
        "ignore_eos": True,
    }
    with httpx.Client(base_url=server.url, timeout=60) as http, http.stream("POST", "/v1/completions", json=body) as r:
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first[6:])["choices"][0]["index"] == 0
    deadline = time.monotonic() + 30
    while (health := httpx.get(server.url + "/health").json())["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (health["running"], health["slots_free"], health["cancelled"]) == (0, SHAPE.slots, before + 1)


def test_errors_are_shaped_as_openai_does(client, server):
    r = httpx.post(
        server.url + "/v1/chat/completions",
        content=b'{"model": "tiny-policy", "messages": [',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/completions", json=[1, 2])
    assert r.status_code == 400 and "JSON object" in r.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, temperature=3.5)
    assert bad.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "wizard", "content": "hi"}])
    assert bad.value.body["param"] == "messages[0].role"
    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model=MODEL_NAME, prompt="river " * 200, max_tokens=8)
    assert bad.value.code == "context_length_exceeded"
    assert f"maximum context length is {SHAPE.max_len}" in str(bad.value)
    with pytest.raises(openai.NotFoundError) as missing:
        client.completions.create(model="gpt-4o", prompt="hi", max_tokens=2)
    assert missing.value.code == "model_not_found"
    r = httpx.get(server.url + "/v1/nothing-here")
    assert r.status_code == 404 and "error" in r.json()


def test_hostile_bodies_get_openai_errors_and_leave_the_engine_serving(server):
    def post(body: bytes) -> httpx.Response:
        return httpx.post(
            server.url + "/v1/completions", content=body, headers={"content-type": "application/json"}, timeout=60
        )

    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"model": "tiny-policy", "seed": ' + b"7" * 5000 + b"}"):
        r = post(body)  # too deep for the JSON parser; an integer too long for Python to read
        assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = post(b'{"model": "x\\ud800", "prompt": "hi"}')  # a lone surrogate cannot be written back as UTF-8
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = post(b'{"model": "tiny-policy", "prompt": "The river \\udc00", "max_tokens": 2}')
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
    # a top_k beyond the engine's int32 keeps every token, like any top_k above the vocabulary
    r = httpx.post(
        server.url + "/v1/completions",
        timeout=60,
        json={"model": MODEL_NAME, "prompt": "The river", "max_tokens": 2, "top_k": 10**12},
    )
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("length", "stop")
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
