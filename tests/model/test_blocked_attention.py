"""Blocked attention (tiles skipped by the mask) against the dense reference: values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.model.blocked_attention import blocked_attention
from jaxseeker.model.layers import attention_mask, dot_attention

BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM = 2, 45, 4, 2, 8  # SEQ is not a multiple of the blocks tried


def segments() -> np.ndarray:
    """Row 0: two documents then right padding; row 1: three documents, one of them a single token."""
    seg = np.zeros((BATCH, SEQ), np.int32)
    seg[0, :13], seg[0, 13:37] = 1, 2
    seg[1, :20], seg[1, 20:21], seg[1, 21:] = 1, 2, 3
    return seg


def problem(seed: int = 0):
    """q, k, v, the packed mask `[batch, q, k]`, a cotangent zero on padding queries, the real-query mask."""
    rng = np.random.default_rng(seed)
    q = jnp.asarray(rng.normal(size=(BATCH, SEQ, HEADS, HEAD_DIM)), jnp.float32)
    k, v = (jnp.asarray(rng.normal(size=(BATCH, SEQ, KV_HEADS, HEAD_DIM)), jnp.float32) for _ in range(2))
    seg = jnp.asarray(segments())
    mask = attention_mask(jnp.broadcast_to(jnp.arange(SEQ), (BATCH, SEQ)), seg, seg)
    real = np.asarray(seg != 0)
    cot = jnp.asarray(rng.normal(size=q.shape), jnp.float32) * real[:, :, None, None]
    return q, k, v, mask, cot, real


@pytest.mark.parametrize("block", [4, 16, 64])
def test_values_and_gradients_match_dense_attention(block):
    q, k, v, mask, cot, real = problem()
    dense = jax.jit(lambda q, k, v: dot_attention(q, k, v, mask))
    blocked = jax.jit(lambda q, k, v: blocked_attention(q, k, v, mask, block=block))
    np.testing.assert_allclose(np.asarray(blocked(q, k, v))[real], np.asarray(dense(q, k, v))[real], atol=1e-5)
    grads = [jax.grad(lambda *a, f=f: jnp.sum(f(*a) * cot), argnums=(0, 1, 2))(q, k, v) for f in (dense, blocked)]
    assert float(jnp.abs(grads[0][1]).max()) > 0.1, "a vanishing key gradient would make the comparison vacuous"
    for want, got in zip(*grads):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_any_mask_and_unequal_lengths_match_dense_attention():
    rng = np.random.default_rng(3)
    q = jnp.asarray(rng.normal(size=(BATCH, 19, HEADS, HEAD_DIM)), jnp.float32)
    k, v = (jnp.asarray(rng.normal(size=(BATCH, 33, KV_HEADS, HEAD_DIM)), jnp.float32) for _ in range(2))
    mask = rng.uniform(size=(BATCH, 19, 33)) < 0.2  # not causal, not block-diagonal
    mask[:, 5] = False  # a query that sees no key
    seen = mask.any(-1)
    cot = jnp.asarray(rng.normal(size=q.shape), jnp.float32) * seen[:, :, None, None]
    mask = jnp.asarray(mask)
    dense = jax.jit(lambda q, k, v: dot_attention(q, k, v, mask))
    blocked = jax.jit(lambda q, k, v: blocked_attention(q, k, v, mask, block=8))
    np.testing.assert_allclose(np.asarray(blocked(q, k, v))[seen], np.asarray(dense(q, k, v))[seen], atol=1e-5)
    assert float(jnp.abs(blocked(q, k, v)[:, 5]).max()) == 0.0
    grads = [jax.grad(lambda *a, f=f: jnp.sum(f(*a) * cot), argnums=(0, 1, 2))(q, k, v) for f in (dense, blocked)]
    for want, got in zip(*grads):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_a_query_sees_only_its_segment_and_padding_queries_get_zeros():
    q, k, v, mask, _, _ = problem(seed=1)
    out = blocked_attention(q, k, v, mask, block=8)
    group = HEADS // KV_HEADS
    # the one-token document at row 1, position 20 attends only to itself
    np.testing.assert_allclose(out[1, 20], np.repeat(v[1, 20], group, axis=0), atol=1e-6)
    assert float(jnp.abs(out[0, 37:]).max()) == 0.0


def test_tiles_outside_the_mask_are_never_computed():
    q, k, v, mask, _, _ = problem(seed=2)
    # NaN values in row 0's first tile (positions 0-7, document 1): a dense product would spread them to
    # every query of the row (0 · NaN = NaN); queries 16-36 (document 2) must never touch that tile
    poisoned = v.at[0, :8].set(jnp.nan)
    assert np.isnan(np.asarray(dot_attention(q, k, poisoned, mask)[0, 16:37])).all()
    out = blocked_attention(q, k, poisoned, mask, block=8)
    ref = dot_attention(q, k, v, mask)
    np.testing.assert_allclose(np.asarray(out[0, 16:37]), np.asarray(ref[0, 16:37]), atol=1e-5)


def test_shapes_that_disagree_are_named():
    q, k, v, mask, _, _ = problem()
    with pytest.raises(ValueError, match="mask"):
        blocked_attention(q, k, v, mask[:, :10])
    with pytest.raises(ValueError, match="block"):
        blocked_attention(q, k, v, mask, block=0)
