"""An OpenAI-compatible teacher on a small loopback server writes a parsed, filtered trajectory end to end."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from traj_support import LOOP

from jaxseeker.agent import as_question
from jaxseeker.data import parse_record, tokenize_chat
from jaxseeker.synthesis import (
    OpenAITeacher,
    llm_rewriter,
    rewrite_thoughts,
    synthesize,
    template_rewriter,
    webdancer_funnel,
)
from jaxseeker.tools import LLMClient, LLMConfig


def scripted_reply(messages: list[dict]) -> str:
    """A tiny 'model' that reads the conversation: search the name, visit the first hit, read the birth year."""
    if messages[0]["content"].startswith("You rewrite the reasoning"):
        return "  Short thought: open the page.  "
    turns = sum(m["role"] == "assistant" for m in messages)
    if turns == 0:
        name = re.search(r"was (.+) born\?", messages[-1]["content"]).group(1)
        call = f'{{"name": "search", "arguments": {{"query": ["{name}"]}}}}'
        return f"<think>Find {name}.</think>\n<tool_call>\n{call}\n</tool_call>"
    if turns == 1:
        url = re.search(r"\[1\] .*\n(\S+)", messages[-1]["content"]).group(1)
        return (
            f'\n<think>Open the first hit.</think>\n<tool_call>\n{{"name": "visit", "arguments": {{"url": ["{url}"], '
            f'"goal": "birth year"}}}}\n</tool_call>\n<|im_end|>'
        )
    year = re.search(r"was born on \d+ \w+ (\d+)\.", messages[-1]["content"]).group(1)
    return f"<think>The page gives the date.</think>\n<answer>{year}</answer>"


@pytest.fixture(scope="module")
def server():
    """A chat-completions server on 127.0.0.1 (a thread); yields (base_url, received request bodies)."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append(body)
            message = {"role": "assistant", "content": scripted_reply(body["messages"])}
            if body["model"] == "reasoning" and "</think>" in message["content"]:  # as vLLM's reasoning parser
                thinking, _, text = message["content"].strip().removeprefix("<think>").partition("</think>")
                message = {"role": "assistant", "reasoning_content": thinking, "content": text.strip()}
            reply = {
                "model": body["model"],
                "choices": [{"message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", received
    httpd.shutdown()


def test_openai_teacher_writes_a_trajectory_through_the_real_loop(server, traj_world, traj_registry, traj_tokenizer):
    base_url, received = server
    people = [e for e in traj_world.entities.values() if e.type == "person"][:3]
    questions = [{"question": f"In what year was {p.name} born?", "answer": p.dates["born"][:4]} for p in people]
    client = LLMClient(LLMConfig(base_url=base_url, model="scripted", api_key_env="JAXSEEKER_TEST_NO_KEY"))
    records, stats = synthesize(
        OpenAITeacher(client, workers=2),
        traj_tokenizer,
        traj_registry,
        [as_question(q) for q in questions],
        webdancer_funnel(),
        tries=2,
        config=LOOP,
        progress=False,
    )
    assert len(records) == 3 and stats.episodes == 3, stats.summary(["validity", "correctness", "quality"])
    record = records[0]
    assert record["provenance"]["teacher"] == "openai" and record["prediction"] == questions[0]["answer"]
    roles = [m["role"] for m in record["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert "Search results for" in record["messages"][3]["content"] and "Page: " in record["messages"][5]["content"]
    assert record["messages"][4]["content"].startswith("<think>Open the first hit.")  # cleaned: stripped, no im_end
    trajectory = parse_record(record)  # jaxseeker.data reads the SFT record as it is
    ids, mask = tokenize_chat(trajectory.messages, traj_tokenizer)
    assert 0 < mask.sum() < len(ids)
    first = received[0]
    assert first["stop"] == ["<tool_response>"] and first["model"] == "scripted"
    assert '"name": "search"' in first["messages"][0]["content"]  # the loop's system prompt with the tool schemas


def test_a_reasoning_models_thinking_returned_apart_is_kept_in_think_tags(
    server, traj_world, traj_registry, traj_tokenizer
):
    base_url, _ = server
    person = next(e for e in traj_world.entities.values() if e.type == "person")
    question = {"question": f"In what year was {person.name} born?", "answer": person.dates["born"][:4]}
    client = LLMClient(LLMConfig(base_url=base_url, model="reasoning", api_key_env="JAXSEEKER_TEST_NO_KEY"))
    records, _ = synthesize(
        OpenAITeacher(client),
        traj_tokenizer,
        traj_registry,
        [as_question(question)],
        webdancer_funnel(),
        config=LOOP,
        progress=False,
    )
    turns = [m["content"] for m in records[0]["messages"] if m["role"] == "assistant"]
    assert turns[0].startswith(f"<think>\nFind {person.name}.\n</think>\n\n<tool_call>")  # long CoT kept
    assert turns[-1] == f"<think>\nThe page gives the date.\n</think>\n\n<answer>{question['answer']}</answer>"


def test_short_cot_rewrites_thoughts_and_keeps_actions(server, traj_world, traj_registry, traj_tokenizer):
    base_url, _ = server
    client = LLMClient(LLMConfig(base_url=base_url, model="scripted", api_key_env="JAXSEEKER_TEST_NO_KEY"))
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "<think>A long and winding thought.</think>\n<tool_call>\n"
            '{"name": "search", "arguments": {"query": ["Velmora"]}}\n</tool_call>',
        },
        {"role": "user", "content": "<tool_response>\nhits\n</tool_response>"},
        {"role": "assistant", "content": "<think>So it is nine.</think>\n<answer>nine</answer>"},
    ]
    rewritten = rewrite_thoughts(messages, llm_rewriter(client))
    assert rewritten[2]["content"] == (
        "<think>Short thought: open the page.</think>\n<tool_call>\n"
        '{"name": "search", "arguments": {"query": ["Velmora"]}}\n</tool_call>'
    )
    assert rewritten[3] == messages[3] and rewritten[4]["content"].endswith("\n<answer>nine</answer>")
    offline = rewrite_thoughts(messages, template_rewriter)
    assert offline[2]["content"].startswith("<think>Search for Velmora.</think>")
    assert offline[4]["content"] == "<think>The evidence gives nine.</think>\n<answer>nine</answer>"
