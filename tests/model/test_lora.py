"""LoRA adapters: merge against float64 numpy, zero-B adapters change nothing, attached equals merged, the
adapters' gradients follow the chain rule through the full-weight gradient, and bad configs name the key."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from jaxseeker import model
from jaxseeker.parallel import DEFAULT_RULES, MESH_AXES, logical_to_spec

forward = jax.jit(model.forward, static_argnums=2)
LORA = model.LoraConfig(rank=4, alpha=8.0)  # s = 2
# The product A·B of each target in the axes' own letters (l layers, x experts, e embed, h heads, d head_dim,
# m mlp, r lora_rank): written out here, not derived as `merge_lora` derives it.
DENSE = {
    "q": "ler,lrhd->lehd",
    "k": "ler,lrhd->lehd",
    "v": "ler,lrhd->lehd",
    "o": "lhdr,lre->lhde",
    "gate": "ler,lrm->lem",
    "up": "ler,lrm->lem",
    "down": "lmr,lre->lme",
}
EXPERTS = {"gate": "lxer,lxrm->lxem", "up": "lxer,lxrm->lxem", "down": "lxmr,lxre->lxme"}


def _random_adapters(cfg, lora, seed=0, scale=0.3):
    """Adapters with B drawn too (a trained state), so the low-rank term is not zero."""
    adapters = model.init_lora(cfg, lora, jax.random.PRNGKey(seed))
    keys = iter(jax.random.split(jax.random.PRNGKey(seed + 1), 64))
    return jax.tree.map(lambda x: scale * jax.random.normal(next(keys), x.shape), adapters)


@pytest.mark.parametrize("family", ["llama", "qwen3_moe"])
def test_merge_adds_the_scaled_low_rank_product(family):
    cfg = model.ModelConfig.tiny(family)
    params = model.init_params(cfg, jax.random.PRNGKey(0))
    adapters = _random_adapters(cfg, LORA)
    merged = model.merge_lora(params, adapters, cfg, LORA)
    for (moe, _), group, adapted, out in zip(cfg.layer_groups, params["blocks"], adapters["blocks"], merged["blocks"]):
        assert sorted(adapted) == sorted(model.lora.TARGETS)
        for name in group:
            w = np.asarray(group[name], np.float64)
            if name not in adapted:
                np.testing.assert_array_equal(np.asarray(out[name]), np.asarray(group[name]))
                continue
            a, b = (np.asarray(adapted[name][k], np.float64) for k in ("a", "b"))
            equation = EXPERTS[name] if moe and name in EXPERTS else DENSE[name]
            want = w + LORA.scale * np.einsum(equation, a, b)
            assert np.abs(want - w).max() > 0.1  # the update is not negligible
            np.testing.assert_allclose(np.asarray(out[name]), want, rtol=0, atol=2e-6)


@pytest.mark.parametrize("family", ["qwen3", "qwen3_moe"])
def test_fresh_adapters_leave_the_model_exactly_as_it_was(family):
    cfg = model.ModelConfig.tiny(family)
    params = model.init_params(cfg, jax.random.PRNGKey(0))
    adapters = model.init_lora(cfg, LORA, jax.random.PRNGKey(1))
    a = np.asarray(adapters["blocks"][0]["o"]["a"])  # [layers, heads, head_dim, lora_rank]: fan-in heads · head_dim
    bound = 1 / np.sqrt(cfg.num_heads * cfg.head_dim)
    assert a.shape == (2, cfg.num_heads, cfg.head_dim, 4) and 0.9 * bound < np.abs(a).max() <= bound
    assert all(not np.any(np.asarray(ab["b"])) for group in adapters["blocks"] for ab in group.values())
    ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 12)))
    base = np.asarray(forward(params, ids, cfg))
    np.testing.assert_array_equal(np.asarray(forward(model.attach_lora(params, adapters, LORA), ids, cfg)), base)
    merged = model.merge_lora(params, adapters, cfg, LORA)
    for x, y in zip(jax.tree.leaves(merged), jax.tree.leaves(params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("family", ["qwen2", "qwen3_moe"])
def test_attached_adapters_compute_what_merged_weights_compute(family):
    cfg = model.ModelConfig.tiny(family)
    params = model.init_params(cfg, jax.random.PRNGKey(0))
    lora = model.LoraConfig(rank=3, alpha=6.0, targets=("q", "o", "up", "down"))
    adapters = _random_adapters(cfg, lora)
    ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 12)))
    attached = np.asarray(forward(model.attach_lora(params, adapters, lora), ids, cfg))
    merged = np.asarray(forward(model.merge_lora(params, adapters, cfg, lora), ids, cfg))
    base = np.asarray(forward(params, ids, cfg))
    assert np.abs(attached - base).max() > 0.1  # the adapters change the logits
    np.testing.assert_allclose(attached, merged, rtol=0, atol=2e-5 * np.abs(base).max())


def test_adapter_gradients_are_the_chain_rule_of_the_weight_gradient():
    """dL/dA = s · dL/dW · Bᵀ and dL/dB = s · Aᵀ · dL/dW, with dL/dW the plain model's gradient at the merged weights:
    the attached path (never forming W + s·A·B) differentiates as LoRA's definition says."""
    cfg = model.ModelConfig.tiny("llama")
    params = model.init_params(cfg, jax.random.PRNGKey(0))
    adapters = _random_adapters(cfg, LORA)
    ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 10)))

    def loss(params):  # mean log-likelihood of the next token
        logp = jax.nn.log_softmax(model.forward(params, ids[:, :-1], cfg))
        return -jnp.mean(jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1))

    grads = jax.jit(jax.grad(lambda ad: loss(model.attach_lora(params, ad, LORA))))(adapters)
    weight_grads = jax.jit(jax.grad(loss))(model.merge_lora(params, adapters, cfg, LORA))
    group, g_w, g_ad = adapters["blocks"][0], weight_grads["blocks"][0], grads["blocks"][0]
    s = LORA.scale
    for name in model.lora.TARGETS:
        a, b = (np.asarray(group[name][k], np.float64) for k in ("a", "b"))
        g = np.asarray(g_w[name], np.float64)  # [layers, in…, out…]
        flat_a = a.reshape(a.shape[0], -1, a.shape[-1])  # [layers, in, lora_rank]
        flat_b = b.reshape(b.shape[0], b.shape[1], -1)  # [layers, lora_rank, out]
        flat_g = g.reshape(g.shape[0], flat_a.shape[1], -1)  # [layers, in, out]
        want_a = s * np.einsum("lio,lro->lir", flat_g, flat_b).reshape(a.shape)
        want_b = s * np.einsum("lir,lio->lro", flat_a, flat_g).reshape(b.shape)
        for got, want in ((g_ad[name]["a"], want_a), (g_ad[name]["b"], want_b)):
            assert np.abs(want).max() > 1e-4, name
            np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=2e-3 * np.abs(want).max(), err_msg=name)


