"""The scripted engine follows the Engine contract: slots, chunks of steps, EOS, stop strings, length, context."""

import pytest
from agent_support import ANSWER, SEARCH

from jaxseeker.agent import Renderer, ScriptedEngine


def drain(engine):
    events, calls = [], 0
    while engine.has_work():
        events += engine.step()
        calls += 1
    return events, calls


def test_turns_pause_on_eos_stop_strings_and_length(tokenizer):
    render = Renderer(tokenizer)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    engine = ScriptedEngine(
        tokenizer, [SEARCH, ANSWER], slots=2, eos_ids=[im_end], stop_strings=["</answer>"], steps_per_call=4
    )
    prompt = render.encode("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n")
    engine.submit("a", prompt, max_new_tokens=100)
    engine.submit("b", prompt, max_new_tokens=5)
    assert engine.free_slots() == 0
    with pytest.raises(ValueError, match="no free slot"):
        engine.submit("c", prompt, max_new_tokens=5)

    events, calls = drain(engine)
    by_id = {e.request_id: e for e in events}
    assert by_id["a"].reason == "eos" and by_id["a"].tokens == render.encode(SEARCH + "<|im_end|>")
    assert calls == -(-len(by_id["a"].tokens) // 4)  # steps_per_call tokens per call
    assert by_id["b"].reason == "length" and len(by_id["b"].tokens) == 5
    assert by_id["a"].logprobs == [0.0] * len(by_id["a"].tokens)

    engine.extend("a", render.encode("\n<|im_start|>user\nobs<|im_end|>\n<|im_start|>assistant\n"), max_new_tokens=100)
    [event], _ = drain(engine)
    assert (event.reason, event.stop) == ("stop", "</answer>")
    assert render.decode(event.tokens) == ANSWER  # the stop string is kept
    engine.release("a")
    assert engine.free_slots() == 1


def test_a_full_cache_pauses_with_reason_context(tokenizer):
    render = Renderer(tokenizer)
    prompt = render.encode("<|im_start|>assistant\n")
    engine = ScriptedEngine(tokenizer, [SEARCH], max_len=len(prompt) + 6)
    engine.submit("a", prompt, max_new_tokens=100)
    [event], _ = drain(engine)
    assert event.reason == "context" and len(event.tokens) == 6 and engine.context_left("a") == 0


def test_a_callable_script_reads_the_context(tokenizer):
    render = Renderer(tokenizer)
    engine = ScriptedEngine(tokenizer, lambda context, turn: f"<answer>{turn}:{context.count('user')}</answer>")
    engine.submit("a", render.encode("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"), max_new_tokens=50)
    [event], _ = drain(engine)
    assert render.decode(event.tokens) == "<answer>0:1</answer><|im_end|>"
