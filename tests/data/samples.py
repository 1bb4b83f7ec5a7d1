"""Crafted trajectories and a deterministic text corpus for the data tests."""

import json
import random

_WORDS = (
    "the a of in on to and city river museum capital founded year population search visit page answer "
    "question entity born died wrote painter novel bridge tower station university Paris Lyon Rhine Berlin "
    "first second third which who when where how many people according result query think about need find"
).split()


def sentences(n: int, seed: int = 0) -> list[str]:
    """Deterministic pseudo-sentences with numbers, JSON and the agent's tags."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 14)))
        out.append(f"{words.capitalize()} {rng.randint(1, 2025)}.")
        if i % 5 == 0:
            out.append(json.dumps({"name": "search", "arguments": {"query": words}}))
    return out


ASSISTANT_1 = (
    '<think>I should search.</think>\n<tool_call>{"name": "search", "arguments": {"query": "Rhine city"}}</tool_call>'
)
ASSISTANT_2 = (
    '<think>Two results, visit one.</think>\n<tool_call>{"name": "visit", "arguments": {"url": "p/1"}}</tool_call>'
)
ASSISTANT_3 = "<think>The page says Lyon.</think>\n<answer>Lyon</answer>"


def webdancer_messages() -> list[dict]:
    """Observations as user messages starting with <tool_response> (WebDancer samples)."""
    return [
        {"role": "system", "content": "You are a deep search agent."},
        {"role": "user", "content": "Which city on the river was founded first?"},
        {"role": "assistant", "content": ASSISTANT_1},
        {
            "role": "user",
            "content": (
                "<tool_response>\n1. Lyon museum\n</tool_response>\n<tool_response>\n2. Berlin tower\n</tool_response>"
            ),
        },
        {"role": "assistant", "content": ASSISTANT_2},
        {"role": "user", "content": "<tool_response>\nLyon was founded in 43.\n</tool_response>"},
        {"role": "assistant", "content": ASSISTANT_3},
    ]


def openseeker_messages() -> list[dict]:
    """The same conversation with `tool` messages (two consecutive ones are one observation)."""
    return [
        {"role": "system", "content": "You are a deep search agent."},
        {"role": "user", "content": "Which city on the river was founded first?"},
        {"role": "assistant", "content": ASSISTANT_1},
        {"role": "tool", "content": "1. Lyon museum"},
        {"role": "tool", "content": "2. Berlin tower"},
        {"role": "assistant", "content": ASSISTANT_2},
        {"role": "tool", "content": "Lyon was founded in 43."},
        {"role": "assistant", "content": ASSISTANT_3},
    ]


def make_records(n: int, seed: int = 0) -> list[dict]:
    """n varied trajectories (1-3 tool calls each) as JSONL-ready dicts with an 'id' key."""
    rng = random.Random(seed)
    text = sentences(4 * n, seed=seed + 1)
    records = []
    for i in range(n):
        messages = [{"role": "user", "content": f"Question {i}: {text[4 * i]}"}]
        for k in range(rng.randint(1, 3)):
            messages.append(
                {
                    "role": "assistant",
                    "content": f"<think>{text[4 * i + 1][: 20 + 7 * k]}</think>\n"
                    f'<tool_call>{{"name": "search", "arguments": {{"query": "q{k}"}}}}</tool_call>',
                }
            )
            messages.append({"role": "tool", "content": text[4 * i + 2][: 10 + 13 * k]})
        messages.append({"role": "assistant", "content": f"<answer>{text[4 * i + 3][:15]}</answer>"})
        records.append({"id": i, "messages": messages})
    return records
