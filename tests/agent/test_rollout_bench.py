"""`jaxseeker bench rollout --model`: the same greedy episodes on jaxseeker's Engine and on HF `generate`, a random
tiny Llama and a tiny tool-calling model, each saved as an HF directory, over a small synthetic world."""

import json

import pytest
import torch
import transformers

from jaxseeker import model
from jaxseeker.agent import RolloutConfig, prompts, tool_calling_model
from jaxseeker.agent.rollout_bench import SIDE_NAMES, SIDES, compare_rollouts, format_comparison
from jaxseeker.cli import main
from jaxseeker.data import train_tokenizer
from jaxseeker.synthesis.qa import get_recipe
from jaxseeker.tools import ToolsConfig, build_registry
from jaxseeker.world import open_world

WORLD = "synthetic:60"
CONTEXT = 1024  # the engine's cache length
CALL = '{"name": "search", "arguments": {"query": ["river town founded"]}}'


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAXSEEKER_CACHE", str(tmp_path_factory.mktemp("cache")))
        return open_world(WORLD)


@pytest.fixture(scope="module")
def registry(world):
    return build_registry(ToolsConfig(enabled=("search", "visit")), corpus=world.corpus)


def test_random_llama_episodes_agree_token_for_token(tmp_path, world, registry):
    texts = [page.text for page in list(world.corpus.pages)[:40]]
    texts += [prompts.system_prompt(registry.schemas(), date="2026-01-01")] * 3
    tokenizer = train_tokenizer(texts, 500, tmp_path)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        initializer_range=0.3,  # wide init: turns of varied tokens, argmax margins far above float32 noise
        tie_word_embeddings=True,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    questions = [r.to_json() for r in get_recipe("e2hqa")(world, 3, seed=0).records]
    limits = RolloutConfig(
        max_tool_calls=2,
        max_context_tokens=CONTEXT,
        max_tokens_per_turn=16,
        answer_reserve_tokens=16,
        date="2026-01-01",
        prompt="compact",
    )

    result = compare_rollouts(tmp_path, registry, questions, limits, slots=2)

    ours, theirs = result["sides"]["jaxseeker"], result["sides"]["hf"]
    assert ours["episodes"] == theirs["episodes"] == 3 and result["questions"] == 3
    # A greedy choice flips between the two float32 forwards only where the top two logits are within ~1e-5 of
    # each other; this model's logits spread over units, so none of its ~150 choices does: every episode agrees.
    assert result["identical_episodes"] == 3 and result["max_logprob_diff"] < 1e-4
    for key in ("sampled_tokens", "context_tokens", "tool_calls", "terminations", "pass_at_1"):
        assert ours[key] == theirs[key], key
    assert ours["terminations"] == {"format_error": 3}  # random weights write no tool call: 3 error turns each
    assert 3 * 3 <= ours["sampled_tokens"] <= 3 * 3 * 16 < ours["context_tokens"]  # 3 turns of 1..16 tokens each
    assert result["speedup"] == pytest.approx(theirs["wall_s"] / ours["wall_s"])
    for side in (ours, theirs):
        assert side["tokens_per_s"] == pytest.approx(side["sampled_tokens"] / side["wall_s"])
        assert len(side["runs_s"]) == result["repeats"] == 1

    assert result["roofline_s"] > 0  # the work of the 3 episodes (its terms are tested in tests/generation)
    table = format_comparison(result).splitlines()
    assert table[-2].startswith("roofline of the episodes' work")
    assert table[0].startswith("greedy ReAct rollouts, 3 questions, 2 slots, context 1024, 16 tokens a turn")
    assert table[1].split() == [
        "one",
        "run",
        "seconds",
        "episodes",
        "sampled",
        "tokens/s",
        "context",
        "tool",
        "calls",
        "pass@1",
    ]
    assert [row[:22].strip() for row in table[2:4]] == [SIDE_NAMES[side] for side in SIDES]
    assert table[2].split()[-6:-4] == ["3", str(ours["sampled_tokens"])] and table[-1].startswith(
        "episodes with identical greedy tokens: 3/3"
    )


def test_bench_rollout_command_runs_a_saved_model_through_the_tools(tmp_path, world, monkeypatch, capsys):
    monkeypatch.setenv("JAXSEEKER_CACHE", str(tmp_path / "cache"))
    tokenizer, cfg, params = tool_calling_model(CALL, mean_think_tokens=1.0)  # greedy: a search call every turn
    model.save_hf(params, cfg, tmp_path / "model")
    tokenizer.save_pretrained(str(tmp_path / "model"))

    code = main(
        [
            "bench",
            "rollout",
            "--hf-path",
            str(tmp_path / "model"),
            "--world",
            WORLD,
            "--episodes",
            "2",
            "--slots",
            "2",
            "--tool-calls",
            "1",
            "--max-context",
            str(CONTEXT),
            "--json",
            "--no-progress",
        ]
    )

    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    ours, theirs = result["sides"]["jaxseeker"], result["sides"]["hf"]
    assert (result["questions"], result["max_context"], result["max_tool_calls"]) == (2, CONTEXT, 1)
    assert result["max_tokens_per_turn"] == 128  # the demo recipe's eval limit
    # a search, whose observation the second turn reads, then a second call ends the episode
    assert ours["terminations"] == theirs["terminations"] == {"max_tool_calls": 2}
    assert ours["tool_calls"] == theirs["tool_calls"] == 2 and result["identical_episodes"] == 2
