"""Blocked attention (tiles skipped by the token coordinates) against the dense reference: values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.model.blocked_attention import (
    Coords,
    blocked_attention,
    blocked_backward,
    blocked_forward,
    merge_partials,
    row_coords,
)
from jaxseeker.model.layers import attention_mask, dot_attention

BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM = 2, 45, 4, 2, 8  # SEQ is not a multiple of the blocks tried


def segments() -> np.ndarray:
    """Row 0: two documents then right padding; row 1: three documents, one of them a single token."""
    seg = np.zeros((BATCH, SEQ), np.int32)
    seg[0, :13], seg[0, 13:37] = 1, 2
    seg[1, :20], seg[1, 20:21], seg[1, 21:] = 1, 2, 3
    return seg


def problem(seed: int = 0):
    """q, k, v, the rows' coordinates, the packed mask `[batch, q, k]` of the dense reference, a cotangent zero on
    padding queries, the real-query mask."""
    rng = np.random.default_rng(seed)
    q = jnp.asarray(rng.normal(size=(BATCH, SEQ, HEADS, HEAD_DIM)), jnp.float32)
    k, v = (jnp.asarray(rng.normal(size=(BATCH, SEQ, KV_HEADS, HEAD_DIM)), jnp.float32) for _ in range(2))
    seg = jnp.asarray(segments())
    mask = attention_mask(jnp.broadcast_to(jnp.arange(SEQ), (BATCH, SEQ)), seg, seg)
    real = np.asarray(seg != 0)
    cot = jnp.asarray(rng.normal(size=q.shape), jnp.float32) * real[:, :, None, None]
    return q, k, v, row_coords(seg), mask, cot, real


@pytest.mark.parametrize("block", [4, 16, 64])
def test_values_and_gradients_match_dense_attention(block):
    q, k, v, coords, mask, cot, real = problem()
    dense = jax.jit(lambda q, k, v: dot_attention(q, k, v, mask))
    blocked = jax.jit(lambda q, k, v: blocked_attention(q, k, v, coords, block=block))
    np.testing.assert_allclose(np.asarray(blocked(q, k, v))[real], np.asarray(dense(q, k, v))[real], atol=1e-5)
    grads = [
        jax.jit(jax.grad(lambda *a, f=f: jnp.sum(f(*a) * cot), argnums=(0, 1, 2)))(q, k, v) for f in (dense, blocked)
    ]
    assert float(jnp.abs(grads[0][1]).max()) > 0.1, "a vanishing key gradient would make the comparison vacuous"
    for want, got in zip(*grads):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def dense_from_coords(q, k, v, qc: Coords, kc: Coords):
    """The dense reference with the mask the coordinates give: same segment (not padding), key index ≤ query's."""
    mask = (qc.segment[:, :, None] == kc.segment[:, None, :]) & (kc.segment[:, None, :] != 0)
    return dot_attention(q, k, v, mask & (kc.index[:, None, :] <= qc.index[:, :, None]))


def scattered_problem():
    """Queries and keys of unequal lengths whose coordinates come in no order: a row permuted, keys from
    elsewhere in it, segments interleaved, a query that sees no key."""
    rng = np.random.default_rng(3)
    q = jnp.asarray(rng.normal(size=(BATCH, 19, HEADS, HEAD_DIM)), jnp.float32)
    k, v = (jnp.asarray(rng.normal(size=(BATCH, 33, KV_HEADS, HEAD_DIM)), jnp.float32) for _ in range(2))
    qc = Coords(
        jnp.asarray(rng.permutation(40)[:19][None].repeat(BATCH, 0), jnp.int32),
        jnp.asarray(rng.integers(0, 3, (BATCH, 19)), jnp.int32),
    )
    kc = Coords(
        jnp.asarray(rng.permutation(40)[:33][None].repeat(BATCH, 0), jnp.int32),
        jnp.asarray(rng.integers(0, 3, (BATCH, 33)), jnp.int32),
    )
    qc = Coords(qc.index.at[:, 5].set(-1), qc.segment.at[:, 5].set(1))  # before every key: sees none
    return q, k, v, qc, kc


