"""Learning-rate schedule, weight-decay mask, clipping order and gradient accumulation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxseeker.train.optimizer import (
    OptimizerConfig,
    learning_rate_at,
    lr_schedule,
    make_optimizer,
    weight_decay_mask,
)

WEBSAILOR = OptimizerConfig(lr=5e-6, min_lr=1e-10, warmup_steps=10, total_steps=110, weight_decay=0.1)


@pytest.mark.parametrize(
    "step, expected",
    [
        (0, 0.0),  # warmup starts at 0
        (5, 2.5e-6),  # halfway up
        (10, 5e-6),  # peak
        (60, 1e-10 + (5e-6 - 1e-10) / 2),  # halfway down the cosine
        (110, 1e-10),  # the floor
        (1000, 1e-10),  # and it stays there
    ],
)
def test_warmup_then_cosine_to_min_lr(step, expected):
    assert float(lr_schedule(WEBSAILOR)(step)) == pytest.approx(expected, rel=1e-5, abs=1e-16)


def test_a_warmup_as_long_as_the_run_leaves_no_cosine_and_is_the_schedule():
    cfg = OptimizerConfig(lr=1e-3, min_lr=1e-5, warmup_steps=2, total_steps=2)  # optax refuses an empty cosine
    assert [float(lr_schedule(cfg)(n)) for n in (0, 1, 2, 5)] == pytest.approx([0.0, 5e-4, 1e-3, 1e-3])


def test_learning_rate_counts_updates_not_micro_steps():
    cfg = OptimizerConfig(lr=1.0, min_lr=0.0, warmup_steps=10, total_steps=100, grad_accum=4)
    assert [float(learning_rate_at(cfg, s)) for s in (0, 3, 4, 20)] == pytest.approx([0.0, 0.0, 0.1, 0.5])


def test_no_weight_decay_on_norms_and_biases():
    params = {"q": jnp.ones((2, 2)), "q_bias": jnp.ones(2), "blocks": ({"attn_norm": jnp.ones((3, 2))},)}
    assert weight_decay_mask(params) == {"q": True, "q_bias": False, "blocks": ({"attn_norm": False},)}
    cfg = OptimizerConfig(lr=0.1, min_lr=0.1, warmup_steps=0, total_steps=10, weight_decay=0.5)
    tx = make_optimizer(cfg)
    zero_grads = jax.tree.map(jnp.zeros_like, params)
    updates, _ = jax.jit(tx.update)(zero_grads, tx.init(params), params)
    new = optax.apply_updates(params, updates)
    np.testing.assert_allclose(new["q"], 1 - 0.1 * 0.5)  # decoupled decay: p - lr * wd * p
    np.testing.assert_allclose(new["q_bias"], 1.0)
    np.testing.assert_allclose(new["blocks"][0]["attn_norm"], 1.0)


def test_gradients_are_clipped_before_adam():
    cfg = OptimizerConfig(clip_norm=1.0, b1=0.9)
    params = {"w": jnp.zeros(4)}
    grads = {"w": jnp.array([30.0, 40.0, 0.0, 0.0])}  # global norm 50
    tx = make_optimizer(cfg)
    _, state = jax.jit(tx.update)(grads, tx.init(params), params)
    adam = state[1][0]
    np.testing.assert_allclose(adam.mu["w"], 0.1 * np.array([0.6, 0.8, 0.0, 0.0]), rtol=1e-6)  # (1 - b1) * g / |g|


def test_gradient_accumulation_averages_micro_batches():
    base = dict(lr=0.01, min_lr=0.01, warmup_steps=0, total_steps=10)
    params = {"w": jnp.array([1.0, -2.0, 3.0])}
    g1, g2 = {"w": jnp.array([0.2, 0.4, -0.6])}, {"w": jnp.array([0.6, -0.2, 0.2])}
    accum = make_optimizer(OptimizerConfig(**base, grad_accum=2))
    state = accum.init(params)
    first, state = jax.jit(accum.update)(g1, state, params)
    np.testing.assert_array_equal(first["w"], 0.0)  # nothing applied mid-accumulation
    second, _ = jax.jit(accum.update)(g2, state, params)
    single = make_optimizer(OptimizerConfig(**base))
    expected, _ = jax.jit(single.update)(jax.tree.map(lambda a, b: (a + b) / 2, g1, g2), single.init(params), params)
    np.testing.assert_allclose(second["w"], expected["w"], rtol=1e-6)


def test_bad_values_and_keys_are_named():
    with pytest.raises(ValueError, match="'min_lr': 0.1"):
        OptimizerConfig(lr=0.01, min_lr=0.1)
    with pytest.raises(ValueError, match=r"unknown keys \['learning_rate'\]; known keys: \['lr', "):
        OptimizerConfig.from_dict({"learning_rate": 1e-3})