def test_adapter_axes_shard_like_their_weights_with_the_rank_whole():
    cfg = model.ModelConfig.tiny("qwen3")
    axes, shapes = model.lora_axes(cfg, LORA), model.lora_shapes(cfg, LORA)
    assert jax.tree.structure(axes, is_leaf=lambda x: isinstance(x, tuple)) == jax.tree.structure(
        shapes, is_leaf=lambda x: isinstance(x, tuple)
    )
    q, o = axes["blocks"][0]["q"], axes["blocks"][0]["o"]
    assert q == {"a": ("layers", "embed", "lora_rank"), "b": ("layers", "lora_rank", "heads", "head_dim")}
    assert o == {"a": ("layers", "heads", "head_dim", "lora_rank"), "b": ("layers", "lora_rank", "embed")}
    mesh = AbstractMesh((2, 2, 2, 1, 1), MESH_AXES)  # data, fsdp, tensor, expert, context
    assert logical_to_spec(q["a"], DEFAULT_RULES, mesh, shapes["blocks"][0]["q"]["a"]) == P(None, "fsdp", None)
    assert logical_to_spec(q["b"], DEFAULT_RULES, mesh, shapes["blocks"][0]["q"]["b"]) == P(None, None, "tensor", None)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"rank": -1}, "lora.rank: must be an integer >= 0"),
        ({"rank": 2.5}, "lora.rank: must be an integer >= 0"),
        ({"rank": 8, "alpha": 0}, "lora.alpha: must be a number > 0, got 0"),
        ({"rank": 8, "targets": ["q", "q_proj"]}, "lora.targets: 'q_proj' is not one of \\['q', 'k', 'v', 'o', 'gate'"),
        ({"rank": 8, "targets": []}, "lora.targets: give each of"),
    ],
)
def test_bad_lora_values_name_the_key(values, message):
    with pytest.raises(model.ConfigError, match=message):
        model.LoraConfig(**values)
