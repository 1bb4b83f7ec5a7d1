"""TurnEngine: a text teacher behind the engine contract, its turns cut like a model's."""

from __future__ import annotations

import time

import pytest

from jaxseeker.agent.prompts import Renderer, engine_stops, initial_messages
from jaxseeker.synthesis.turn_engine import TurnEngine, parse_chat

MESSAGES = initial_messages("Which river flows through Velmora?", [], date="2025-01-01")


def _prompt(tokenizer) -> list[int]:
    return Renderer(tokenizer).prompt_ids(MESSAGES)


def test_a_turn_is_the_writer_text_then_end_of_turn(traj_tokenizer):
    seen = []
    engine = TurnEngine(
        traj_tokenizer, lambda m, rid: seen.append((m, rid)) or "<think>x</think>\n<answer>Ostra</answer>"
    )
    engine.submit("0:0", _prompt(traj_tokenizer), max_new_tokens=100)
    [event] = engine.step()
    assert seen == [(MESSAGES, "0:0")]  # the writer reads the decoded conversation
    text = Renderer(traj_tokenizer).decode(event.tokens)
    assert text == "<think>x</think>\n<answer>Ostra</answer><|im_end|>" and event.reason == "eos"
    assert event.logprobs == [0.0] * len(event.tokens) and not engine.has_work()
    engine.extend(
        "0:0",
        Renderer(traj_tokenizer).encode("\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n"),
        max_new_tokens=5,
    )
    [event] = engine.step()
    assert event.reason == "length" and len(event.tokens) == 5
    assert seen[-1][0][-2:] == [
        {"role": "assistant", "content": "<think>x</think>\n<answer>Ostra</answer>"},
        {"role": "user", "content": "ok"},
    ]


def test_stop_strings_context_and_writer_errors(traj_tokenizer):
    eos, stops = engine_stops(traj_tokenizer)
    engine = TurnEngine(
        traj_tokenizer,
        lambda m, rid: "<think>a</think><tool_response>made up</tool_response>",
        eos_ids=eos,
        stop_strings=stops,
    )
    engine.submit("a", _prompt(traj_tokenizer), max_new_tokens=100)
    [event] = engine.step()
    assert event.reason == "stop" and event.stop == "<tool_response>"
    assert Renderer(traj_tokenizer).decode(event.tokens).endswith("</think><tool_response>")
    prompt = _prompt(traj_tokenizer)
    short = TurnEngine(traj_tokenizer, lambda m, rid: "word " * 50, max_len=len(prompt) + 10)
    short.submit("b", prompt, max_new_tokens=100)
    [event] = short.step()
    assert event.reason == "context" and len(event.tokens) == 10 and short.context_left("b") == 0

    def broken(messages, rid):
        raise RuntimeError("teacher down")

    failing = TurnEngine(traj_tokenizer, broken)
    failing.submit("c", prompt, max_new_tokens=10)
    [event] = failing.step()
    assert Renderer(traj_tokenizer).decode(event.tokens) == "<|im_end|>"
    assert [(rid, str(exc)) for rid, exc in failing.errors] == [("c", "teacher down")]


def test_threaded_writer_blocks_step_until_a_turn_is_ready(traj_tokenizer):
    def slow(messages, rid):
        time.sleep(0.05 if rid == "slow" else 0.0)
        return f"<think>{rid}</think>\n<answer>x</answer>"

    engine = TurnEngine(traj_tokenizer, slow, workers=2, slots=2)
    engine.submit("slow", _prompt(traj_tokenizer), max_new_tokens=50)
    engine.submit("fast", _prompt(traj_tokenizer), max_new_tokens=50)
    assert engine.free_slots() == 0
    with pytest.raises(ValueError, match="no free slot"):
        engine.submit("third", _prompt(traj_tokenizer), max_new_tokens=50)
    got = []
    while engine.has_work():
        got += [e.request_id for e in engine.step()]
    assert sorted(got) == ["fast", "slow"]
    engine.release("slow")
    assert engine.free_slots() == 1
    engine.close()


def test_parse_chat_reads_complete_messages_only():
    text = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ\nmore<|im_end|>\n<|im_start|>assistant\n"
    assert parse_chat(text) == [{"role": "system", "content": "S"}, {"role": "user", "content": "Q\nmore"}]
    with pytest.raises(ValueError, match="no chatml messages"):
        parse_chat("plain text")
