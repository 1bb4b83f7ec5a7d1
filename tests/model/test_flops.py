"""Parameter counts and FLOPs against transformers' own count."""

import time

import transformers

from jaxseeker import model
from jaxseeker.model import flops


def test_param_count_matches_transformers():
    hf_cfg = transformers.Qwen3MoeConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        mlp_only_layers=[0],
    )
    hf = transformers.AutoModelForCausalLM.from_config(hf_cfg)
    cfg = model.from_hf_dict(hf_cfg.to_dict())
    assert model.count_params(cfg) == sum(p.numel() for p in hf.parameters())


def test_flops_per_token_counts_active_experts_and_attention():
    dense = model.ModelConfig.tiny("qwen3")
    moe = model.ModelConfig.tiny("qwen3_moe", num_experts=8, num_experts_per_tok=2)
    assert flops.flops_per_token(dense, 0) == 2 * flops.active_params(dense)
    assert flops.flops_per_token(dense, 100) - flops.flops_per_token(dense, 0) == 4 * 2 * 4 * 16 * 100
    assert flops.active_params(moe) < model.count_params(moe)
    assert flops.flops_per_token(dense, 10, training=True) == 3 * flops.flops_per_token(dense, 10)


def test_a_ceiling_is_read_from_the_fastest_call_each_of_them_run_and_timed():
    """One call compiles, five are timed: the fastest of them is at most their mean, so at most the whole wall over
    five (what a measure slowed by other work on the machine would report instead)."""
    calls = []

    def f(x):
        calls.append(x)
        return x + 1

    start = time.perf_counter()
    fastest = flops.fastest_call(f, 1, repeats=5)
    wall = time.perf_counter() - start
    assert len(calls) == 6 and 0 < fastest <= wall / 5
    assert flops.matmul_ceiling(64, repeats=2) > 0