def test_any_coordinates_and_unequal_lengths_match_dense_attention():
    q, k, v, qc, kc = scattered_problem()
    dense = jax.jit(dense_from_coords)(q, k, v, qc, kc)
    mask = (qc.segment[:, :, None] == kc.segment[:, None, :]) & (kc.segment[:, None, :] != 0)
    seen = np.asarray((mask & (kc.index[:, None, :] <= qc.index[:, :, None])).any(-1))
    assert not seen[:, 5].any() and seen.sum() > 10
    cot = jnp.asarray(np.random.default_rng(4).normal(size=q.shape), jnp.float32) * seen[:, :, None, None]
    blocked = jax.jit(lambda q, k, v: blocked_attention(q, k, v, qc, kc, block=8))
    np.testing.assert_allclose(np.asarray(blocked(q, k, v))[seen], np.asarray(dense)[seen], atol=1e-5)
    assert float(jnp.abs(blocked(q, k, v)[:, 5]).max()) == 0.0
    grads = [
        jax.jit(jax.grad(lambda *a, f=f: jnp.sum(f(*a) * cot), argnums=(0, 1, 2)))(q, k, v)
        for f in (lambda q, k, v: dense_from_coords(q, k, v, qc, kc), blocked)
    ]
    for want, got in zip(*grads):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_partial_results_over_key_chunks_merge_into_the_whole():
    """What ring attention does across devices: attend to each chunk of keys, merge by log-sum-exp; the backward
    halves, given the whole output and log-sum-exp, add up to the gradients."""
    q, k, v, coords, mask, cot, real = problem(seed=5)
    forward = jax.jit(lambda q, k, v, qc, kc: blocked_forward(q, k, v, qc, kc, block=8))
    backward = jax.jit(lambda *args: blocked_backward(*args, block=8))
    chunks = [slice(0, 16), slice(16, 30), slice(30, SEQ)]
    out, lse = None, None
    for c in chunks:
        kc = Coords(coords.index[:, c], coords.segment[:, c])
        o, part_lse = forward(q, k[:, c], v[:, c], coords, kc)
        out, lse = (o, part_lse) if out is None else merge_partials(out, lse, o, part_lse)
    whole, whole_lse = forward(q, k, v, coords, coords)
    np.testing.assert_allclose(np.asarray(out)[real], np.asarray(whole)[real], atol=1e-5)
    np.testing.assert_allclose(np.asarray(lse)[real], np.asarray(whole_lse)[real], atol=1e-5)
    shares = [
        backward(q, k[:, c], v[:, c], coords, Coords(coords.index[:, c], coords.segment[:, c]), whole, whole_lse, cot)
        for c in chunks
    ]
    dq, dk = sum(dq for dq, _, _ in shares), jnp.concatenate([dk for _, dk, _ in shares], axis=1)
    want = jax.jit(jax.grad(lambda q, k: jnp.sum(dot_attention(q, k, v, mask) * cot), argnums=(0, 1)))(q, k)
    np.testing.assert_allclose(np.asarray(dq), np.asarray(want[0]), atol=1e-5)
    np.testing.assert_allclose(np.asarray(dk), np.asarray(want[1]), atol=1e-5)


def test_a_query_sees_only_its_segment_and_padding_queries_get_zeros():
    q, k, v, coords, _, _, _ = problem(seed=1)
    out = jax.jit(lambda q, k, v: blocked_attention(q, k, v, coords, block=8))(q, k, v)
    group = HEADS // KV_HEADS
    # the one-token document at row 1, position 20 attends only to itself
    np.testing.assert_allclose(out[1, 20], np.repeat(v[1, 20], group, axis=0), atol=1e-6)
    assert float(jnp.abs(out[0, 37:]).max()) == 0.0


def test_tiles_outside_the_mask_are_never_computed():
    q, k, v, coords, mask, _, _ = problem(seed=2)
    # NaN values in row 0's first tile (positions 0-7, document 1): a dense product would spread them to
    # every query of the row (0 · NaN = NaN); queries 16-36 (document 2) must never touch that tile
    poisoned = v.at[0, :8].set(jnp.nan)
    dense = jax.jit(dot_attention)
    assert np.isnan(np.asarray(dense(q, k, poisoned, mask)[0, 16:37])).all()
    out = jax.jit(lambda q, k, v: blocked_attention(q, k, v, coords, block=8))(q, k, poisoned)
    ref = dense(q, k, v, mask)
    np.testing.assert_allclose(np.asarray(out[0, 16:37]), np.asarray(ref[0, 16:37]), atol=1e-5)


def test_shapes_that_disagree_are_named():
    q, k, v, coords, _, _, _ = problem()
    with pytest.raises(ValueError, match="coordinates"):
        blocked_attention(q, k, v, Coords(coords.index[:, :10], coords.segment[:, :10]))
    with pytest.raises(ValueError, match="block"):
        blocked_attention(q, k, v, coords, block=0)
