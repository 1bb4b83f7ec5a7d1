"""`ragged_attention` against the reference dense attention over each row's whole cache, masked causally."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.generation.ragged_attention import ragged_attention
from jaxseeker.model.layers import grouped_attention

SLOTS, KV_HEADS, HEADS, HEAD_DIM, LENGTH = 6, 2, 4, 8, 32


def _cache(seed: int):
    rng = np.random.default_rng(seed)
    k = jnp.asarray(rng.standard_normal((SLOTS, KV_HEADS, HEAD_DIM, LENGTH)), jnp.float32)
    v = jnp.asarray(rng.standard_normal((SLOTS, KV_HEADS, LENGTH, HEAD_DIM)), jnp.float32)
    return rng, k, v


@pytest.mark.parametrize("tile", [1, 2, 3])
def test_rows_of_any_length_in_any_slot_match_dense_attention(tile):
    """Three queries a row at ends 20, 3, 9 and 0 in slots 4, 1, 5, 0 (blocks of 8: one row reads three blocks, one
    reads one), in tiles that mix long and short rows: the dense reference over the whole length, masked causally."""
    rng, k, v = _cache(0)
    rows = jnp.array([4, 1, 5, 0], jnp.int32)
    ends = jnp.array([20, 3, 9, 0], jnp.int32)
    q = jnp.asarray(rng.standard_normal((4, 3, HEADS, HEAD_DIM)), jnp.float32)
    pos = ends[:, None] + jnp.arange(3)[None]  # [4, 3]
    out = ragged_attention(q, k, v, pos, ends + 3, rows, block=8, tile=tile)
    mask = jnp.arange(LENGTH)[None, None] <= pos[:, :, None]  # [4, 3, length]
    want = grouped_attention(q, k[rows], v[rows], mask)
    np.testing.assert_allclose(out, want, atol=1e-6)  # f32 softmax sums of ≤ 32 terms, rescaled per block
    in_order = ragged_attention(q, k[rows], v[rows], pos, ends + 3, None, block=8, tile=tile)
    np.testing.assert_allclose(in_order, want, atol=1e-6)


def test_keys_past_the_limit_are_hidden_and_a_row_without_keys_reads_zeros():
    rng, k, v = _cache(1)
    q = jnp.asarray(rng.standard_normal((2, 1, HEADS, HEAD_DIM)), jnp.float32)
    pos = jnp.array([[30], [5]], jnp.int32)
    out = ragged_attention(q, k[:2], v[:2], pos, jnp.array([12, 0], jnp.int32), block=8, tile=2)
    mask = jnp.arange(LENGTH)[None, None] < 12  # row 0 sees its first 12 keys only
    np.testing.assert_allclose(out[0], grouped_attention(q[:1], k[:1], v[:1], mask)[0], atol=1e-6)
    assert not np.asarray(out[1]).any()


def test_a_cache_length_that_is_not_whole_blocks_is_refused():
    _, k, v = _cache(2)
    q = jnp.zeros((1, 1, HEADS, HEAD_DIM), jnp.float32)
    with pytest.raises(ValueError, match="32 is not a multiple of block 12"):
        ragged_attention(q, k[:1], v[:1], jnp.zeros((1, 1), jnp.int32), jnp.ones(1, jnp.int32), block=12)
