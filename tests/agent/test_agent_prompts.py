"""System prompt, observation format and the Renderer: rendered exactly as the SFT data renders messages."""

import json

from agent_support import ANSWER, DATE, QUESTION, SEARCH

from jaxseeker.agent import Renderer, format_observation, initial_messages, system_prompt
from jaxseeker.agent.prompts import engine_stops
from jaxseeker.data import normalize_messages, render_generation_prompt, tokenize_chat
from jaxseeker.tools import answer_submit_tool


def test_system_prompt_has_the_tags_the_date_and_every_schema(registry):
    text = system_prompt(registry.schemas(), date=DATE)
    assert f"Current date: {DATE}" in text
    for tag in ("<think>", "<tool_call>", "<tool_response>", "<answer>"):
        assert tag in text
    tools = text.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(line) for line in tools] == registry.schemas()
    assert "answer_submit" not in text
    assert "answer_submit tool" in system_prompt(registry.extended(answer_submit_tool(str)).schemas(), date=DATE)


def test_observation_is_the_canonical_form_of_tool_messages():
    as_tools = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": SEARCH},
        {"role": "tool", "content": "result one"},
        {"role": "tool", "content": "result two"},
    ]
    canonical = normalize_messages(as_tools)[-1]
    assert canonical == {"role": "user", "content": format_observation(["result one", "result two"])}
    assert (
        canonical["content"]
        == "<tool_response>\nresult one\n</tool_response>\n<tool_response>\nresult two\n</tool_response>"
    )


def test_prompt_turn_and_extension_ids_concatenate_to_the_sft_ids(tokenizer, registry):
    render = Renderer(tokenizer)
    messages = initial_messages(QUESTION, registry.schemas(), date=DATE)
    observation = {"role": "user", "content": format_observation(["Velmora has a bridge of nine arches."])}
    turn = {"role": "assistant", "content": SEARCH}

    prompt = render.prompt_ids(messages)
    sampled = render.encode(SEARCH + "<|im_end|>")
    extension = render.extension_ids([*messages, turn], observation)
    longer = [*messages, turn, observation]
    assert prompt + sampled + extension == render_generation_prompt(longer, tokenizer).tolist()

    final = [*longer, {"role": "assistant", "content": ANSWER}]
    ids = prompt + sampled + extension + render.encode(ANSWER + "<|im_end|>") + render.tail_ids(final)
    assert ids == tokenize_chat(final, tokenizer)[0].tolist()
    assert render.turn_content(sampled) == (SEARCH, True)
    assert render.turn_content(sampled[:-1]) == (SEARCH, False)


def test_engine_stops_end_turns_at_im_end(tokenizer):
    eos_ids, stops = engine_stops(tokenizer)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in eos_ids
    assert tokenizer.convert_tokens_to_ids("<|endoftext|>") in eos_ids
    assert stops == ("<tool_response>",)


def test_compact_system_prompt_names_every_tool_in_one_line(registry):
    full = system_prompt(registry.schemas(), date=DATE)
    compact = system_prompt(registry.schemas(), date=DATE, compact=True)
    assert len(compact) < len(full) / 3 and f"Current date: {DATE}" in compact
    for tag in ("<think>", "<tool_call>", "<answer>"):
        assert tag in compact
    tools = next(line for line in compact.splitlines() if line.startswith("Tools: "))
    for schema in registry.schemas():
        function = schema["function"]
        assert f"{function['name']}({', '.join(function['parameters']['properties'])})" in tools
    assert initial_messages(QUESTION, registry.schemas(), date=DATE, compact=True)[0]["content"] == compact
