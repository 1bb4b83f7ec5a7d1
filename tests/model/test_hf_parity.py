"""The pure-JAX model against transformers on CPU in float32, for each supported family."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from jaxseeker import model

TOL = 1e-4
forward = jax.jit(model.forward, static_argnums=2)  # one compile per shape, as callers use it
decode = jax.jit(model.decode, static_argnums=2)


def _hf_config(family: str):
    common = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.15,
        rms_norm_eps=1e-6,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
    if family == "qwen2":
        return transformers.Qwen2Config(**common, rope_theta=10000.0, tie_word_embeddings=False)
    if family == "qwen3":
        return transformers.Qwen3Config(**common, head_dim=32, rope_theta=1e6, tie_word_embeddings=True)
    if family == "qwen3_moe":
        return transformers.Qwen3MoeConfig(
            **common,
            head_dim=16,
            num_experts=6,
            num_experts_per_tok=2,
            moe_intermediate_size=48,
            decoder_sparse_step=1,
            mlp_only_layers=[1],
            norm_topk_prob=True,
            tie_word_embeddings=False,
        )
    return transformers.LlamaConfig(
        **common,
        tie_word_embeddings=False,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    )


FAMILIES = ["qwen2", "qwen3", "qwen3_moe", "llama"]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory):
    """(name, HF torch model, checkpoint dir, our config, our params) for one family."""
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(_hf_config(request.param), attn_implementation="eager")
    hf.eval()
    path = tmp_path_factory.mktemp(request.param)
    hf.save_pretrained(path)
    cfg, params = model.load_hf(path)
    return request.param, hf, path, cfg, params


def _hf_logits(hf, ids, **kw) -> np.ndarray:
    with torch.no_grad():
        return hf(input_ids=torch.tensor(np.asarray(ids)), **kw).logits.numpy()


def test_logits_match_transformers(family):
    name, hf, _, cfg, params = family
    ids = np.random.default_rng(1).integers(0, cfg.vocab_size, (2, 24))
    ours = np.asarray(forward(params, jnp.asarray(ids), cfg))
    theirs = _hf_logits(hf, ids)
    assert np.abs(theirs).max() > 0.5, "logits near zero would make the comparison vacuous"
    delta = np.abs(ours - theirs).max()
    print(f"{name}: max|Δlogits| = {delta:.2e}")
    assert delta <= TOL


def test_left_padding_matches_transformers(family):
    _, hf, _, cfg, params = family
    ids = np.random.default_rng(2).integers(1, cfg.vocab_size, (2, 16))
    mask = np.ones_like(ids)
    mask[0, :5] = 0
    ids[0, :5] = 0
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    ours = np.asarray(
        forward(params, jnp.asarray(ids), cfg, segment_ids=jnp.asarray(mask), positions=jnp.asarray(positions))
    )
    theirs = _hf_logits(hf, ids, attention_mask=torch.tensor(mask), position_ids=torch.tensor(positions))
    real = mask.astype(bool)
    assert np.abs(ours[real] - theirs[real]).max() <= TOL


def test_packed_segments_equal_separate_sequences(family):
    _, hf, _, cfg, params = family
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, cfg.vocab_size, 9), rng.integers(0, cfg.vocab_size, 7)
    packed = np.concatenate([a, b, [0, 0]])[None]
    segments = np.array([[1] * 9 + [2] * 7 + [0, 0]])
    ours = np.asarray(forward(params, jnp.asarray(packed), cfg, segment_ids=jnp.asarray(segments)))[0]
    assert np.abs(ours[:9] - _hf_logits(hf, a[None])[0]).max() <= TOL
    assert np.abs(ours[9:16] - _hf_logits(hf, b[None])[0]).max() <= TOL


def test_incremental_decoding_with_cache_equals_full_forward(family):
    _, _, _, cfg, params = family
    ids = jnp.asarray(np.random.default_rng(4).integers(0, cfg.vocab_size, (2, 20)))
    full = forward(params, ids, cfg)
    cache = model.init_cache(cfg, batch=2, max_len=32)
    logits, cache = decode(params, ids[:, :12], cfg, cache)
    steps = [logits]
    for t in range(12, 20):
        logits, cache = decode(params, ids[:, t : t + 1], cfg, cache)
        steps.append(logits)
    assert np.abs(np.concatenate(steps, axis=1) - np.asarray(full)).max() <= TOL
    assert list(np.asarray(cache.end)) == [20, 20]


def _greedy(params, cfg, prompt: jnp.ndarray, n: int) -> np.ndarray:
    """Argmax decoding through the KV cache (a plain loop over `model.decode`)."""
    cache = model.init_cache(cfg, prompt.shape[0], prompt.shape[1] + n)
    logits, cache = decode(params, prompt, cfg, cache)
    out = []
    for _ in range(n):
        tok = jnp.argmax(logits[:, -1], axis=-1)[:, None]
        out.append(np.asarray(tok))
        logits, cache = decode(params, tok, cfg, cache)
    return np.concatenate(out, axis=1)


def test_greedy_decoding_matches_generate(family):
    _, hf, _, cfg, params = family
    prompt = np.random.default_rng(5).integers(1, cfg.vocab_size, (2, 8))
    ours = _greedy(params, cfg, jnp.asarray(prompt), 32)
    with torch.no_grad():
        theirs = hf.generate(torch.tensor(prompt), max_new_tokens=32, do_sample=False, pad_token_id=0)
    np.testing.assert_array_equal(ours, theirs[:, 8:].numpy())


def test_save_hf_loads_in_transformers_and_round_trips(family, tmp_path):
    _, _, _, cfg, params = family
    out = model.save_hf(params, cfg, tmp_path / "export", max_shard_bytes=64 << 10)
    assert (out / "model.safetensors.index.json").exists()
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out, attn_implementation="eager").eval()
    ids = np.random.default_rng(6).integers(0, cfg.vocab_size, (1, 10))
    ours = np.asarray(forward(params, jnp.asarray(ids), cfg))
    assert np.abs(ours - _hf_logits(reloaded, ids)).max() <= TOL
    cfg2, params2 = model.load_hf(out)
    assert cfg2 == cfg
    assert jax.tree.structure(params2) == jax.tree.structure(params)
    for x, y in zip(jax.tree.leaves(params), jax.tree.leaves(params2)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_load_hf_places_each_leaf_where_shardings_say(family):
    """`shardings` may be a function of the checkpoint's config; `abstract_params` gives it the params' shapes
    (the 8-device split is in tests/parallel/test_sharded_sft_step.py)."""
    _, _, path, cfg, params = family
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    seen = []

    def shardings(checkpoint_cfg):
        seen.append(checkpoint_cfg)
        abstract = model.abstract_params(checkpoint_cfg)
        assert jax.tree.map(lambda a: (a.shape, a.dtype), abstract) == jax.tree.map(
            lambda a: (a.shape, a.dtype), jax.eval_shape(model.init_params, checkpoint_cfg, jax.random.key(0))
        )
        return jax.tree.map(lambda _: cpu, abstract)

    cfg2, placed = model.load_hf(path, shardings=shardings)
    assert seen == [cfg2] == [cfg]
    for x, y in zip(jax.tree.leaves(params), jax.tree.leaves(placed), strict=True):
        assert y.sharding == cpu
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_constrain_sees_the_residual_stream_by_its_logical_axes_and_changes_no_logit(family):
    """`constrain` is where a training step lays activations out (`parallel.activation_constraint`); the model calls
    it on the embedding table and the looked-up rows, then on the residual stream after the embedding and in every
    layer group's scan body."""
    _, _, _, cfg, params = family
    seen = []

    def record(x, axes):
        seen.append((x.shape, axes))
        return x

    ids = jnp.asarray(np.random.default_rng(7).integers(0, cfg.vocab_size, (2, 9)))
    logits = model.forward(params, ids, cfg, constrain=record)
    lookup = [  # the table read split along the width, the looked-up rows laid out by `lookup_*` (parallel.rules)
        ((cfg.vocab_size, cfg.hidden_size), ("vocab", "lookup_embed")),
        ((2, 9, cfg.hidden_size), ("lookup_batch", "seq", "lookup_embed")),
    ]
    residual = [((2, 9, cfg.hidden_size), ("batch", "residual_seq", None))] * (1 + len(cfg.layer_groups))
    assert seen == lookup + residual
    np.testing.assert_array_equal(np.asarray(logits), np.asarray(model.forward(params, ids, cfg)))
