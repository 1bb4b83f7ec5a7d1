"""HFEngine, transformers' `generate` behind the Engine's interface: the same events as jaxseeker's Engine for the
same requests on the same tiny random checkpoint (turns, extensions, stops, a full context)."""

import pytest
import torch
import transformers

from jaxseeker import model
from jaxseeker.data import train_tokenizer
from jaxseeker.generation import Engine
from jaxseeker.generation.hf_engine import HFEngine

from .reference import random_prompts

MAX_LEN = 64  # one attention window: the engine compiles once
TEXTS = ["The river town was founded by a weaver; its old bridge has nine arches and a chapel."] * 20


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """(tokenizer, hf model, cfg, params) of a tiny random Qwen3 saved as an HF directory with its tokenizer."""
    path = tmp_path_factory.mktemp("tiny")
    tokenizer = train_tokenizer(TEXTS, 300, path)
    torch.manual_seed(0)
    config = transformers.Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        initializer_range=0.15,  # wide init: greedy turns are not constant
        tie_word_embeddings=True,
        pad_token_id=0,
    )
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    hf.save_pretrained(path)
    cfg, params = model.load_hf(path)
    return tokenizer, hf, cfg, params


def engines(checkpoint, **stops):
    """jaxseeker's Engine and HFEngine over the checkpoint, 2 slots of MAX_LEN tokens, the same stops."""
    tokenizer, hf, cfg, params = checkpoint
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)  # noqa: E731
    ours = Engine(
        params,
        cfg,
        slots=2,
        max_len=MAX_LEN,
        steps_per_call=4,
        prefill_chunk=8,
        decode=decode,
        **stops,
    )
    return ours, HFEngine(hf, tokenizer, slots=2, max_len=MAX_LEN, **stops)


def turns(engine, requests: dict[str, list[int]], max_new_tokens: int) -> dict[str, tuple]:
    """Submit (or extend, for held ids) every request, step until each has paused: id -> (tokens, logprobs, reason,
    stop)."""
    for rid, tokens in requests.items():
        try:
            engine.context_left(rid)
        except ValueError:
            engine.submit(rid, tokens, max_new_tokens=max_new_tokens)
        else:
            engine.extend(rid, tokens, max_new_tokens=max_new_tokens)
    events = {}
    while len(events) < len(requests):
        events |= {e.request_id: (e.tokens, e.logprobs, e.reason, e.stop) for e in engine.step()}
    return events


def assert_same(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for rid in ours:
        (tokens, logprobs, reason, stop), (hf_tokens, hf_logprobs, hf_reason, hf_stop) = ours[rid], theirs[rid]
        assert (tokens, reason, stop) == (hf_tokens, hf_reason, hf_stop), rid
        # float32 log-softmax of two implementations of one 2-layer forward: agree to ~1e-6 of logits of size ~1
        assert max(abs(a - b) for a, b in zip(logprobs, hf_logprobs, strict=True)) < 1e-4


def test_turns_and_extensions_match_the_engine(checkpoint):
    ours, theirs = engines(checkpoint)
    a, b = random_prompts([7, 12], seed=3, vocab=len(checkpoint[0]))
    first = {"a": a, "b": b}
    assert_same(turns(ours, first, 6), turns(theirs, first, 6))  # two prompts, 6-token turns ("length")
    observation = {"a": random_prompts([5], seed=4, vocab=len(checkpoint[0]))[0]}
    second_ours, second_theirs = turns(ours, observation, 8), turns(theirs, observation, 8)
    assert_same(second_ours, second_theirs)  # the turn continues after the observation, from its cache
    assert len(set(second_theirs["a"][0])) > 2, "a constant continuation would make the comparison vacuous"
    until_full = {"b": [5, 6, 7]}  # b holds 12 + 6 + 3 tokens: its next turn runs into the end of the context
    last_ours, last_theirs = turns(ours, until_full, 100), turns(theirs, until_full, 100)
    assert_same(last_ours, last_theirs)
    assert last_theirs["b"][2] == "context" and len(last_theirs["b"][0]) == MAX_LEN - 21
    assert theirs.context_left("b") == ours.context_left("b") == 0
    theirs.release("a")
    assert theirs.free_slots() == 1 and not theirs.has_work()


def test_a_stop_string_and_an_eos_id_end_the_turn_where_the_engine_ends_it(checkpoint):
    tokenizer = checkpoint[0]
    prompt = random_prompts([9], seed=5, vocab=len(tokenizer))[0]
    free = turns(engines(checkpoint)[1], {"x": prompt}, 12)["x"][0]
    text = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    # the first token from the third on whose text did not appear before it: the turn must stop right after it
    j = next(
        j for j in range(2, len(free)) if text(free[j : j + 1]).strip() and text(free[j : j + 1]) not in text(free[:j])
    )
    for stops, reason in (({"stop_strings": (text(free[j : j + 1]),)}, "stop"), ({"eos_ids": (free[j],)}, "eos")):
        ours, theirs = engines(checkpoint, **stops)
        ours_events, hf_events = turns(ours, {"x": prompt}, 12), turns(theirs, {"x": prompt}, 12)
        assert_same(ours_events, hf_events)
        assert hf_events["x"][0] == free[: j + 1] and hf_events["x"][2] == reason


def test_misuse_names_the_request(checkpoint):
    theirs = engines(checkpoint)[1]
    theirs.submit("a", [1, 2, 3], max_new_tokens=2)
    with pytest.raises(ValueError, match="request 'a' already holds a slot"):
        theirs.submit("a", [1, 2], max_new_tokens=2)
    with pytest.raises(ValueError, match="request 'a' is not paused"):
        theirs.extend("a", [4], max_new_tokens=2)
    theirs.submit("b", [1], max_new_tokens=2)
    with pytest.raises(ValueError, match="no free slot for 'c'"):
        theirs.submit("c", [1], max_new_tokens=2)
    with pytest.raises(ValueError, match=r"unknown request 'z' \(held: \['a', 'b'\]\)"):
        theirs.release("z")
    with pytest.raises(ValueError, match="prompt of 'd' has 65 tokens; needs 1..64"):
        HFEngine(checkpoint[1], checkpoint[0], slots=1, max_len=MAX_LEN).submit("d", [1] * 65, max_new_tokens=1)
